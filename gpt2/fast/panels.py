"""Weight panels: W [n_in, n_out] kept also as column panels P [n_panels, n_in, width], so that
x [m, n_in] @ P is m-row products small enough for OpenBLAS's direct SGEMM (docs/performance.md).
"""
import numpy as np

# products of 2..MAX_ROWS rows use the panels (gpt2/fast/ops.py's PanelMatmul); more use W itself
MAX_ROWS = 32


def panel_width(n_in):  # columns per panel (chosen with bench/engine.py's layouts)
    return 64 if n_in <= 512 else 32


def panels(w, width=None):  # [n_in, n_out] -> [n_panels, n_in, width], zeros after n_out
    n_in, n_out = w.shape
    width = width or panel_width(n_in)
    n_panels = -(-n_out // width)  # ceil(n_out / width)
    padded = np.zeros((n_in, n_panels * width), dtype=w.dtype)  # [n_in, n_panels * width]
    padded[:, :n_out] = w
    # [n_in, n_panels, width] -> [n_panels, n_in, width], contiguous
    return np.ascontiguousarray(padded.reshape(n_in, n_panels, width).transpose(1, 0, 2))


def panel_matmul(x, p, n_out):  # [m, n_in], [n_panels, n_in, width] -> [m, n_out], equal to x @ w
    m = x.shape[0]
    out = x @ p  # one call, one small product per panel: [n_panels, m, width]
    # panels side by side: [m, n_panels * width] -> [m, n_out]
    return out.transpose(1, 0, 2).reshape(m, -1)[:, :n_out]
