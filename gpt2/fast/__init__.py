"""Other values of the forward's operations, kept apart from the reference (llm.c's rule: the
mainline stays simple), and the one place an engine's forward is chosen.

gpt2/model.py's REFERENCE is picoGPT's formulas. An engine is built with one `Forward`, chosen once
by build() and handed to every call:

    ops        "reference"  the formulas of gpt2/model.py, as written
               "cpu"        the same functions in fewer NumPy calls (ops.py)
               "panels"     "cpu" with weight panels for products of 2..32 rows (panels.py)
               "gpu"        fused CUDA kernels for gelu, softmax and layer_norm (gpu_kernels.py)
    static     the static-shape step (static.py; on a GPU captured as CUDA graphs)
    head       the tied LM head wte.T [n_embd, n_vocab]: a contiguous copy on the CPU
    pad_rows   a pass's tokens per row padded up to a multiple of it
    threads    the BLAS thread counts of its calls (policy.py)

By default (kind None) the CPU gets "panels" where the BLAS gains from them, else "cpu"; the GPU
gets "gpu" (or "reference" with fused=False). Where this sits among the layers:
docs/architecture.md.
"""
from dataclasses import dataclass

from gpt2.backend import xp_of
from gpt2.fast import ops as fast
from gpt2.fast.policy import Threads, panel_policy
from gpt2.model import REFERENCE, Ops

KINDS = ("reference", "cpu", "panels", "gpu")


@dataclass(frozen=True)
class Forward:
    """How an engine runs its forwards (see the module docstring)."""
    kind: str
    ops: Ops
    head: object  # [n_embd, n_vocab]
    pad_rows: int
    static: dict | None  # None, or {"graphs": bool}
    threads: Threads
    panels: dict  # {"on", "why"}, for reports


def choose(n_params, device="cpu", panels=None, fused=True):
    """-> (kind, {"on", "why"}): the ops an engine gets unless told (panels: True/False/None for
    the policy; fused: the GPU kernels)."""
    if device == "gpu":
        return ("gpu" if fused else "reference"), {"on": False, "why": "the model runs on the GPU"}
    policy = panel_policy(n_params, panels)
    return ("panels" if policy["on"] else "cpu"), policy


def build(params, n_params, device="cpu", kind=None, threads=None, panels=None, static=False,
          fused=True, free=None, kernels=None, panel_width=None, head_copy=None, pad_rows=None):
    """The Forward of an engine on `params` (arrays on the device already). kind: one of KINDS, an
    Ops value, or None (choose); threads: the BLAS count asked for (None: the policy, on `free`,
    policy.free_cores()'s figures where the caller measured them); static: the static-shape step;
    kernels: gelu, softmax and layer_norm for "gpu" (default gpu_kernels); panel_width, head_copy,
    pad_rows: layout choices that bench/engine.py compares."""
    xp = xp_of(params["wte"])
    if kind is None:
        kind, policy = choose(n_params, device, panels, fused)
    else:
        name = kind if isinstance(kind, str) else "given"
        policy = {"on": kind == "panels", "why": f"the {name} operations"}
    cpu = xp.__name__ == "numpy"
    head_copy = cpu if head_copy is None else head_copy
    head = xp.ascontiguousarray(params["wte"].T) if head_copy else params["wte"].T  # [C, V]
    if isinstance(kind, Ops):
        ops, kind = kind, "given"
    elif kind == "reference":
        ops = REFERENCE
    elif kind == "cpu":
        ops = fast.CPU
    elif kind == "panels":
        ops = fast.panel_ops(fast.linear_weights(params["blocks"]) + [head], panel_width)
    elif kind == "gpu":
        if kernels is None:
            from gpt2.fast import gpu_kernels as kernels
        ops = fast.gpu_ops(kernels)
    else:
        raise ValueError(f"unknown operations {kind!r}: use one of {', '.join(KINDS)}")
    if pad_rows is None:
        pad_rows = 4 if cpu and kind in ("cpu", "given") else 1
    return Forward(kind, ops, head, pad_rows, {"graphs": not cpu} if static else None,
                   Threads(n_params, threads, device, free), policy)
