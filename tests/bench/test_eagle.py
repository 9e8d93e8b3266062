"""bench/eagle.py --record: each head's rows go into that head's own folder, and only there."""
import json
import shutil

from gpt2.load import ASSETS

SMALL = dict(temperatures=(0.0,), n_prompts=1, prompt_tokens=8, n_tokens=4, seeds=1)


def measured(path):
    return json.loads(path.read_text()).get("measured")


def test_record_writes_the_eagle_3_rows_only_beside_the_eagle_head(tmp_path, capsys):
    """A head of one's own recorded: its eagle.json takes the EAGLE rows; the shipped EAGLE-3 head,
    measured beside it but not in the same backbone's folder, is left as it is."""
    from bench.eagle import main

    shipped = ASSETS / "tiny-target" / "eagle3" / "eagle3.json"
    before = shipped.read_bytes()
    mine = tmp_path / "eagle"
    shutil.copytree(ASSETS / "tiny-target" / "eagle", mine)
    try:
        main(heads=str(mine), record=str(mine), **SMALL)
        assert shipped.read_bytes() == before
    finally:  # a regression leaves the shipped card as it was
        shipped.write_bytes(before)
    assert {r["method"] for r in measured(mine / "eagle.json")["rows"]} >= {"eagle", "eagle3"}
    assert "the EAGLE-3 rows are not recorded" in capsys.readouterr().err


def test_record_into_a_backbone_folder_writes_both_heads(tmp_path):
    """The target's own eagle/ and eagle3/ (a copy of the built-in target): both cards take rows."""
    from bench.eagle import main

    target = tmp_path / "tiny-target"
    shutil.copytree(ASSETS / "tiny-target", target)
    for name in ("eagle/eagle.json", "eagle3/eagle3.json"):  # no rows of the shipped run
        config = json.loads((target / name).read_text())
        config.pop("measured", None)
        (target / name).write_text(json.dumps(config))
    main(target=str(target), record=str(target / "eagle"), **SMALL)
    assert measured(target / "eagle" / "eagle.json")["rows"]
    assert measured(target / "eagle3" / "eagle3.json")["rows"]
