"""A corrupt file is for deletion only inside the Hugging Face cache, link and blob together; a
user's own file is never to be deleted."""


from gpt2.load import ASSETS

FAST = 3.0  # seconds: a mistake in the options is refused before any model loads
TARGET = ASSETS / "tiny-target"


def test_a_bad_file_is_for_deletion_only_inside_the_cache(tmp_path):
    """A file of a snapshot in the Hugging Face cache is a link to a blob: both go, or the next run
    links the same bad blob again."""
    from gpt2.weights import CorruptFile

    snapshot = tmp_path / "hf" / "models--openai-community--gpt2" / "snapshots" / ("c" * 40)
    blob = tmp_path / "hf" / "models--openai-community--gpt2" / "blobs" / ("e" * 40)
    snapshot.mkdir(parents=True)
    blob.parent.mkdir()
    blob.write_text("{")
    (snapshot / "config.json").symlink_to(blob)
    assert str(CorruptFile(snapshot / "config.json", "not valid JSON")).endswith(
        f"not valid JSON; delete it (and {blob}, the file it links to) to download it again")
    theirs = str(CorruptFile(tmp_path / "mine" / "config.json", "not valid JSON"))
    assert "delete" not in theirs and "replace it with a good copy" in theirs
