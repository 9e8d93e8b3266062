"""Weight panels: W [n_in, n_out] kept also as column panels P [n_panels, n_in, width], so that a
product of a few rows reads each weight from memory once and then from the core's own cache. Two
forms (docs/performance.md): x [m, n_in] @ P, m-row products small enough for OpenBLAS's direct
SGEMM (its AVX-512 kernels); and each row times each panel, m matrix-vector products per panel
(GEMV), for kernels whose SGEMM packs all of W on every call, however few the rows.
"""
import numpy as np

from gpt2.backend import aligned

# products of 2..MAX_ROWS rows use the panels (gpt2/fast/ops.py's PanelMatmul); more use W itself
MAX_ROWS = 32
# products of 2..ROW_MAX rows go row by row through the panels; more rows, from where one SGEMM
# over W costs no more than that many GEMVs (bench/engine.py), use W with rows padded to ROW_PAD
ROW_MAX, ROW_PAD = 7, 4


def panel_width(n_in, by_row=False):  # columns per panel (chosen with bench/engine.py's layouts)
    if by_row:  # a panel that one core's cache holds while each row reads it: at most 512 KB
        return 128 if n_in <= 1024 else 64 if n_in <= 2048 else 32
    return 64 if n_in <= 512 else 32


# [n_in, n_out] -> [n_panels, n_in, width], zeros after n_out
def panels(w, width=None, by_row=False):
    n_in, n_out = w.shape
    width = width or panel_width(n_in, by_row)
    n_panels = -(-n_out // width)  # ceil(n_out / width)
    padded = np.zeros((n_in, n_panels * width), dtype=w.dtype)  # [n_in, n_panels * width]
    padded[:, :n_out] = w
    # [n_in, n_panels, width] -> [n_panels, n_in, width], contiguous
    return aligned(padded.reshape(n_in, n_panels, width).transpose(1, 0, 2))


def panel_matmul(x, p, n_out):  # [m, n_in], [n_panels, n_in, width] -> [m, n_out], equal to x @ w
    m = x.shape[0]
    out = x @ p  # one call, one small product per panel: [n_panels, m, width]
    # panels side by side: [m, n_panels * width] -> [m, n_out]
    return out.transpose(1, 0, 2).reshape(m, -1)[:, :n_out]


def row_products(x, p, n_out):  # [m, n_in], [n_panels, n_in, width] -> [m, n_out], equal to x @ w
    m, n_in = x.shape
    # panel after panel, each row times it (a GEMV): [1, m, 1, n_in] @ [n_panels, 1, n_in, width]
    out = x.reshape(1, m, 1, n_in) @ p[:, None]  # [n_panels, m, 1, width]
    # panels side by side: [m, n_panels, width] -> [m, n_out]
    return out.reshape(len(p), m, -1).transpose(1, 0, 2).reshape(m, -1)[:, :n_out]


def padded_matmul(x, w, multiple=ROW_PAD):  # [m, n_in] @ [n_in, n_out], rows padded with zeros
    m = x.shape[0]
    if m % multiple == 0:
        return x @ w
    zeros = np.zeros((-m % multiple, x.shape[1]), dtype=x.dtype)
    return (np.concatenate([x, zeros]) @ w)[:m]  # [m, n_out]
