"""Weight panels: a few rows times a weight matrix at close to the cost of one row, on CPUs where
OpenBLAS can.

Verifying K drafts multiplies K + 1 rows by every weight matrix. A one-row product (GEMV) streams
the weight once; a 5-row product goes through OpenBLAS's general GEMM, which first copies ("packs")
the weight panel by panel and then computes in fixed tiles: 2.7-5.4x one row on the 124M shape's
matrices, for work the memory bus could do in ~1x.

On AVX-512 CPUs (OpenBLAS's SkylakeX, Cooperlake and SapphireRapids kernels) OpenBLAS also has a
"direct" SGEMM that reads its operands in place without packing, and it takes that path only for
small products (m * n * k up to about 10^6 here). So the engine keeps a second copy of each weight W
[n_in, n_out] cut into column panels of `width` columns, P [n_panels, n_in, width] (the last panel
padded with zero columns), and multiplies a few rows x [m, n_in] by all panels in one call: x @ P ->
[n_panels, m, width], every panel product small enough for the direct path. Measured by `python -m
bench.engine` (its panel grid: each matrix alone, streaming from memory; one thread, SkylakeX
kernels), 5 rows against one row:

    weight              x @ W    x @ P (width 32)   (width 64)
    768 x 2304 (QKV)    5.3x     2.5x               2.7x
    768 x 3072 (MLP)    5.4x     2.6x               2.4x
    3072 x 768 (MLP)    4.6x     2.4x               2.7x
    768 x 50257 (head)  2.7x     1.6x               1.7x

Under OpenBLAS's Haswell kernels (AMD Zen and older Intel: OPENBLAS_CORETYPE=Haswell on the same
machine) the panels gain nothing (2.5x either way), so gpt2/fast/policy.py's panel_policy turns
them on only where they help. One row keeps the plain product (GEMV is already at the memory
roofline) and so do more than MAX_ROWS rows (whole forwards of 32 new tokens cost the same either
way on the tiny target, 15% less with panels on the 124M shape; from about 48 the packing pays for
itself). The panels cost one more copy of the weights in memory.

Shapes: m (rows), n_in, n_out, n_panels = ceil(n_out / width), width.
"""
import numpy as np

# products of 2..MAX_ROWS rows use the panels (gpt2/fast/ops.py's PanelMatmul); more use W itself
MAX_ROWS = 32


# columns per panel, from whole forwards of 5 new tokens against 1: 124M 1.50x with 32, 1.59x
def panel_width(n_in):
    # with 64 (bench/engine.py's layouts); 355M 1.48x, 1.71x (a side-by-side run)
    return 64 if n_in <= 512 else 32


# [n_in, n_out] -> [n_panels, n_in, width], contiguous, zero columns after n_out
def panels(w, width=None):
    n_in, n_out = w.shape
    width = width or panel_width(n_in)
    n_panels = -(-n_out // width)
    padded = np.zeros((n_in, n_panels * width), dtype=w.dtype)  # [n_in, n_panels * width]
    padded[:, :n_out] = w
    return np.ascontiguousarray(padded.reshape(n_in, n_panels, width).transpose(1, 0, 2))


def panel_matmul(x, p, n_out):  # [m, n_in], [n_panels, n_in, width] -> [m, n_out], equal to x @ w
    m = x.shape[0]
    out = x @ p  # one call, one small product per panel: [n_panels, m, width]
    # panels side by side: [m, n_panels * width] -> [m, n_out]
    return out.transpose(1, 0, 2).reshape(m, -1)[:, :n_out]
