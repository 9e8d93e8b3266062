"""The text of a run (picospec_app/report.py): on a terminal, tokens coloured by origin and the
text itself the same as without colours, characters whose bytes span tokens included; counts of
one in the singular."""
import io
import itertools
import re
from contextlib import redirect_stdout

from gpt2.encoder import load_encoder
from gpt2.load import ASSETS
from picospec_app import command
from picospec_app.report import COLORS, colored

ENCODER = load_encoder(ASSETS / "tiny-target")
CODES = re.compile("\033\\[[0-9]+m")


def test_colored_text_keeps_characters_split_over_tokens_whole():
    """A CJK character, an accent and an emoji are several byte tokens each: the coloured text,
    codes removed, is the plain text (it was one replacement character per token), and each
    character takes the colour of the token that completes it."""
    text = "# 中文 é 🎉 x"
    ids = ENCODER.encode(text)
    assert any("\ufffd" in ENCODER.decode([t]) for t in ids)  # some character spans tokens
    origins = list(itertools.islice(itertools.cycle(["draft", "bonus", "resample", "target"]),
                                    len(ids)))
    shown = colored(ENCODER, ids, origins, True)
    assert CODES.sub("", shown) == text == colored(ENCODER, ids, origins, False)
    for char in "中é🎉":
        last = next(i for i in range(len(ids)) if char in ENCODER.decode(ids[:i + 1]))
        if origins[last] in COLORS:
            assert COLORS[origins[last]] + char in shown, (char, shown)


def test_colored_text_of_bytes_that_are_no_character():
    """A lead byte before an ASCII letter and a lone continuation byte: each shown as the plain
    text shows it (a replacement character), nothing lost or added."""
    ids = [ENCODER.encoder[ENCODER.byte_encoder[b]] for b in (0xE4, ord("a"), 0xB8)]
    shown = colored(ENCODER, ids, ["draft"] * 3, True)
    assert CODES.sub("", shown) == ENCODER.decode(ids) == "\ufffda\ufffd"


def text_of(argv):
    out = io.StringIO()
    with redirect_stdout(out):
        command.main(argv)
    return out.getvalue()


def test_counts_of_one_read_in_the_singular(tmp_path):
    """--n_tokens 1 --runs 1: one token, one target call each (no room for a draft), one round:
    "1 token", "1 target call", "1 run", "1 round", and for a one-line --batch "1 prompt" and
    "1 batched target call", not "1 tokens", "median of 1 runs" and the like."""
    text = text_of(["--n_tokens", "1", "--runs", "1"])
    assert text.count("1 token in ") == 2 and text.count("(1 run, ") == 2, text
    assert text.count("1 target call (1.00 tokens per target call)") == 2, text
    assert "speedup" in text and "(1 round); texts" in text, text
    (tmp_path / "one.txt").write_text("x = 1\n")
    batch = text_of(["--batch", str(tmp_path / "one.txt"), "--n_tokens", "1"])
    assert "speculative: 1 prompt x 1 token in " in batch and ", 1 batched target call\n" in batch
    assert "batched the same way: " in batch and batch.count(" 1 batched target call\n") == 2
    for wrong in ("1 tokens", "1 runs", "1 target calls", "1 rounds", "1 prompts"):
        # a count of one, not the last digit of a figure such as "353.1 tokens/s"
        assert not re.search(rf"(?<![\d.]){wrong}\b", text + batch), wrong
