"""Where an engine's plan of a forward is made, once (build): other values of gpt2/model.py's
operations, kept apart from the reference. OPERATIONS: "reference" (model.py's formulas), "cpu"
(ops.py), "panels" and "panel_rows" (panels.py: a few rows in small products through the weights'
panels, or one by one), "gpu" (gpu_kernels.py); the static-shape step is static.py, the threads
and panels policy.py.
"""
from dataclasses import dataclass

from gpt2.backend import aligned, xp_of
from gpt2.fast import ops as fast
from gpt2.fast.policy import Threads, panel_form, panel_policy
from gpt2.model import REFERENCE, Ops

OPERATIONS = ("reference", "cpu", "panels", "panel_rows", "gpu")


@dataclass(frozen=True)
class Choices:
    """What an engine is asked to run with; None: the engine's policy decides."""
    device: str = "cpu"
    ops: object = None  # one of OPERATIONS, an Ops, or None
    threads: int | None = None  # BLAS threads for the engine's own calls
    panels: bool | None = None  # weight panels wanted (None: panel_policy)
    static: bool = False  # the static-shape step (CUDA graphs on a GPU)
    fused: bool = True  # the GPU's fused kernels
    free: int | None = None  # idle cores, when the caller measured them
    kernels: object = None  # the GPU kernels' module (tests pass stand-ins)
    panel_width: int | None = None  # columns per panel
    head_copy: bool | None = None  # a contiguous copy of the LM head (None: on a CPU)
    pad_rows: int | None = None  # a pass's tokens per row padded up to a multiple of it

    def keywords(self):
        """-> {name: value} of every choice but the device, as GPT2 and load_model take them."""
        return {k: v for k, v in vars(self).items() if k != "device"}


@dataclass(frozen=True)
class Plan:
    """How every pass of an engine runs: the operations and what they were chosen for."""
    kind: str  # one of OPERATIONS, or "given" (a caller's Ops)
    ops: Ops
    head: object  # [n_embd, n_vocab]
    pad_rows: int
    static: bool  # the static-shape step
    threads: Threads
    panels_report: dict  # {"on", "why"}: whether the weights have panels, and why


def operations(choices, n_params):
    """-> (kind, {"on", "why"}): the operations an engine runs, decided here alone."""
    asked = choices.ops
    if isinstance(asked, Ops):
        return "given", {"on": False, "why": "the given operations"}
    if asked is not None:
        if asked not in OPERATIONS:
            raise ValueError(f"unknown operations {asked!r}: use one of {', '.join(OPERATIONS)}")
        if asked.startswith("panel") and choices.device == "gpu":
            raise ValueError(f"the {asked} operations read panels of NumPy weights on the CPU: on "
                             f"a GPU use reference, cpu or gpu")
        return asked, {"on": asked.startswith("panel"), "why": f"the {asked} operations"}
    if choices.device == "gpu":
        return ("gpu" if choices.fused else "reference"), {"on": False,
                                                           "why": "the model runs on the GPU"}
    policy = panel_policy(n_params, choices.panels)
    return (panel_form() if policy["on"] else "cpu"), policy


def build(params, n_params, choices=Choices()):
    """-> the Plan of an engine on `params` under `choices`."""
    xp = xp_of(params["wte"])
    cpu = xp.__name__ == "numpy"
    kind, report = operations(choices, n_params)
    head_copy = cpu if choices.head_copy is None else choices.head_copy
    # [C, V]: a contiguous copy (on the host on a cache line's boundary), or wte's transposed view
    copy = aligned if cpu else xp.ascontiguousarray
    head = copy(params["wte"].T) if head_copy else params["wte"].T
    if kind == "given":
        ops = choices.ops
    elif kind == "reference":
        ops = REFERENCE
    elif kind == "cpu":
        ops = fast.CPU
    elif kind in ("panels", "panel_rows"):
        ops = fast.panel_ops(fast.linear_weights(params["blocks"]) + [head], choices.panel_width,
                             by_row=kind == "panel_rows")
    else:
        if (kernels := choices.kernels) is None:
            from gpt2.fast import gpu_kernels as kernels
        ops = fast.gpu_ops(kernels)
    pad_rows = choices.pad_rows
    if pad_rows is None:
        pad_rows = 4 if cpu and kind in ("cpu", "given") else 1
    threads = Threads(n_params, choices.threads, choices.device, choices.free)
    return Plan(kind, ops, head, pad_rows, choices.static, threads, report)
