"""Where an engine's forward is chosen, once (build): other values of gpt2/model.py's operations,
kept apart from the reference. KINDS: "reference" (model.py's formulas), "cpu" (ops.py), "panels"
(panels.py), "gpu" (gpu_kernels.py); the static-shape step is static.py, the threads policy.py.
"""
from dataclasses import dataclass

from gpt2.backend import xp_of
from gpt2.fast import ops as fast
from gpt2.fast.policy import Threads, panel_policy
from gpt2.model import REFERENCE, Ops

KINDS = ("reference", "cpu", "panels", "gpu")


@dataclass(frozen=True)
class Forward:
    kind: str
    ops: Ops
    head: object  # [n_embd, n_vocab]
    pad_rows: int  # a pass's tokens per row padded up to a multiple of it
    static: dict | None  # None, or {"graphs": bool}
    threads: Threads
    panels: dict  # {"on", "why"}, for reports


def choose(n_params, device="cpu", panels=None, fused=True):
    """-> (kind, {"on", "why"}): the default kind."""
    if device == "gpu":
        return ("gpu" if fused else "reference"), {"on": False, "why": "the model runs on the GPU"}
    policy = panel_policy(n_params, panels)
    return ("panels" if policy["on"] else "cpu"), policy


def build(params, n_params, device="cpu", kind=None, threads=None, panels=None, static=False,
          fused=True, free=None, kernels=None, panel_width=None, head_copy=None, pad_rows=None):
    """-> an engine's Forward on `params`; kind: one of KINDS, an Ops, or None (choose)."""
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
