"""picospec's front door: decode a prompt with a speculative method and with plain autoregressive
decoding, side by side.

    argv -> plan (picospec_app/plan.py: read, every check that needs no model) -> load -> the
    checks that need the models -> timed rounds (picospec_app/run.py) -> report
    (picospec_app/report.py: one JSON object, or text)

Methods and their options come from the table in picospec/methods.py (`python main.py --method
medusa --help`); every option is checked before any model loads. `picospec_app.cli` runs it under
the door's guard.
"""
import json
import sys

from tqdm import tqdm

from gpt2.load import load_model
from picospec.methods import TABLE, settled
from picospec_app import report, run
from picospec_app.load import load_needs
from picospec_app.machine import policy
from picospec_app.plan import check_loaded, read_plan


def main(argv=None):
    """Read the plan, load, check what needs the models, run both decoders in rounds, report."""
    plan = read_plan(sys.argv[1:] if argv is None else argv)
    if plan is None:  # help was printed
        return
    for note in plan.notes:
        print(note, file=sys.stderr)
    target, encoder = load_model(plan.target, plan.device, plan.offline or None, **plan.engine)
    loaded = load_needs(plan.method, plan.options, target, plan.target, encoder, plan.draft,
                        plan.device, plan.offline or None, plan.progress)
    xs = [encoder.encode(p) for p in plan.prompts]
    groups = check_loaded(plan, xs, loaded)
    rounds = run_rounds(plan, xs, target, loaded, groups)
    options = settled(plan.method, plan.options, loaded, plan.sampling)  # what ran, as --json says
    out = report.result(plan, xs, rounds, encoder, policy(target), options)
    if plan.json:
        print(json.dumps(out))
    else:
        report.show(out, plan, encoder)


def run_rounds(plan, xs, target, loaded, groups):
    """Every decoder of plan.order in turns, cold caches, one seed -> their runs, in that order."""
    def timed(name):
        mine = name == plan.method.name
        needs = loaded if mine else {"target": target}  # the plain target's baseline
        options = plan.options if mine else {}
        if groups is not None:
            return run.run_batch(TABLE[name], xs, needs, groups, plan.n_tokens, plan.seed,
                                 plan.sampling, options, plan.progress)
        return run.run_method(name, xs[0], needs, plan.n_tokens, plan.seed, plan.sampling,
                              **options)

    # one unclocked run of each first: the first touches the caches' memory, wakes BLAS's threads
    # (and, on a GPU, compiles each kernel), so a first timed round would favour the decoder run
    # second; a batch's rounds are long enough that it is left out
    if plan.device == "gpu" or groups is None:
        for name in plan.order:
            timed(name)
    rounds = plan.runs or (1 if groups is not None else None)
    bar = tqdm(total=rounds and rounds * len(plan.order), desc="timed runs", unit="run",
               leave=False, disable=not plan.progress or groups is not None, file=sys.stderr)

    def counted(name):
        out = timed(name)
        bar.update()
        return out

    with bar:
        return run.interleaved([lambda name=name: counted(name) for name in plan.order], rounds)

