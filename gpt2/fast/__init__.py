"""Performance variants of the forward, kept apart from the reference (llm.c's rule: the mainline
stays simple).

gpt2/model.py holds the formulas; these change only how fast they run, never what they compute (to
float rounding):
- weight panels (panels.py): a weight W that multiplies a few rows through its column panels;
- padded rows and a contiguous copy of the tied LM head (layout below), chosen per engine;
- fused CUDA kernels for gelu, softmax and layer_norm (gpu_kernels.py), swapped in by
  use_gpu_kernels;
- the BLAS thread policy (gpt2/backend.py), applied by the engines around each forward;
- the static-shape step (static.py): fixed buffers per pass shape, CUDA graphs on a GPU.
gpt2/engine.py takes its weights from layout(), the one place a model gets its fast form (on a GPU,
the kernels). Where this sits among the layers: docs/architecture.md.
"""
from gpt2.fast.panels import Panels, with_panels


def layout(params, n_params, device, panels=None, panel_width=None, head_copy=None, pad_rows=None,
           static=None):
    """The weights an engine's forward runs on -> {"params", "head" [n_embd, n_vocab], "panels" (on
    or off), "pad_rows", "static"}.
    panels: linear weights as Panels (default: gpt2/backend.py's panel_policy on the CPU);
    head_copy: the tied head wte.T as a contiguous copy (default on the CPU: OpenBLAS multiplies by
    it 1.3-1.6x faster than by the transposed view, bench/engine.py); pad_rows: the rows of a
    forward padded up to a multiple of it (default 4 on the CPU without panels: OpenBLAS multiplies
    4 rows as fast as 2 or 3 and 8 as fast as 5..7, bench/engine.py); static: the static-shape step
    (static.py) -> None or {"graphs": recorded as CUDA graphs} (default: off, on with
    PICOSPEC_STATIC=1; True: on, with graphs on a GPU)."""
    from gpt2.backend import panel_policy, xp_of
    static = static_step_on() if static is None else static
    xp = xp_of(params["wte"])
    if device == "gpu":
        use_gpu_kernels()
    on = device == "cpu" and (panel_policy(n_params)["on"] if panels is None else panels)
    head_copy = device == "cpu" if head_copy is None else head_copy
    # [n_embd, n_vocab]
    head = xp.ascontiguousarray(params["wte"].T) if head_copy else params["wte"].T
    return {"params": with_panels(params, panel_width) if on else params,
            "head": Panels(head, panel_width) if on else head, "panels": on,
            "pad_rows": (4 if device == "cpu" and not on else 1) if pad_rows is None else pad_rows,
            "static": {"graphs": device == "gpu"} if static else None}


def static_step_on():
    """The static-shape step's default, read in this one place: PICOSPEC_STATIC=1 turns it on."""
    from picospec_cli import env_flag

    return env_flag("PICOSPEC_STATIC", False)


def use_gpu_kernels():
    """On a GPU, gpt2/model.py's gelu, softmax and layer_norm run as one CUDA kernel each for
    float32 CuPy arrays (a step there is bound by the number of calls, gpu_kernels.py); NumPy arrays
    keep the reference. The one place the reference functions are swapped, called by layout() for an
    engine on the GPU."""
    from gpt2 import model
    from gpt2.fast import gpu_kernels as gpu

    for name in ("gelu", "softmax", "layer_norm"):
        # once: a second call swaps nothing more
        reference = REFERENCE.setdefault(name, getattr(model, name))
        setattr(model, name, gpu.dispatch(getattr(gpu, name), reference))


REFERENCE = {}  # gpt2/model.py's own functions, once use_gpu_kernels has swapped them
