"""gpt2/model.py's operations in fewer, larger NumPy calls: gelu as x / (1 + exp(-2u)),
layer_norm from row sums, a stack of row blocks as one product. Shapes: [..., n]; m rows.
"""
import math

from gpt2.backend import xp_of
from gpt2.fast.panels import (MAX_ROWS, ROW_MAX, padded_matmul, panel_matmul, panels,
                              row_products)
from gpt2.model import Ops, softmax


def gelu(x):  # x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3)
    xp = xp_of(x)
    minus_2u = x * (-2 * math.sqrt(2 / math.pi) * (1 + 0.044715 * x * x))  # [..., n]
    return x / (1 + xp.exp(xp.minimum(minus_2u, 80.0)))  # [..., n]; the cap keeps exp finite


def layer_norm(x, g, b, eps: float = 1e-5):
    n = x.shape[-1]
    x = x - x.sum(axis=-1, keepdims=True) / n  # mean 0: [..., n]
    variance = (x * x).sum(axis=-1, keepdims=True) / n  # [..., 1]
    return x * (g / xp_of(x).sqrt(variance + eps)) + b  # variance 1, scaled, offset: [..., n]


def matmul(x, w):  # [..., n_in] @ [n_in, n_out] -> [..., n_out], one product over all rows
    if x.ndim == 2 or len(x) == 1:
        return x @ w  # [m, n_out] or [1, n_seq, n_out]
    return (x.reshape(-1, x.shape[-1]) @ w).reshape(*x.shape[:-1], w.shape[1])  # [..., n_out]


class PanelMatmul:
    """matmul through the weights' column panels for a few rows: 2..MAX_ROWS rows in small
    products (panels.py's panel_matmul), or, by_row, 2..ROW_MAX rows one by one (row_products;
    more rows: W, padded); .missed: the shapes of the weights such a product found no panels for
    (another model's, or a copy of one of these)."""

    def __init__(self, weights, width=None, by_row=False):
        # id(w) -> (w, P [n_panels, n_in, width]); w is held, so its id stays its own
        self.panels = {id(w): (w, panels(w, width, by_row)) for w in weights}
        self.by_row, self.missed = by_row, set()
        self.max_rows = ROW_MAX if by_row else MAX_ROWS
        self.product = row_products if by_row else panel_matmul

    def __call__(self, x, w):  # [..., n_in] @ [n_in, n_out] -> [..., n_out]
        m = x.size // x.shape[-1]  # rows: scalar
        if m > self.max_rows and self.by_row:
            out = padded_matmul(x.reshape(m, x.shape[-1]), w)  # [m, n_out]
            return out.reshape(*x.shape[:-1], w.shape[1])
        if not 2 <= m <= self.max_rows:
            return matmul(x, w)
        held = self.panels.get(id(w))
        if held is None:
            self.missed.add(w.shape)
            return matmul(x, w)
        rows = x.reshape(m, x.shape[-1])  # [m, n_in]
        return self.product(rows, held[1], w.shape[1]).reshape(*x.shape[:-1], w.shape[1])


def linear_weights(params):
    """-> every linear layer's weight [n_in, n_out] in a params tree (not copies)."""
    if isinstance(params, list):
        return [w for v in params for w in linear_weights(v)]
    if not isinstance(params, dict):
        return []
    if set(params) == {"w", "b"} and params["w"].ndim == 2:
        return [params["w"]]
    return [w for v in params.values() for w in linear_weights(v)]


CPU = Ops(matmul, gelu, softmax, layer_norm)


def panel_ops(weights, width=None, by_row=False):
    """CPU with column panels for `weights` (by_row: a few rows one by one through them)."""
    return CPU._replace(matmul=PanelMatmul(weights, width, by_row))


def gpu_ops(kernels):
    """CPU's products; gelu, softmax and layer_norm from `kernels`."""
    return Ops(matmul, kernels.gelu, kernels.softmax, kernels.layer_norm)
