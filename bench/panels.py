"""Every row of the method table on this CPU, weight panels (gpt2/fast/panels.py) off and on (in
the form the family's kernels favour: gpt2/fast/policy.py's panel_form), on each OpenBLAS kernel
family (tools/families.py: a process per family).

    python -m bench.panels --out docs/results/panels.md      # 4 held-out prompts x 64 new tokens
    python -m bench.panels --families SkylakeX --n_tokens 48

Protocol. The rows are loaded twice, panels off and on. Each row (its default options) runs
against autoregressive decoding in interleaved rounds on every prompt (picospec_app.compare),
temperature 0, then speculative sampling at temperature 1 (seeds 0 and 1); the two layouts run in
alternating order row by row. Reported: tokens per target call E, the cost c of one verification
call over a one-token call, the drafting cost of a step (in one-token target calls), ms per token,
the speedup (median of per-prompt ratios) with each layout, the cost model's prediction
E (1 + r_0) / (c + drafting + r) (r and r_0: the rest of a step and of an autoregressive token, as
the run spent them) and the limit, the cost whose removal gains most, with the layout the engine's
policy chooses on this family.
Autoregressive decoding makes one-row calls, which the panels leave alone: its ms per token should
agree between the layouts (a check on load). Shapes: none; this file only times things.
"""
import os

from bench.gpu import load_rows, setup, table
from gpt2.fast.policy import panel_form, panel_policy
from picospec_app.compare import compare
from picospec_app.run import limit
from picospec_app.machine import thread_policy
from picospec_cli import Option
from picospec.methods import METHODS
from tools.families import command
from tools.page import header, measured_command, write_page


def limit_cell(r):  # compare's result -> "verification (without it 1.52x)"
    worst, gain = limit(r["tokens_per_call"], r["E_full"], r["c"], r["drafting"], r["rest"],
                        r["rest_base"])
    return f"{worst} (without it {gain:.2f}x)"


def rows_with(panels, encoder, store):
    """Every row of the table loaded with weight panels on or off (over the policy)."""
    return load_rows("cpu", encoder, store, panels=panels)


def main(n_prompts=4, n_tokens=64, out=None):
    """Every row's speedup over autoregressive decoding with weight panels off and on, side by
    side."""
    encoder, prompts, store = setup(n_prompts, 64)
    rows = {on: rows_with(on, encoder, store) for on in (False, True)}
    top = header(thread_policy(rows[True]["speculative"]["target"].n_params))
    print(top, flush=True)
    cases = [(m, {"temperature": 0.0}, [0], {}) for m in METHODS if m.name != "autoregressive"]
    cases.append((next(m for m in METHODS if m.name == "speculative"), {"temperature": 1.0}, [0, 1],
                  {"K": 4}))
    chosen = panel_policy(rows[True]["speculative"]["target"].n_params)["on"]  # the policy's layout
    rows_out = []
    for i, (m, sampling, seeds, options) in enumerate(cases):
        order = (False, True) if i % 2 == 0 else (True, False)  # neither setting always runs second
        r = {on: compare(m, prompts, rows[on][m.name], n_tokens, seeds, sampling, **options)
             for on in order}
        name = m.name if sampling["temperature"] == 0 else f"{m.name}, T = 1"
        speedups = [f"{r[on]['speedup']:.2f}x" for on in (False, True)]
        speedups[chosen] = f"**{speedups[chosen]}**"
        rows_out.append([name, f"{r[chosen]['tokens_per_call']:.2f}",
                         f"{r[False]['c']:.2f} / {r[True]['c']:.2f}",
                         f"{r[chosen]['drafting']:.2f}",
                         f"{r[False]['ms_per_token_base']:.2f} / "
                         f"{r[True]['ms_per_token_base']:.2f}",
                         f"{r[False]['ms_per_token']:.2f} / {r[True]['ms_per_token']:.2f}",
                         *speedups, f"{r[chosen]['predicted']:.2f}x", limit_cell(r[chosen])])
        print(rows_out[-1], flush=True)
    line = (f"\n`{measured_command()}` "
            f"({n_prompts} held-out prompts x {n_tokens} new tokens, temperature 0 except the last "
            f"row; the policy's layout here: weight panels {'on' if chosen else 'off'}"
            f"{' (' + panel_form() + ')' if chosen else ''}, its "
            f"speedup in bold; 1-minute load {os.getloadavg()[0]:.1f} at the end)\n")
    columns = ["method", "tokens / target call", "c: verify / 1-token call (off / on)",
               "drafting (1-token calls a step)", "autoregressive ms/token (off / on)",
               "method ms/token (off / on)", "speedup, panels off", "speedup, panels on",
               "cost model", "limit"]
    text = "\n".join([line] + table(columns, rows_out))
    print(text)
    if out:
        write_page(out, text, top)


OPTIONS = [
    Option("n_prompts", int, 4, "held-out prompts", low=1),
    Option("n_tokens", int, 64, "new tokens per run", low=2),
    Option("out", "out", None, "also write the table as a results page (docs/results/panels.md)"),
]

if __name__ == "__main__":
    command(main, OPTIONS)
