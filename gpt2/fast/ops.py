"""The forward's operations in fewer, larger NumPy calls: the same functions as gpt2/model.py's
REFERENCE, other formulas (what each buys: docs/performance.md, "The operations an engine runs").

- gelu: 0.5 x (1 + tanh(u)) is x / (1 + exp(-2u)), since 1 + tanh(u) = 2 / (1 + exp(-2u)); NumPy's
  exp is about twice as fast as its tanh. -2u is capped at 80 so that exp stays finite (gelu(x) is
  0 to float32 precision there anyway).
- layer_norm: the moments as sums over the row (array methods: np.mean and np.var cost 3-4x more in
  their Python wrappers), the scale folded into g.
- matmul: a stack of B row blocks [B, n_seq, n_in] is one product over B*n_seq rows (NumPy
  multiplies a stack block by block); with weight panels (panels.py), 2..MAX_ROWS rows multiply
  through them.
- gpu_ops: gelu, softmax and layer_norm as one CUDA kernel each (gpu_kernels.py).

Shapes: [..., n] rows of length n along the last axis; m rows in a product.
"""
import math

from gpt2.backend import xp_of
from gpt2.fast.panels import MAX_ROWS, panel_matmul, panels
from gpt2.model import Ops, softmax


def gelu(x):  # x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3)
    xp = xp_of(x)
    minus_2u = x * (-2 * math.sqrt(2 / math.pi) * (1 + 0.044715 * x * x))
    return x / (1 + xp.exp(xp.minimum(minus_2u, 80.0)))


def layer_norm(x, g, b, eps: float = 1e-5):
    n = x.shape[-1]
    x = x - x.sum(axis=-1, keepdims=True) / n  # mean 0: [..., n]
    variance = (x * x).sum(axis=-1, keepdims=True) / n  # [..., 1]
    return x * (g / xp_of(x).sqrt(variance + eps)) + b  # variance 1, then scale and offset


def matmul(x, w):  # [..., n_in] @ [n_in, n_out] -> [..., n_out], one product over all rows
    if x.ndim == 2 or len(x) == 1:
        return x @ w
    return (x.reshape(-1, x.shape[-1]) @ w).reshape(*x.shape[:-1], w.shape[1])


class PanelMatmul:
    """matmul for weights that also have column panels P (panels.py): rows [..., n_in] times a
    weight w [n_in, n_out] go through w's panels for 2..MAX_ROWS rows, else through w. The panels
    are made once, for the weights named when it is built (any other w multiplies as itself)."""

    def __init__(self, weights, width=None):
        # id(w) -> (w, P [n_panels, n_in, width]); w is held, so its id stays its own
        self.panels = {id(w): (w, panels(w, width)) for w in weights}

    def __call__(self, x, w):  # [..., n_in] @ [n_in, n_out] -> [..., n_out]
        m = x.size // x.shape[-1]  # rows
        held = self.panels.get(id(w)) if 2 <= m <= MAX_ROWS else None
        if held is None:
            return matmul(x, w)
        rows = x.reshape(m, x.shape[-1])  # [m, n_in]
        return panel_matmul(rows, held[1], w.shape[1]).reshape(*x.shape[:-1], w.shape[1])


def linear_weights(params):
    """Every linear layer's weight W [n_in, n_out] in a params tree (the arrays, not copies)."""
    if isinstance(params, list):
        return [w for v in params for w in linear_weights(v)]
    if not isinstance(params, dict):
        return []
    if set(params) == {"w", "b"} and params["w"].ndim == 2:
        return [params["w"]]
    return [w for v in params.values() for w in linear_weights(v)]


CPU = Ops(matmul, gelu, softmax, layer_norm)


def panel_ops(weights, width=None):
    """CPU with weight panels for `weights` (the linear layers and the LM head)."""
    return CPU._replace(matmul=PanelMatmul(weights, width))


def gpu_ops(kernels):
    """gelu, softmax and layer_norm from `kernels` (gpu_kernels on CuPy; a stand-in on the CPU in
    the tests), products as CPU's."""
    return Ops(matmul, kernels.gelu, kernels.softmax, kernels.layer_norm)
