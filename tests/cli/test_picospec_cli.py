"""The front door as a user meets it: bad command lines for main.py and the benchmarks, each refused
with one clear line, no traceback, no file left behind, and (when the mistake is in the options)
before any model loads. Prompts arrive verbatim; -h shows the methods; Ctrl-C and closed pipes end
quietly. The other commands' tables are in tests/cli/test_gpt2.py and
tests/cli/test_gpt2_train.py."""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.support.clitools import (ROOT, assert_refused, children_cpu, files_under, run_cli,
                                    run_here, sigint_as_in_a_terminal)

FAST = 3.0  # seconds: a mistake in the options is refused before any model loads

# (command line, what the one line must say, whether a model loads before the mistake can be seen)
MAIN_CASES = [
    (["--temprature", "0.8"], r"unknown option --temprature: did you mean --temperature\?", False),
    (["--k", "4"], r"unknown option --k: did you mean --K\?", False),
    (["--method", "cascade", "--draft2", ""], r"--draft2 is empty: name a model", False),
    (["--draft", " "], r"--draft is empty: name a model", False),
    (["--method", "eagle", "--tree", ""], r"--tree '': use sparse, chain or a JSON list", False),
    (["--method", "eagle", "--tree", "[[0],[1000000]]"],
     r"--tree node \[1000000\] asks for rank 1000000, but the vocabulary has \d+ tokens", True),
    (["--method", "medusa", "--window", "4"],
     r"--window is an option of lookahead, not of --method medusa", False),
    (["--method", "speculative", "--no-merged"], r"--merged is an option of blockwise", False),
    (["--method", "autoregressive", "--K", "3"],
     r"--K is an option of .*not of --method autoregressive", False),
    (["--method", "prompt_lookup", "--draft", "ngram"],
     r"uses no draft model, so --draft does not apply", False),
    (["--method", "sequoia", "--draft", "ngram"],
     r"no acceptance vector of draft 'ngram' for target 'tiny-target' "
     r"was measured .*give --acceptance", True),
    (["--method", "sequoia", "--acceptance", "0.6,0.6"],
     r"--acceptance 0.6,0.6: it sums to 1.2: .* they sum to at most 1", False),
    (["--temperature", "hot"], r"--temperature must be a number; got 'hot'", False),
    (["--temperature", "inf"], r"--temperature must be a finite number", False),
    (["--temperature", "-1"], r"--temperature must be >= 0", False),
    (["--seed", "abc"], r"--seed must be an integer; got 'abc'", False),
    (["--seed", "-3"], r"--seed must be >= 0", False),
    (["--top_p", "nan"], r"--top_p must be a finite number", False),
    (["--top_p", "1.5"], r"--top_p must be <= 1", False),
    (["--top_p", "0"], r"--top_p must be > 0", False),
    (["--top_k", "0"], r"--top_k must be >= 1", False),
    (["--top_k", "2.5"], r"--top_k must be an integer; got '2.5'", False),
    (["--n_tokens", "nan"], r"--n_tokens must be an integer; got 'nan'", False),
    (["--n_tokens", "0"], r"--n_tokens must be >= 1", False),
    (["--n_tokens", "1e3"], r"--n_tokens must be an integer", False),
    (["--n_tokens"], r"--n_tokens needs a value", False),
    (["--K", "0"], r"--K must be >= 1", False),
    (["--K", "4.0"], r"--K must be an integer; got '4.0'", False),
    (["--K", "100"], r"--K must be <= 64", False),
    (["--K", "four"], r"--K must be an integer", False),
    (["--method", "magic"], r"unknown --method 'magic'", False),
    (["--method", "specultive"], r"did you mean speculative\?", False),
    (["--method", "greedy", "--temperature", "0.8"], r"greedy-only.*--method speculative", False),
    (["--method", "blockwise", "--temperature", "1"], r"greedy-only.*--posterior lossless", False),
    (["--method", "medusa", "--posterior", "greedy", "--temperature", "0.7"],
     r"--posterior greedy is greedy-only", False),
    (["--method", "medusa", "--posterior", "beam"], r"unknown --posterior 'beam'", False),
    (["--method", "medusa", "--tree", "[0,1]"], r"--tree '\[0,1\]': use sparse, chain, cartesian",
     False),
    (["--method", "medusa", "--tree", "[[0"], r"--tree", False),
    (["--method", "medusa", "--tree", "[" * 5000 + "]" * 5000],
     r"--tree '\[{75}\.\.\.': use sparse, chain", False),
    (["--method", "medusa", "--topk", "1"],
     r"--tree sparse \(the default.*--topk 1 offers ranks 0..0: give --topk 4 or more", True),
    (["--method", "medusa", "--tree", "[[0],[0]]"], r"lists node \[0\] twice", False),
    # a list of paths whose ranks are not whole numbers: the node named
    (["--method", "medusa", "--tree", "[[0],[0.5]]"],
     r"^error: --tree \[\[0\],\[0\.5\]\]: node \[0\.5\]: ranks must be non-negative "
     r"integers$", False),
    (["--method", "eagle", "--tree", "[[true]]"], r"node \[true\]: ranks must be non-negative",
     False),
    (["--method", "layer_skip", "--skip", "a9"], r"^error: --skip a9: .*layer 0\.\.5", True),
    (["--method", "medusa", "--tree", "[[0],[1,0]]"], r"has no parent", False),
    (["--method", "medusa", "--tree", "[[0],[0,0],[0,0,0]]"],
     r"^error: --tree \[\[0\],\[0,0\],\[0,0,0\]\]: node \[0, 0, 0\] has depth 3 but there are "
     r"only 2 heads, one per level: keep paths of at most 2 nodes$", True),
    # a rank past --topk's bound: no advice to give a --topk the door refuses
    (["--method", "medusa", "--tree", "[[200]]"],
     r"--tree \[\[200\]\] asks for candidate rank 200, but --topk 10 offers ranks 0..9: --topk is "
     r"at most 100: use ranks below 100", True),
    (["--method", "medusa", "--heads", "/nonexistent"], r"--heads /nonexistent: no such folder",
     False),
    (["--method", "medusa", "--topk", "0"], r"--topk must be >= 1", False),
    (["--method", "medusa", "--epsilon", "nan"], r"--epsilon must be a finite number", False),
    (["--method", "blockwise", "--K", "9"], r"--K 9 is more than", True),
    (["--method", "blockwise", "--merged=maybe"], r"--merged is a switch", False),
    (["--method", "greedy", "--schedule", "fast"], r"unknown --schedule 'fast'", False),
    (["--method", "greedy", "--confidence", "0"], r"--confidence must be > 0", False),
    (["--method", "prompt_lookup", "--num_pred_tokens", "-1"], r"--num_pred_tokens must be >= 1",
     False),
    (["--method", "lookahead", "--ngram", "1"], r"--ngram must be >= 2", False),
    (["--method", "lookahead", "--window", "x"], r"--window must be an integer", False),
    (["--method", "rest", "--num_draft_nodes", "0"], r"--num_draft_nodes must be >= 1", False),
    (["--method", "specinfer", "--expansion", "4,4,4,4"],
     r"--expansion 4,4,4,4: a tree of 340 draft nodes, more "
                                                          r"than the 256 one target call scores",
                                                          False),
    (["--method", "specinfer", "--expansion", "1,0"], r"--expansion must be >= 1; got 0", False),
    # a tree larger than one target call scores: said at the start, not after some tokens
    (["--method", "lookahead", "--window", "16", "--ngram", "16", "--guesses", "16"],
     r"^error: window W = 16, ngram N = 16 and guesses G = 16 make trees of up to \(W \+ G\)\(N "
     r"- 1\) = 480 nodes, more than the 256 one target call scores: lower W, N or G$", True),
    (["--method", "medusa", "--tree", json.dumps([[i] for i in range(300)])],
     r"^error: --tree \[\[0\], \[1\], .{30,60}\.\.\.: a tree of 300 nodes, more than the 256 "
     r"one target call scores: give fewer paths$", False),
    (["--method", "rest", "--datastore", "missing.npz"],
     r"--datastore missing.npz does not exist.*--build_datastore", False),
    (["--method", "rest", "--datastore", "nodir/x.npz", "--build_datastore"],
     r"the folder .*nodir does not exist", False),
    (["--method", "rest", "--datastore", "."], r"--datastore \. is a folder", False),
    (["--method", "rest", "--build_datastore"],
     r"--build_datastore builds the file --datastore names: add --datastore", False),
    (["--method", "rest", "--datastore", str(ROOT / "main.py" / "x.npz"), "--build_datastore"],
     r"main.py is a file, not a folder", False),
    (["--method", "rest", "--datastore", str(ROOT / "main.py")],
     r"is not a REST datastore: it is a file that begins", True),
    (["--prompt", ""], r"the prompt is empty", False),
    (["--prompt", "x", "--prompt", "y"], r"--prompt is given twice", False),
    (["--prompt", "x", "--prompt_file", "p.txt"], r"--prompt and --prompt_file are both given",
     False),
    # a folder or a missing file is said as such, not as text that is not UTF-8
    (["--prompt_file", "/nonexistent/p.txt"], r"^error: --prompt_file /nonexistent/p.txt: no such "
                                              r"file$", False),
    (["--prompt_file", "."], r"^error: --prompt_file \.: it is a folder; name a file$", False),
    (["--batch", "."], r"^error: --batch \.: it is a folder; name a file$", False),
    # an endless input is refused at a bound, not read until memory runs out
    (["--prompt_file", "/dev/zero"], r"^error: --prompt_file /dev/zero: more than 16,000,000 "
                                     r"characters \(is it endless\?\); a prompt is a few", False),
    (["--batch", "/dev/zero"], r"^error: --batch /dev/zero: more than 16,000,000 characters",
     False),
    (["--prompt_file", "blank.txt"], r"--prompt_file blank.txt: it is empty; put the prompt in it",
     False),
    ([b"--prompt=def f\xff(x):"], r"--prompt is not UTF-8 text .*--prompt_file", False),
    (["--n_tokens", "1000"],
     r"exceeds the context window of the target 'tiny-target', 256 tokens", True),
    (["--target", "~no-such-user-picospec/x"], r"^error: local folder ~no-such-user-picospec/x: "
     r"cannot expand ~no-such-user-picospec \(no such user\): write the folder's path in full$",
     False),
    (["--device", "tpu"], r"unknown --device 'tpu'", False),
    (["--device", "cuda"], r"unknown --device 'cuda' \(did you mean gpu\?\): choose one of cpu, "
                           r"gpu$", False),
    (["--json=maybe"], r"--json is a switch", False),
    (["--offline", "yes"], r"--offline is a switch and takes no value", False),
    (["--no-json", "yes"], r"error: --no-json is a switch and takes no value; got 'yes' after",
     False),
    (["--no-offline", "1"], r"error: --no-offline is a switch and takes no value", False),
    (["--no-json=yes"], r"error: --json is a switch: write --json or --no-json, with no value",
     False),
    (["--help=yes"], r"error: --help takes no value: write --help \(or -h\) alone", False),
    (["--threads", "257"], r"--threads must be <= 256; got 257", False),
    (["-x"], r"unknown option -x", False),
    # a prefix is refused (never taken for the option it begins), and the option named
    (["--temp", "0.5"], r"unknown option --temp: did you mean --temperature\? \(see --help\)",
     False),
    (["--top", "3"], r"unknown option --top: did you mean --topk or --top_k or --top_p\? \(see "
                     r"--help\)", False),
    (["--method", "spec"], r"unknown --method 'spec' \(did you mean speculative or specinfer\?\)",
     False),
    # other libraries' names for an option (Hugging Face's assisted generation)
    (["--model", "gpt2"], r"unknown option --model: did you mean --target\?", False),
    (["--max_new_tokens", "5"], r"unknown option --max_new_tokens: did you mean --n_tokens\?",
     False),
    (["--num_assistant_tokens", "3"], r"--num_assistant_tokens: did you mean --K\?", False),
    (["--assistant_model", "x"], r"--assistant_model: did you mean --draft\?", False),
    (["--num_speculative_tokens", "3"], r"--num_speculative_tokens: did you mean --K\?", False),
    (["--do_sample"], r"unknown option --do_sample: did you mean --temperature\?", False),
    # - for _, as other command lines write it: the option it spells, not the closest other
    (["--top-k", "5"], r"unknown option --top-k: did you mean --top_k\? \(see --help\)", False),
    (["--max-new-tokens", "5"], r"--max-new-tokens: did you mean --n_tokens\?", False),
    # other projects' names for a method
    (["--method", "assisted"], r"unknown --method 'assisted' \(did you mean greedy\?\)", False),
    (["--method", "Prompt-Lookup"], r"'Prompt-Lookup' \(did you mean prompt_lookup\?\)", False),
    (["--method", "draft_and_verify"], r"\(did you mean layer_skip\?\)", False),
    (["--n_tok", "3"], r"unknown option --n_tok: did you mean --n_tokens\?", False),
    # Leviathan et al.'s letter for K; a name going on past picospec's (a paper's or a library's)
    (["--gamma", "3"], r"unknown option --gamma: did you mean --K\?", False),
    (["--method", "lookahead_decoding"], r"'lookahead_decoding' \(did you mean lookahead\?\)",
     False),
    (["--method", "prompt-lookup-decoding"], r"\(did you mean prompt_lookup\?\)", False),
    (["--method", "eagle2_tree"], r"'eagle2_tree' \(did you mean eagle2\?\)", False),
    (["--n_tokens_max", "3"], r"unknown option --n_tokens_max: did you mean --n_tokens\?", False),
    # a whole part of a name (or of a few) names it
    (["--method", "lookup"], r"'lookup' \(did you mean prompt_lookup\?\)", False),
    (["--method", "exit"], r"'exit' \(did you mean early_exit\?\)", False),
    (["--tokens", "3"], r"unknown option --tokens: did you mean --n_tokens\?", False),
    (["--memory", "3"], r"unknown option --memory: did you mean --batch_memory\?", False),
    # a switch's no- form is named only when typed so
    (["--no", "3"], r"unknown option --no: did you mean --nodes\?", False),
    (["--prompt", "-x"], r"--prompt needs a value \(text\); one that starts with - is written "
                         r"--prompt=VALUE", False),
    (["--nojson"], r"unknown option --nojson: did you mean --no-json\?", False),
    (["--json", "--no-json"], r"--json is given twice: keep one", False),
    (["hello"], r"unexpected argument 'hello'", False),
    (["--batch", "/nonexistent/prompts.txt"], r"--batch /nonexistent/prompts.txt: no such file",
     False),
    (["--batch", "empty.txt"], r"--batch empty.txt: no prompts", False),
    # a name longer than the file system allows: the option named, not the bare name
    (["--batch", "x" * 300], r"^error: --batch x{300}: File name too long$", False),
    (["--method", "rest", "--datastore", "x" * 300],
     r"^error: --datastore x{300}: File name too long$", False),
    (["--method", "rest", "--datastore", f"{'x' * 300}/s.npz", "--build_datastore"],
     r"^error: --datastore x{300}/s.npz: File name too long$", False),
    (["--batch", "binary.txt"], r"--batch binary.txt: cannot read it as UTF-8", False),
    (["--prompt_file", "binary.txt"], r"--prompt_file binary.txt: cannot read it as UTF-8 text "
                                      r"\(.*\); save it as UTF-8$", False),
    (["--batch", "empty.txt", "--prompt", "hi"],
     r"--batch reads its prompts from empty.txt .*drop --prompt$", False),
    (["--batch", "empty.txt", "--prompt_file", "p.txt"], r"drop --prompt_file", False),
    (["--target", "gpt-17"], r"gpt-17", True),
    (["--target", "gpt2"], r"gpt2.*(offline|cache)", True),
    (["--draft", "gpt2"], r"gpt2.*(offline|cache)", True),
    (["--target", "./typo"], r"local folder typo does not exist", False),
    (["--target", "../x"], r"local folder \.\./x does not exist", False),
    (["--target", "owner/..name"], r"unknown model 'owner/\.\.name'.*repo id", False),
    (["--target", "a/b/c"], r"unknown model 'a/b/c'", False),
]

BENCH_CASES = [
    (["-m", "bench.ops", "--families", ""], r"--families must be names, comma-separated like "
                                            r"Haswell,SkylakeX; got ''"),
    (["-m", "bench.ops", "--families", "Haswell,Haswell"], r"names a family twice"),
    (["-m", "bench.ops", "--child", "--families", "Haswell"], r"--child .*drop --families"),
    (["-m", "bench.ops", "--quiet", "1"], r"--quiet .*add --out FILE, or drop --quiet"),
    (["-m", "bench.ops", "--out", "p.txt/x.md"], r"p\.txt is a file, not a folder"),
    (["-m", "bench.harness", "--K", "0"], r"--K must be >= 1"),
    (["-m", "bench.harness", "--target", "ngram"], r"--target ngram: the n-gram model drafts only"),
    (["-m", "bench.eagle", "--target", "ngram"], r"--target ngram: the n-gram model drafts only"),
    (["-m", "bench.eagle", "--record", "."],
     r"--record \. holds no eagle.json: give the folder of the EAGLE head"),
    (["-m", "bench.token_trees", "--max_depth", "1"], r"--max_depth must be >= 2; got 1"),
    (["-m", "bench.token_trees", "--record", "."],
     r"--record \. is not the folder of tiny-target, the target "
     r"measured"),
    (["-m", "bench.token_trees", "--record", str(ROOT / "gpt2" / "assets" / "tiny-target"),
      "--temperatures", "0"],
     r"--record stores the vectors at temperatures 0 and 1: include both in --temperatures"),
    (["-m", "bench.harness", "--temperatures", "0,x"], r"--temperatures must be a number; got 'x'"),
    (["-m", "bench.harness", "--temperatures", "0,,1"],
     r"--temperatures must be numbers, comma-separated"),
    (["-m", "bench.harness", "--sweep_K", "1,100"], r"--sweep_K must be <= 64"),
    (["-m", "bench.harness", "--out", "nodir/t.md"],
     r"--out nodir/t.md: the folder .* does not exist"),
    (["-m", "bench.harness", "--out", "/proc/t.md"],
     r"--out /proc/t.md: cannot write in /proc \(.*\): give a folder "
                                                     # found before the benchmark, not after
                                                     "you can write to"),
    (["-m", "bench.harness", "--seeds", "1.5"], r"--seeds must be an integer"),
    (["-m", "bench.harness", "--n_promts", "3"], r"did you mean --n_prompts\?"),
    (["-m", "bench.trees"], r"nothing to measure"),
    (["-m", "bench.trees", "--build", str(ROOT / "gpt2" / "assets" / "tiny-target" / "medusa"),
      "--drafting"],
     r"--build DIR only writes DIR/medusa_choices.json and measures nothing: run it alone"),
    (["-m", "bench.trees", "--build", "badheads"],
     r"badheads/heads.json: has no accuracy.rank_share"),
    (["-m", "bench.trees", "--build", "brokenheads"], r"brokenheads/heads.json: not valid JSON"),
    (["-m", "bench.batch", "--method", "greedy"],
     r"--method greedy is greedy-only: pass --temperature 0"),
    (["-m", "bench.batch", "--method", "medusa", "--pair", "124M"], r"use --pair tiny"),
    (["-m", "bench.trees", "--medusa", "/nope"], r"/nope holds no heads.json"),
    (["-m", "bench.trees", "--budgets", "7,x"], r"--budgets must be an integer"),
    (["-m", "bench.trees", "--pld_sweep", "0"], r"--pld_sweep must be >= 1"),
    (["-m", "bench.trees", "--build", "/nonexistent"], r"--build /nonexistent: no such folder"),
    (["-m", "bench.trees", "--drafting", "--greedy"], r"did you mean --greedy_only\?"),
    (["-m", "bench.load", "--shapes", "7B"], r"unknown --shapes '7B': choose one of 124M, 355M"),
    (["-m", "bench.load", "--K", "-1"], r"--K must be >= 1"),
    (["-m", "bench.peers", "--n_tokens", "nan"], r"--n_tokens must be an integer"),
    (["-m", "bench.peers", "--drafts", "x"], r"did you mean --draft\?"),
    (["-m", "tools.readme", "--check", "--fix"], r"unknown option --fix"),
]


@pytest.fixture
def folder(tmp_path):
    """A fresh folder with the files some cases name (a prompts file, an empty one, a binary
    one)."""
    (tmp_path / "prompts.txt").write_text("def f(x):\nimport os\n")
    (tmp_path / "p.txt").write_text("def f(x):")
    (tmp_path / "empty.txt").write_text("\n\n")
    (tmp_path / "binary.txt").write_bytes(b"\xff\xfe\x00bad")
    (tmp_path / "blank.txt").write_text("")
    # heads.json without a record, not JSON
    for name, text in (("badheads", '{"n_heads": 2}'), ("brokenheads", "{")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "heads.json").write_text(text)
    (tmp_path / "fake").mkdir()
    # an EAGLE record that is not the head measured
    (tmp_path / "fake" / "eagle.json").write_text("{}")
    return tmp_path


@pytest.mark.parametrize("args, message, loads", MAIN_CASES,
                         ids=[" ".join(map(str, c[0]))[:60] for c in MAIN_CASES])
def test_main_refuses_bad_command_lines(args, message, loads, folder):
    before = files_under(folder)
    r = run_here(["main.py", *args], folder)
    assert_refused(r, message, folder, before, max_seconds=None if loads else FAST)


@pytest.mark.parametrize("args, message", BENCH_CASES,
                         ids=[" ".join(c[0])[:60] for c in BENCH_CASES])
def test_benchmarks_refuse_bad_command_lines(args, message, folder):
    before = files_under(folder)
    assert_refused(run_here(args, folder), message, folder, before, max_seconds=FAST)



PROCESS_CASES = [(["main.py", "--temprature", "0.8"], r"did you mean --temperature\?"),
                 (["main.py", b"--prompt=def f\xff(x):"], r"--prompt is not UTF-8 text"),
                 (["main.py", "--target", "./typo"], r"local folder typo does not exist"),
                 (["-m", "bench.harness", "--K", "0"], r"--K must be >= 1"),
                 (["-m", "picospec.check", "--samples", "x"], r"--samples must be an integer")]


@pytest.mark.parametrize("args, message", PROCESS_CASES,
                         ids=[str(c[0][:3])[:60] for c in PROCESS_CASES])
def test_a_refusal_in_a_real_process_is_exit_2_and_one_line(args, message, folder):
    """The tables above run in this process (tests/support/clitools.py run_here); a few run as a
    user starts them, so that the exit status, the one line on stderr and the argv decoding are
    those of a real Python process."""
    before = files_under(folder)
    r = run_cli(args, folder)
    assert r.returncode == 2
    assert_refused(r, message, folder, before)

ROOM_CASES = [
    (["-m", "bench.harness", "--drafts", "ngram", "--prompt_tokens", "64", "--n_tokens", "185",
      "--prompt_lookup",
      "--out", "t.md", "--quiet", "0"],  # a page waits for a quiet machine; not this test
      r"--prompt_tokens 64 \+ \d+ for the copy-heavy prompts \+ --n_tokens 185 = \d+ tokens, more "
                        r"than the model's context window of 256: lower --prompt_tokens or "
                        r"--n_tokens"),
    (["-m", "bench.harness", "--drafts", "ngram", "--prompt_tokens", "200", "--n_tokens", "57"],
     r"= 257 tokens"),
    (["-m", "bench.eagle", "--n_tokens", "250"],
     r"--prompt_tokens 64 \+ --n_tokens 250 = 314 tokens"),
    (["-m", "bench.trees", "--drafting", "--n_tokens", "190"],
     r"copy-heavy prompts \+ --n_tokens 190"),
    (["-m", "bench.token_trees", "--n_tokens", "250"], r"= 314 tokens"),
    (["-m", "bench.eagle", "--record", "fake"],
     r"--record fake is not the EAGLE head measured \(.*tiny-target/eagle\)"),
    (["-m", "bench.peers", "--draft", "ngram"],
     r"--draft ngram: transformers runs the same checkpoints as picospec, "
                                                r"and the n-gram has none"),
    (["-m", "bench.batch", "--n_tokens", "200"],
     r"the longest prompt's 66 tokens \+ --n_tokens 200 = 266 tokens, "
                                                 r"more than the model's context window of 256: "
                                                 r"lower --n_tokens$"),
]


@pytest.mark.parametrize("args, message", ROOM_CASES, ids=[" ".join(c[0])[:60] for c in ROOM_CASES])
def test_benchmarks_refuse_prompts_that_do_not_fit_before_any_run(args, message, folder):
    """Prompt and new tokens beyond the context window: one line once the model has loaded, before
    the first run (bench.harness used to run its whole main table, then fail in the prompt lookup
    table without writing --out)."""
    before = files_under(folder)
    assert_refused(run_here(args, folder), message, folder, before)


@pytest.mark.parametrize("args", [["main.py", "--method", "rest"],
                                  ["-m", "bench.trees", "--drafting", "--n_prompts", "1", "--seeds",
                                   "1"]])
@pytest.mark.parametrize("a_file", ["cache", "cache/rest"])
def test_a_cache_folder_that_is_a_file_is_refused_before_work(args, a_file, folder):
    """Before a REST datastore build (bench.trees built the datastore for 15 s first), the cache
    folder or its rest/ folder."""
    (folder / a_file).parent.mkdir(exist_ok=True)
    (folder / a_file).write_text("not a folder")
    before = files_under(folder)
    r = run_here(args, folder, env={"PICOSPEC_CACHE": str(folder / "cache")})
    cache = re.escape(str(folder / "cache"))
    assert_refused(r, rf"the cache folder {cache}/rest \(in PICOSPEC_CACHE, {cache}\) cannot be "
                      rf"made: {re.escape(str(folder / a_file))} is a file", folder, before,
                   max_seconds=FAST if args[0] == "main.py" else None)


def test_a_folder_where_the_cache_keeps_a_datastore_is_named_not_deleted(folder):
    """No advice to delete what picospec did not make."""
    (folder / "cache" / "rest" / "tiny-target-stdlib-train.npz").mkdir(parents=True)
    before = files_under(folder)
    r = run_here(["main.py", "--method", "rest"], folder,
                 env={"PICOSPEC_CACHE": str(folder / "cache")})
    assert_refused(r, r"tiny-target-stdlib-train.npz is a folder where picospec keeps the REST "
                      r"datastore it builds: move that folder away", folder, before)
    assert "delete" not in r.stderr


def test_a_hugging_face_cache_that_is_a_file_is_refused_before_a_request(folder):
    """Online, with the hub at a port nothing listens on: the cache is named first (a request
    would fail otherwise, and after huggingface_hub's retries)."""
    (folder / "hf").write_text("not a folder")
    before = files_under(folder)
    r = run_cli(["main.py", "--target", "gpt2"], folder,
                env={"HF_HUB_CACHE": str(folder / "hf"), "PICOSPEC_OFFLINE": "0",
                     "HF_ENDPOINT": "http://127.0.0.1:9"})
    assert_refused(r, r"^error: cannot write openai-community/gpt2 into the Hugging Face cache "
                      r".*hf \(a file is in the way: .*hf\); set HF_HUB_CACHE", folder, before,
                   max_seconds=FAST + 2)  # + a new interpreter's start


def test_the_built_in_pair_needs_no_cache_folder(folder):
    (folder / "cache").write_text("not a folder")
    r = run_here(["main.py", "--n_tokens", "2", "--runs", "1", "--json"], folder,
                 env={"PICOSPEC_CACHE": str(folder / "cache")})
    assert r.returncode == 0, r.stderr


def test_there_are_at_least_60_cases_for_main_and_the_benchmarks():
    """The other commands' tables (tests/cli/test_gpt2.py, tests/cli/test_gpt2_train.py) check that
    each of their commands has cases."""
    benches = {args[1] for args, _ in BENCH_CASES}
    assert len(MAIN_CASES) + len(BENCH_CASES) >= 60
    assert {"bench.harness", "bench.trees"} <= benches


@pytest.mark.parametrize("prompt",
                         ["Hello, world", "1e5", "-x", "[1,2]", "True", "None", r"a\nb", "a\nb",
                          "0x10",
                                    "(1, 2)", "{'a': 1}", "  spaced  ", "--"])
def test_prompts_arrive_verbatim(prompt, tmp_path):
    r = run_here(["main.py", f"--prompt={prompt}", "--method", "autoregressive", "--n_tokens", "1",
                  "--runs", "1", "--json"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["prompts"] == [prompt]


@pytest.mark.parametrize("prompt", ["123", "a, b", "-1e5", "-3", "1e5", "--x=y"])
def test_prompts_after_a_space_arrive_verbatim(prompt, tmp_path):
    """`--prompt 123` stays the text 123 and "a, b" one string; a value that looks like a negative
    number is a value, and "--x=y" goes after = (--prompt=--x=y)."""
    args = [f"--prompt={prompt}"] if prompt.startswith("--") else ["--prompt", prompt]
    r = run_here(["main.py", *args, "--method", "autoregressive", "--n_tokens", "1", "--runs", "1",
                  "--json"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["prompts"] == [prompt]


def test_help_lists_every_option_with_its_default(tmp_path):
    """python main.py -h: every shared option and its default; --method M --help: every option M
    takes (its own and the shared ones that apply) with its default."""
    from picospec.methods import METHODS
    from picospec_app.plan import SHARED, options_for

    def shown(o):  # a list or tuple as the command line takes it: A,B
        value = (",".join(map(str, o.default)) or "none" if isinstance(o.default, (list, tuple))
                 else o.default)
        if isinstance(value, str) and not value.isprintable():
            value = repr(value)
        return f"(default: {str(value).lower() if o.type is bool else value})"

    for args, options in [([], SHARED)] + [(["--method", m.name], options_for(m)) for m in METHODS]:
        r = run_here(["main.py", *args, "--help"], tmp_path)
        assert r.returncode == 0 and r.stderr == "", r.stderr
        # one entry per option, its wrapped lines joined (argparse wraps at spaces and hyphens)
        entries = {e.split()[0].rstrip(","): "".join(e.split())
                   for e in re.split(r"\n  (?=-)", r.stdout)}
        for o in options:
            assert f"--{o.name}" in entries, (args, o.name)
            if o.default is not None:
                assert "".join(shown(o).split()) in entries[f"--{o.name}"], (args, o.name)
    r = run_here(["main.py", "--method", "specinfer", "--help"], tmp_path)
    assert "(default: 1,1,2)" in r.stdout, r.stdout  # a tuple, not (1, 1, 2)


def test_one_escape_rule_for_prompt_and_batch(tmp_path):
    r = run_here(["main.py", "--prompt", r"a\nb\\n", "--escapes", "--method", "autoregressive",
                  "--n_tokens", "1", "--runs", "1",
                 "--json"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["prompts"][0] == "a\nb\\n"
    (tmp_path / "prompts.txt").write_text("def f(x):\\n    return\nimport os\n")
    for escapes, first in ((["--escapes"], "def f(x):\n    return"),
                           ([], "def f(x):\\n    return")):
        r = run_here(["main.py", "--batch", "prompts.txt", "--n_tokens", "4", "--json", *escapes],
                     tmp_path)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["prompts"] == [first, "import os"]


def test_batch_lines_end_at_newlines_only_and_every_prompt_that_fits_runs(tmp_path):
    """A form feed or U+2028 inside a line stays in its prompt (str.splitlines would cut there),
    "\r\n" ends a line as "\n" does, blank lines are skipped; a prompt of 250 tokens with --n_tokens
    6 fills the 256-token context exactly and runs (with K = 4 drafts per step: the methods stop
    drafting at the context's end)."""
    (tmp_path / "prompts.txt").write_bytes("a\x0cb\r\nc\u2028d\n  \n\ne f\n".encode())
    r = run_here(["main.py", "--batch", "prompts.txt", "--n_tokens", "2", "--json"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["prompts"] == ["a\x0cb", "c\u2028d", "e f"]
    (tmp_path / "long.txt").write_text(" x" * 250 + "\n")  # 250 tokens of " x"
    r = run_here(["main.py", "--batch", "long.txt", "--n_tokens", "6", "--K", "4", "--temperature",
                  "0", "--json"],
                tmp_path)
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["prompts"]) == 1 and all(json.loads(r.stdout)["same_output"])
    (tmp_path / "long.txt").write_text("short\n\n" + " x" * 250 + "\n")  # the long prompt on line 3
    r = run_here(["main.py", "--batch", "long.txt", "--n_tokens", "7", "--json"], tmp_path)
    assert (r.returncode == 2
            and "the prompt on line 3 of long.txt (250 tokens) plus --n_tokens 7 exceeds the "
                "context window of the target 'tiny-target', 256 tokens" in r.stderr)


@pytest.mark.parametrize("extra",
                         [["--temperature", "1e-40"], ["--top_p", "1e-50"],
                          ["--temperature", "1e308"]])
def test_extreme_sampling_settings_run(extra, tmp_path):
    """Settings at the edge of float32 (log p / T overflowing, top_p times the mass underflowing)
    sample from the limit law instead of failing with an IndexError."""
    r = run_here(["main.py", "--method", "speculative", "--n_tokens", "4", "--runs", "1", "--json",
                  *extra], tmp_path)
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["runs"][1]["output_ids"][0]) == 4


def test_a_closed_standard_input_is_one_line(tmp_path):
    """`--prompt_file -` with standard input closed (`<&-` in a shell): Python's sys.stdin is
    None."""
    r = subprocess.run(["sh", "-c", f"'{sys.executable}' '{ROOT / 'main.py'}' --prompt_file - <&-"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=60,
                       env={"PATH": "/usr/bin:/bin", "PICOSPEC_OFFLINE": "1"})
    assert r.returncode == 2 and r.stderr == ("error: --prompt_file -: standard input is closed; "
                                              "pipe the prompt in or name a file\n"), r.stderr


def test_prompt_from_stdin_and_file(tmp_path):
    text = "def f(x):\n    return x\n"
    r = run_here(["main.py", "--prompt_file", "-", "--method", "autoregressive", "--n_tokens", "2",
                  "--runs", "1", "--json"], tmp_path,
                stdin=text)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["prompts"][0] == text
    (tmp_path / "p.txt").write_text(text)
    r = run_here(["main.py", "--prompt_file", "p.txt", "--method", "autoregressive", "--n_tokens",
                  "2", "--runs", "1", "--json"], tmp_path)
    assert json.loads(r.stdout)["prompts"][0] == text


def test_batch_from_stdin(tmp_path):
    """--batch - reads its prompts from standard input, as --prompt_file - reads its prompt; the
    rows name it."""
    r = run_here(["main.py", "--batch", "-", "--method", "autoregressive", "--n_tokens", "2"],
                 tmp_path, stdin="def f(x):\n\nimport os\n")
    assert r.returncode == 0, r.stderr
    assert "row 1 (line 1 of standard input)" in r.stdout, r.stdout
    assert "row 2 (line 3 of standard input)" in r.stdout, r.stdout
    r = run_here(["main.py", "--batch", "-", "--n_tokens", "2", "--json"], tmp_path,
                 stdin="a\nb\n")
    assert json.loads(r.stdout)["prompts"] == ["a", "b"]


@pytest.mark.parametrize("locale", ["C", "C.UTF-8"])
def test_a_prompt_on_standard_input_that_is_not_utf8_is_one_line_before_loading(locale, tmp_path):
    """Python's C locale reads stdin's stray bytes as surrogates; a UTF-8 locale raises on them."""
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), "PICOSPEC_OFFLINE": "1",
           "HOME": str(tmp_path), "LC_ALL": locale}
    start = children_cpu()
    r = subprocess.run([sys.executable, str(ROOT / "main.py"), "--prompt_file", "-"],
                       input=b"def f\xff(x):\n", capture_output=True, env=env, cwd=tmp_path)
    r.stdout, r.stderr = r.stdout.decode(), r.stderr.decode()
    r.seconds = children_cpu() - start
    assert r.returncode == 2
    assert_refused(r, r"^error: --prompt_file -: (standard input is not|cannot read it as) UTF-8 "
                      r"text", tmp_path, [], max_seconds=FAST)


@pytest.mark.parametrize("where", ["argv", "stdin"])
def test_utf8_text_read_in_a_c_locale_is_the_prompt(where, tmp_path):
    """LC_ALL=C without UTF-8 mode: Python reads argv's and stdin's UTF-8 bytes as surrogates;
    the prompt is those bytes read as UTF-8, not a refusal that calls them something else."""
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), "PICOSPEC_OFFLINE": "1",
           "HOME": str(tmp_path), "LC_ALL": "C", "PYTHONUTF8": "0"}
    text = "\u2603 caf\u00e9"
    args = ["--prompt_file", "-"] if where == "stdin" else ["--prompt", text.encode()]
    r = subprocess.run([sys.executable, str(ROOT / "main.py"), *args, "--method",
                        "autoregressive", "--n_tokens", "1", "--json"],
                       input=text.encode() if where == "stdin" else None, capture_output=True,
                       env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads(r.stdout)["prompts"] == [text]


def test_help_lists_methods_and_a_methods_options(tmp_path):
    from picospec.methods import METHODS

    for flag in ("-h", "--help"):
        r = run_here(["main.py", flag], tmp_path)
        assert r.returncode == 0 and r.stderr == "" and r.seconds < FAST
        assert all(m.name in r.stdout for m in METHODS) and "--temperature" in r.stdout
        words = " ".join(r.stdout.split())  # argparse wraps lines by the program's path length
        assert "see the list below" in words and METHODS[-1].name in r.stdout.splitlines()[-1]
    r = run_here(["main.py", "--method", "medusa", "--help"], tmp_path)
    assert (r.returncode == 0 and "--posterior" in r.stdout and "--tree" in r.stdout
            and "--K" not in r.stdout)
    words = " ".join(r.stdout.split())
    assert "below" not in words and "-h lists them" in words  # no list under it
    assert files_under(tmp_path) == []


@pytest.mark.parametrize("sig, code, said", [(signal.SIGINT, 130, "interrupted"),
                                             (signal.SIGTERM, 143, "terminated")])
def test_ctrl_c_during_a_datastore_build_exits_130_and_leaves_nothing(tmp_path, sig, code, said):
    """Ctrl-C (to the whole group, as a terminal sends it) and SIGTERM (`kill`, to the command
    alone) each end the build with one line and leave no file."""
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), "PICOSPEC_OFFLINE": "1",
           "PICOSPEC_CACHE": str(tmp_path / ".cache"), "HOME": str(tmp_path)}
    p = subprocess.Popen([sys.executable, str(ROOT / "main.py"), "--method", "rest", "--datastore",
                          "store.npz",
                          "--build_datastore"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE,
                         text=True, preexec_fn=sigint_as_in_a_terminal)
    deadline = time.time() + 60
    while ("building the REST datastore" not in (line := p.stderr.readline())
           and time.time() < deadline):
        assert line or p.poll() is None, "the build never started"
    time.sleep(1)
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == code, err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == said, err
    assert not (tmp_path / "store.npz").exists() and not list(tmp_path.glob("store.npz*"))


def test_a_closed_pipe_ends_quietly(tmp_path):
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), "PICOSPEC_OFFLINE": "1",
           "HOME": str(tmp_path)}
    p = subprocess.Popen([sys.executable, str(ROOT / "main.py"), "--method", "autoregressive",
                          "--n_tokens", "30"],
                         cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # like `| head -c 0`: nobody reads the output
    err = p.stderr.read().decode()
    p.wait(timeout=120)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert p.returncode != 0


@pytest.mark.parametrize("command", [["main.py"], ["-m", "picospec.exercises", "template"],
                                     ["-m", "picospec.check", "--list"]])
def test_a_standard_output_closed_from_the_start_is_one_line(command, tmp_path):
    """`python main.py >&-`: the door says so in one line on stderr and exits 2, no traceback."""
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), "PICOSPEC_OFFLINE": "1",
           "HOME": str(tmp_path)}
    args = [sys.executable, *[str(ROOT / c) if c.endswith(".py") else c for c in command]]
    r = subprocess.run(args, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, timeout=120,
                       preexec_fn=lambda: os.close(1))
    assert r.returncode == 2
    assert r.stderr == "error: the standard output is closed: send it to a file or a terminal\n"


def test_out_of_memory_is_one_line(capsys):
    """A MemoryError anywhere in a command (a model or a cache larger than the memory free): one
    line and exit 2, no traceback."""
    from picospec_cli import guarded

    def work():
        raise MemoryError("Unable to allocate 40.0 GiB for an array")

    with pytest.raises(SystemExit) as e:
        guarded(work)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith("error: out of memory: ") and err.count("\n") == 1


class Signalling:
    """A stderr whose first write sends this process a signal: one arriving while the door says
    how the command ended."""

    def __init__(self, sig):
        self.sig, self.text = sig, ""

    def write(self, text):
        if self.sig:
            os.kill(os.getpid(), self.sig)
            self.sig = None
        self.text += text

    def flush(self):
        pass


def ended(guarded, work):
    """guarded(work)'s exit status; an interruption escaping the guard fails the test alone (it
    would stop the whole test run)."""
    try:
        guarded(work)
    except SystemExit as e:
        return e.code
    except KeyboardInterrupt as e:
        pytest.fail(f"{type(e).__name__} escaped the guard")
    pytest.fail("the work ended without an exit")


@pytest.fixture
def default_sigterm():
    """The signals as a command started from a shell has them (a test runner may differ)."""
    before = (signal.signal(signal.SIGTERM, signal.SIG_DFL),
              signal.signal(signal.SIGINT, signal.default_int_handler))
    yield
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the guard put it back
    signal.signal(signal.SIGTERM, before[0])
    signal.signal(signal.SIGINT, before[1])


@pytest.mark.parametrize("first, second, code, said", [
    (signal.SIGINT, signal.SIGTERM, 130, "interrupted"),
    (signal.SIGTERM, signal.SIGINT, 143, "terminated")])
def test_a_second_signal_while_the_door_says_the_first_is_no_traceback(
        default_sigterm, monkeypatch, first, second, code, said):
    from picospec_cli import guarded

    def work():
        os.kill(os.getpid(), first)
        time.sleep(5)  # never reached: the handler raises first

    monkeypatch.setattr(sys, "stderr", err := Signalling(second))
    assert ended(guarded, work) == code and err.text.split() == [said]


def test_a_repeated_sigterm_does_not_cut_the_cleanup_short(default_sigterm, monkeypatch):
    """A supervisor that sends SIGTERM twice: the work's cleanup still runs to its end."""
    from picospec_cli import guarded

    cleaned = []

    def work():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        finally:
            os.kill(os.getpid(), signal.SIGTERM)
            cleaned.append(True)

    monkeypatch.setattr(sys, "stderr", Signalling(None))
    assert ended(guarded, work) == 143 and cleaned == [True]
