"""Every way a forward runs on a CPU, taken by the suite itself whatever the machine's BLAS: the
reference formulas, the CPU ops, weight panels (forced on, even where the policy would leave them
off) and the static-shape step. For each: every method row equals autoregressive decoding at
temperature 0, draws the same tokens as on the reference operations at temperature 1 (so the law
checked on the reference carries over), and its batched form equals its single form. The engine,
the self-draft paths and the EAGLE head hand their ops to every operation they run (a perturbed
value shows any call that bypasses it), and the GPU ops' dispatch runs here through a stand-in."""
import functools
from types import SimpleNamespace

import numpy as np
import pytest

from gpt2.engine import BatchGPT2, GPT2
from gpt2.fast import ops as fast
from gpt2.fast.panels import MAX_ROWS
from gpt2.model import REFERENCE, gpt2, softmax
from tests.support.micro import random_gpt2

HP, PARAMS = random_gpt2(n_vocab=40, n_ctx=48, n_embd=16, n_head=2, n_layer=3, seed=5)
# every value a CPU runs: (ops kind, static step)
VALUES = {"reference": ("reference", False), "cpu": ("cpu", False), "panels": ("panels", False),
          "panel_rows": ("panel_rows", False), "static": ("cpu", True)}


def engine(value, hparams=HP, params=PARAMS):
    kind, static = VALUES[value]
    return GPT2(hparams, params, ops=kind, static=static)


def test_the_default_is_one_of_the_values_and_panels_follow_the_policy():
    from gpt2.fast.policy import panel_form, panel_policy

    model = GPT2(HP, PARAMS)
    assert model.plan.kind == (panel_form() if panel_policy(model.n_params)["on"] else "cpu")
    assert GPT2(HP, PARAMS, panels=True).plan.kind == panel_form()
    assert GPT2(HP, PARAMS, panels=False).plan.kind == "cpu"
    assert GPT2(HP, PARAMS, ops="reference").plan.ops is REFERENCE
    with pytest.raises(ValueError, match="unknown operations"):
        GPT2(HP, PARAMS, ops="fast")


@pytest.mark.parametrize("kind", ["panels", "panel_rows"])
def test_panel_operations_on_a_gpu_are_refused_in_one_line(kind):
    """Panels are made of NumPy weights on the host: asked for on a GPU, the engine crashed in
    CuPy's conversion; it is refused before any weight is touched, naming what a GPU runs."""
    from gpt2.fast import Choices, operations

    with pytest.raises(ValueError, match=f"the {kind} operations .* on a GPU use reference, cpu or "
                                         f"gpu$"):
        operations(Choices(device="gpu", ops=kind), 124_000_000)
    assert operations(Choices(device="cpu", ops=kind), 124_000_000)[0] == kind
    assert operations(Choices(device="gpu", ops="cpu"), 124_000_000)[0] == "cpu"


@pytest.mark.parametrize("environ, kind", [({}, "gpu"), ({"PICOSPEC_FUSED": "1"}, "gpu"),
                                           ({"PICOSPEC_FUSED": "0"}, "reference")])
def test_a_gpu_runs_the_fused_kernels_unless_picospec_fused_is_off(environ, kind):
    """On a GPU the engine runs the fused kernels ("gpu") by default and with PICOSPEC_FUSED=1,
    and the reference formulas with PICOSPEC_FUSED=0; no CuPy is needed to decide (the choice
    is made before any kernel is loaded), and a CPU never takes the GPU's."""
    from gpt2.fast import Choices, operations
    from picospec_app.settings import engine_choices, read_settings

    fused = engine_choices(read_settings(environ), measure=False)["fused"]
    assert operations(Choices(device="gpu", fused=fused), 124_000_000)[0] == kind
    assert operations(Choices(device="cpu", fused=fused), 124_000_000)[0] != "gpu"


@pytest.mark.parametrize("value", VALUES)
def test_every_value_gives_the_reference_logits(value):
    """Decode steps, (K+1)-token verifications with rollback, a token tree and ragged batched rows,
    against picoGPT's forward on the whole sequence."""
    model, rng = engine(value), np.random.default_rng(0)
    x = [int(t) for t in rng.integers(0, HP["n_vocab"], 40)]
    for L in range(1, 36, 3):
        want = gpt2(np.array(x[:L + 5]), **PARAMS, n_head=HP["n_head"])
        assert np.abs(model.logits(x[:L]) - want[L - 1]).max() < 1e-5
        assert np.abs(model.logits(x[:L + 5], 5) - want[L:L + 5]).max() < 1e-5
    tokens, parents = [3, 4, 5, 6], [-1, 0, 0, 2]
    tree = model.tree(x[:10], tokens, parents)
    for i, path in enumerate([[3], [3, 4], [3, 5], [3, 5, 6]]):
        want = gpt2(np.array(x[:10] + path), **PARAMS, n_head=HP["n_head"])[-1]
        assert np.abs(tree[1 + i] - want).max() < 1e-5
    batch = BatchGPT2(model, 3)
    xs = [x[:7], x[3:30], x[10:12]]
    out = batch.logits(xs, 2)
    for b, row in enumerate(xs):
        want = gpt2(np.array(row), **PARAMS, n_head=HP["n_head"])[-2:]
        assert np.abs(out[b] - want).max() < 1e-5


@pytest.mark.parametrize("m", [1, 2, 3, 5, 8, MAX_ROWS, MAX_ROWS + 1, 40])
@pytest.mark.parametrize("lead", [(), (1,), (3,), (2, 2)])
@pytest.mark.parametrize("n_out", [16, 48, 70, 200])
def test_the_panel_product_is_x_at_w_for_every_shape(m, lead, n_out):
    """Rows [*lead, m, n_in] as the engine passes them (B > 1 stacks included), any n_out."""
    rng = np.random.default_rng(m + n_out)
    w = rng.standard_normal((16, n_out), dtype=np.float32)
    x = rng.standard_normal((*lead, m, 16), dtype=np.float32)
    product = fast.PanelMatmul([w])
    got = product(x, w)
    assert got.shape == (*lead, m, n_out)
    np.testing.assert_allclose(got, x @ w, rtol=1e-5, atol=1e-5)
    other = rng.standard_normal((16, 5), dtype=np.float32)  # a weight it holds no panels for
    np.testing.assert_allclose(product(x, other), x @ other, rtol=1e-5, atol=1e-5)


def test_the_engine_multiplies_through_its_panels(monkeypatch):
    """Spoiling the panels of one weight changes the logits of a 5-row call (not of a 1-row one):
    the panels path is taken, for the weights and for the LM head."""
    model = GPT2(HP, PARAMS, ops="panels")
    x = list(range(1, 12))
    one, five = model.logits(x[:1]), model.logits(x, 5)
    for w in (model.params["blocks"][1]["mlp"]["c_fc"]["w"], model.plan.head):
        held = model.plan.ops.matmul.panels[id(w)]
        monkeypatch.setitem(model.plan.ops.matmul.panels, id(w), (held[0], held[1] * 0))
        model.reset()
        assert np.abs(model.logits(x[:1]) - one).max() < 1e-6
        model.reset()
        assert np.abs(model.logits(x, 5) - five).max() > 1e-3
        monkeypatch.setitem(model.plan.ops.matmul.panels, id(w), held)


def perturbed(ops):
    """ops whose every operation is visibly off the reference (a forward that bypasses any of them
    differs from one that does not)."""
    return ops._replace(matmul=lambda x, w: ops.matmul(x, w) * 1.01,
                        gelu=lambda x: ops.gelu(x) * 0.9,
                        softmax=lambda x: ops.softmax(x * 1.1),
                        layer_norm=lambda x, g, b, eps=1e-5: ops.layer_norm(x, g, b, 1e-1))


def test_every_engine_path_runs_on_its_ops():
    """The engine's steps, trees and batched rows, the self-draft's two sides and the EAGLE head
    give what the reference forward gives on the same perturbed ops: none of them calls an
    operation that was not handed to it."""
    from gpt2.eagle import EagleHead, init_eagle
    from gpt2.model import linear, transformer_block
    from gpt2.self_draft import SelfDraft, exit_skip, lm_head, sublayer

    ops = perturbed(REFERENCE)
    model = GPT2(HP, PARAMS, ops=ops)
    x = [5, 1, 7, 2, 9, 3, 3, 8]
    want = gpt2(np.array(x), **PARAMS, n_head=HP["n_head"], ops=ops)
    assert np.abs(model.logits(x, 3) - want[-3:]).max() < 1e-5
    assert np.abs(BatchGPT2(model, 2).logits([x, x[:4]])[0] - want[-1]).max() < 1e-5
    assert np.abs(model.tree(x[:-1], [x[-1]], [-1])[1] - want[-1]).max() < 1e-5
    assert np.abs(model(x) - softmax(want[-1] * 1.1)).max() < 1e-6  # probs through ops.softmax
    # early exit after layer 1 of 3, and a skip set: the draft path by hand on the same ops
    for skip in (exit_skip(1, 3), [1, 4]):
        engine = SelfDraft(HP, model.params, skip, plan=model.plan)
        h = model.params["wte"][np.array(x)] + model.params["wpe"][:len(x)]
        for s in range(6):
            if s not in skip:
                h = sublayer(h[None], s, model.params["blocks"][s // 2], HP["n_head"],
                             mask=np.tril(np.ones((len(x), len(x)), bool)), ops=ops)[0]
        draft = lm_head(h[-1], model.params, head=model.plan.head, ops=ops)
        assert np.abs(engine.draft.logits(x) - draft).max() < 1e-5
        assert np.abs(engine.target.logits(x) - want[-1]).max() < 1e-5
    # the EAGLE head: one context pair, by hand
    head, config = init_eagle(HP["n_embd"], 2, np.random.default_rng(0))
    eagle = EagleHead(head, config, model.params["wte"], 32, ops=ops)
    F = np.random.default_rng(1).standard_normal((1, HP["n_embd"]), dtype=np.float32)
    z = np.concatenate([model.params["wte"][[x[1]]], F], -1)[None]  # [1, 1, 2C]
    g = transformer_block(linear(z, **head["fc"], ops=ops), **head["block"], n_head=2, ops=ops)
    assert np.abs(eagle(x[:2], F) - ops.matmul(g[0], model.params["wte"].T)).max() < 1e-5


def stand_in_kernels(calls):
    """gpu_kernels' three functions as NumPy stand-ins that count their calls (the CPU fast
    formulas, so the logits stay the reference's)."""
    def counted(name, f):
        def run(*args, **kwargs):
            calls[name] = calls.get(name, 0) + 1
            return f(*args, **kwargs)
        return run

    return SimpleNamespace(gelu=counted("gelu", fast.gelu), softmax=counted("softmax", softmax),
                           layer_norm=counted("layer_norm", fast.layer_norm))


def test_the_gpu_ops_run_every_kernel_on_every_path():
    """The GPU value, built with stand-in kernels on the CPU: each engine path calls the kernels
    (and only them: a reference function called instead would leave a count short)."""
    from gpt2.self_draft import SelfDraft, exit_skip

    calls = {}
    model = GPT2(HP, PARAMS, ops="gpu", kernels=stand_in_kernels(calls))
    assert model.plan.kind == "gpu"
    x = [5, 1, 7, 2, 9, 3]
    want = gpt2(np.array(x), **PARAMS, n_head=HP["n_head"])[-1]
    assert np.abs(model.logits(x) - want).max() < 1e-5
    L = HP["n_layer"]
    assert calls == {"layer_norm": 2 * L + 1, "gelu": L, "softmax": L}
    engine = SelfDraft(HP, model.params, exit_skip(1, L), plan=model.plan)
    calls.clear()
    engine.draft(x)  # layer 0 only, then ln_f, the head and the probs' softmax
    assert calls == {"layer_norm": 3, "gelu": 1, "softmax": 2}
    calls.clear()
    assert np.abs(engine.target.logits(x + [4]) - gpt2(np.array(x + [4]), **PARAMS,
                                                       n_head=HP["n_head"])[-1]).max() < 1e-5
    assert calls == {"layer_norm": 2 * (L - 1) + 2 + 1, "gelu": L, "softmax": L}


def test_building_an_engine_leaves_the_process_blas_count_alone():
    """The thread count applies inside the engine's calls only, restored after them."""
    from threadpoolctl import threadpool_limits

    from gpt2.fast.policy import blas_threads

    with threadpool_limits(limits=2, user_api="blas"):
        model = GPT2(HP, PARAMS, threads=1)
        seen = []
        model.plan.threads.scope = (lambda scope: lambda rows: recorded(scope(rows)))(
            model.plan.threads.scope)

        class recorded:
            def __init__(self, inner):
                self.inner = inner

            def __enter__(self):
                self.inner.__enter__()
                seen.append(blas_threads())

            def __exit__(self, *exc):
                return self.inner.__exit__(*exc)

        model.logits([1, 2, 3])
        assert seen and set(seen) == {1} and blas_threads() == 2


# ---- every method row, on every value ----
# Every engine below runs on one BLAS thread (threads=1): what it computes is the same on any
# count, and the policy's second thread for forwards of 33+ rows only spins against the other
# test worker (tests/gpt2/fast/test_policy.py tests the counts).

@pytest.fixture(scope="module", params=list(VALUES))
def models(request):
    """The built-in pair, heads and datastore loaded as tests/picospec/test_methods.py loads them,
    their engines built with one value (also the engines the methods' needs load later)."""
    from gpt2.load import load_model
    from picospec.rest import Datastore
    from picospec_app.load import load_heads

    kind, static = VALUES[request.param]
    target, encoder = load_model("tiny-target", ops=kind, static=static, threads=1)
    text = ("def read_lines(path):\n    with open(path) as f:\n"
            "        return f.read().splitlines()\n") * 3
    store = Datastore.build(np.array(encoder.encode(text), dtype=np.uint16))
    draft = load_model("tiny-draft", ops=kind, static=static, threads=1)[0]
    assert target.plan.kind == draft.plan.kind == kind
    assert (target.engine.static is not None) == static
    loaded = {"target": target, "draft": draft, "datastore": store}
    heads = {k: load_heads("tiny-target", k, None, target)
             for k in ("medusa", "blockwise", "eagle", "eagle3")}
    return loaded, heads, encoder


def method_names():
    from picospec.methods import METHODS

    return [m.name for m in METHODS]


PROMPTS = ["import os\n\n\ndef list_files(path):\n    return [", "class Node:\n    def", "x = 1"]
N = 10


def sampled_run(method, loaded, x, monkeypatch):
    """-> (output at temperature 1 with seed 3, whether a draw fell within MARGIN of a CDF
    boundary, where float rounding may pick the neighbouring token)."""
    from tests.support.batchrows import MARGIN, record_draws
    from picospec_app.run import run_method

    with monkeypatch.context() as patch:
        margins = record_draws(patch)
        out = run_method(method, x, loaded, N, 3, {"temperature": 1.0})["output"]
    return out, min(margins, default=1) < MARGIN


@pytest.mark.slow
@pytest.mark.parametrize("name", method_names())
def test_every_row_runs_the_same_on_every_value(name, models, monkeypatch):
    """Temperature 0: the autoregressive text, single and (on the fast values) batched.
    Temperature 1, same seed: the tokens the row draws on the reference operations (logits equal to
    float rounding, so the same draws unless one falls within MARGIN of a boundary; the law the law
    tests check on the reference holds here too)."""
    from picospec.methods import TABLE, call, defaults, law
    from picospec_app.load import batched_models
    from picospec_app.run import run_method
    from tests.support.methods import needs_of

    method, (loaded, _, encoder) = TABLE[name], models
    xs = [encoder.encode(p) for p in PROMPTS]
    base = greedy_texts(tuple(map(tuple, xs)))
    needs = needs_of(method, models)
    assert run_method(method, xs[0], needs, N, 0, {"temperature": 0})["output"] == base[0]
    reference = loaded["target"].plan.kind == "reference"  # what the others are held to
    if method.batch is not None and not reference:
        for model in needs.values():
            getattr(model, "reset", lambda: None)()
        rows = call(method, xs, N, np.random.default_rng(0), batched_models(needs, len(xs)),
                    {"temperature": 0}, batch=True)
        assert rows == base
    if law(method, defaults(method)) == "greedy" or reference:
        return
    got, near = sampled_run(method, needs, xs[0], monkeypatch)
    reference = reference_needs(name)
    want, near_there = sampled_run(method, reference, xs[0], monkeypatch)
    assert got == want or near or near_there


@functools.cache
def greedy_texts(xs):
    """-> autoregressive decoding's greedy output after each prompt, on the reference operations
    (once per process: the same for every row and value)."""
    from gpt2.load import load_model
    from picospec_app.run import run_method

    plain = load_model("tiny-target", ops="reference", threads=1)[0]
    return [run_method("autoregressive", list(x), {"target": plain}, N, 0,
                       {"temperature": 0})["output"] for x in xs]


REFERENCE_NEEDS = {}


def reference_needs(name):
    """-> a row's needs loaded on the reference operations (once per process)."""
    from gpt2.load import load_model
    from picospec.methods import TABLE
    from picospec.rest import Datastore
    from picospec_app.load import load_heads
    from tests.support.methods import needs_of

    if "models" not in REFERENCE_NEEDS:
        target, encoder = load_model("tiny-target", ops="reference", threads=1)
        text = ("def read_lines(path):\n    with open(path) as f:\n"
                "        return f.read().splitlines()\n") * 3
        store = Datastore.build(np.array(encoder.encode(text), dtype=np.uint16))
        loaded = {"target": target, "draft": load_model("tiny-draft", ops="reference",
                                                        threads=1)[0],
                  "datastore": store}
        heads = {k: load_heads("tiny-target", k, None, target)
                 for k in ("medusa", "blockwise", "eagle", "eagle3")}
        REFERENCE_NEEDS["models"] = (loaded, heads, encoder)
    return needs_of(TABLE[name], REFERENCE_NEEDS["models"])


# ---- the law, sampled, on micro models: each lossless row once, on a value other than the
# reference (rotating over them), in its batched form (LAW_ROWS rows per prompt in one batch)
MICRO_T = random_gpt2(n_vocab=3, n_ctx=24, n_embd=8, n_head=2, n_layer=2, seed=3, scale=0.6)
MICRO_D = random_gpt2(n_vocab=3, n_ctx=24, n_embd=8, n_head=2, n_layer=1, seed=4, scale=0.6)
LAW_PROMPTS, LAW_N, LAW_ROWS = [[1], [0, 2, 1]], 4, 750
LAW_OPTIONS = {"temperature": 0.8}
ROTATION = {"autoregressive": "cpu", "speculative": "panels", "prompt_lookup": "static",
            "rest": "panel_rows", "lookahead": "panels", "layer_skip": "cpu", "cascade": "static",
            "specinfer": "panel_rows", "sequoia": "panels", "medusa": "panel_rows", "eagle": "cpu",
            "eagle2": "static", "eagle3": "panel_rows"}
TREE = "[[0],[1],[0,0]]"  # two children of the root, one grandchild
LAW_METHOD_OPTIONS = {"medusa": {"tree": TREE, "topk": 2}, "eagle": {"tree": TREE},
                      "eagle2": {"depth": 2, "tree_top_k": 2, "total_tokens": 3},
                      "eagle3": {"depth": 2, "tree_top_k": 2, "total_tokens": 3}}


def micro_needs(name, value):
    """A row's needs on the micro target (and a micro draft, datastore, second drafter), engines
    built with one value."""
    from gpt2.self_draft import SelfDraft
    from picospec.rest import Datastore

    kind, static = VALUES[value]
    target = GPT2(*MICRO_T, ops=kind, static=static, threads=1)
    if name == "layer_skip":
        engine = SelfDraft(MICRO_T[0], target.params, [1], plan=target.plan)
        return {"target": engine.target, "draft": engine.draft,
                "self_draft": {"K": 2, "threshold": 0.0}}
    if name == "medusa":  # two random Medusa heads
        from gpt2.heads import heads_logits, init_heads

        rng = np.random.default_rng(5)
        heads, config = init_heads(2, target.params["wte"], rng=rng)
        for head in heads:
            for layer in head.values():
                for k in layer:
                    layer[k] = rng.standard_normal(layer[k].shape, dtype=np.float32) * 0.8
        return {"target": target, "heads": {"n_heads": 2, "fn": lambda h, n=None: heads_logits(
            h, heads[:n], target.params["wte"], config)}}
    if name in ("eagle", "eagle2"):  # a random EAGLE head on the target's ops
        from gpt2.eagle import EagleHead, init_eagle

        rng = np.random.default_rng(6)
        params, config = init_eagle(8, 2, rng)
        params["fc"]["w"] = rng.standard_normal(params["fc"]["w"].shape, dtype=np.float32) * 0.8
        return {"target": target, "heads": EagleHead(params, config, target.params["wte"], 32,
                                                     target.plan.ops, target.plan.threads)}
    if name == "eagle3":  # a random EAGLE-3 head over tokens [2, 0], reading blocks 0, 1, 1
        from gpt2.eagle3 import Eagle3Head, init_eagle3

        rng = np.random.default_rng(7)
        params, config = init_eagle3(8, 2, np.array([2, 0]), (0, 1, 1), target.params["wte"],
                                     target.params["ln_f"], rng)
        params["fc"]["w"] = rng.standard_normal(params["fc"]["w"].shape, dtype=np.float32) * 0.8
        return {"target": target, "heads": Eagle3Head(params, config, target.params["wte"], 32,
                                                      target.plan.ops, target.plan.threads)}
    tokens = np.random.default_rng(0).integers(0, 3, 400).astype(np.uint16)
    return {"target": target, "draft": GPT2(*MICRO_D, ops=kind, static=static, threads=1),
            "draft2": GPT2(*random_gpt2(n_vocab=3, n_ctx=24, n_embd=8, n_layer=1, seed=9,
                                        scale=0.6), ops=kind, threads=1),
            "datastore": Datastore.build(tokens), "acceptance": {"sampled": [0.6, 0.2, 0.1]}}


def sampled_law_rows(name, value):  # -> per prompt, LAW_ROWS continuations from one batched run
    from picospec.methods import TABLE, call
    from picospec_app.load import batched_models

    method = TABLE[name]
    needs = {k: v for k, v in micro_needs(name, value).items()
             if k in method.args or k in ("self_draft", "acceptance", "draft2")}
    needs = batched_models(needs, len(LAW_PROMPTS) * LAW_ROWS)
    options = {"K": 2} if any(o.name == "K" for o in method.options) else {}
    options.update(LAW_METHOD_OPTIONS.get(name, {}))
    out = call(method, LAW_PROMPTS * LAW_ROWS, LAW_N, np.random.default_rng(0), needs,
               LAW_OPTIONS, options, batch=True)
    return [[tuple(row[len(prompt):]) for row in out[b::len(LAW_PROMPTS)]]
            for b, prompt in enumerate(LAW_PROMPTS)]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ROTATION))
def test_every_lossless_row_keeps_the_target_law_on_a_fast_value(name):
    """750 runs per prompt, G-tested against the micro target's exact law
    (tests/__init__.py)."""
    from picospec.check.exact_law import check_law, exact_law

    target = GPT2(*MICRO_T, ops="reference", threads=1)
    for prompt, rows in zip(LAW_PROMPTS, sampled_law_rows(name, ROTATION[name])):
        check_law(rows, exact_law(target, prompt, LAW_N, **LAW_OPTIONS))


def test_a_broken_sampler_on_a_fast_value_is_rejected(monkeypatch):
    """Recovering from the target instead of the residual, with the panels forced on: the same
    check fails."""
    import picospec.batched.rejection as rejection
    from picospec.check.exact_law import check_law, exact_law

    monkeypatch.setattr(rejection, "recovered_probs", lambda q, p: q)
    target = GPT2(*MICRO_T, ops="reference", threads=1)
    with pytest.raises(AssertionError, match="differs from the target"):
        for prompt, rows in zip(LAW_PROMPTS, sampled_law_rows("speculative", "panels")):
            check_law(rows, exact_law(target, prompt, LAW_N, **LAW_OPTIONS))
