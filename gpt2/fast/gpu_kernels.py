"""Three of the forward's functions as one CUDA kernel each, for CuPy arrays: layer_norm, softmax
and gelu.

Why: on a GPU a decoding step of these models is bound by launches, not by arithmetic or memory.
Every CuPy call costs 10-15 us of host time (measured on an H100 machine: an add 11.8 us, a row sum
13.8 us), and gpt2/model.py's layer_norm is 11 calls, its softmax 5 and its gelu 9. A block has two
layer_norms, one softmax and one gelu: 2 x 11 + 5 + 9 = 36 calls, which these kernels make 4.
Without them the 124M shape decoded one token in 13-19 ms where reading its weights takes 0.2 ms;
with them 10.7 ms (`python -m bench.engine --device gpu`, run once with PICOSPEC_FUSED=0 for the
"before" figure; docs/results/gpu.md).

Each kernel computes the formula of the NumPy function beside it in gpt2/model.py (the mean, then
the variance of the centred row; the row maximum, then the sum of exponentials), in float32, but its
sums run in another order (a tree over 128 threads), so results differ from NumPy's by about 1e-6
relative (tests/test_gpu_kernels.py). Shapes: any leading dimensions; the functions work along the
last axis of length n, read as a C-contiguous copy. Rows are n_embd long for layer_norm (128 for the
tiny draft up to 1600), n_kv or n_vocab (4097, 50257) for softmax. The compiled kernels are cached
per process for the current GPU (one device; a second GPU would need its own). gpt2/fast/ops.py's
gpu_ops makes them an engine's operations; PICOSPEC_FUSED=0 (read by the app) keeps the reference.
"""
import functools
import math

# threads per row (a power of two); each thread strides over the row, whatever its length
THREADS = 128

SOURCE = r"""
// every thread gets the block's sum (or max)
__device__ float block_reduce(float v, float* buf, bool take_max) {
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            float o = buf[threadIdx.x + s];
            buf[threadIdx.x] = take_max ? fmaxf(buf[threadIdx.x], o) : buf[threadIdx.x] + o;
        }
        __syncthreads();
    }
    float r = buf[0];
    __syncthreads();
    return r;
}

extern "C" __global__ void layer_norm(const float* x, const float* g, const float* b, float* y,
                                      int n, float eps) {
    __shared__ float buf[THREADS];
    const float* row = x + (size_t)blockIdx.x * n;  // one block per row
    float* out = y + (size_t)blockIdx.x * n;
    float s = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += row[i];
    float mean = block_reduce(s, buf, false) / n;
    float v = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) { float d = row[i] - mean; v += d * d; }
    float scale = 1.f / sqrtf(block_reduce(v, buf, false) / n + eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        out[i] = (row[i] - mean) * (g[i] * scale) + b[i];
}

extern "C" __global__ void softmax(const float* x, float* y, int n) {
    __shared__ float buf[THREADS];
    const float* row = x + (size_t)blockIdx.x * n;
    float* out = y + (size_t)blockIdx.x * n;
    float m = __int_as_float(0xff800000);  // -inf as bits: NVRTC's headers lack INFINITY
    for (int i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, row[i]);
    m = block_reduce(m, buf, true);
    float s = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float e = expf(row[i] - m); out[i] = e; s += e;
    }
    float inv = 1.f / block_reduce(s, buf, false);
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] *= inv;
}
""".replace("THREADS", str(THREADS))

@functools.cache  # compiled once per process
def _get(name):
    import cupy

    if name == "gelu":  # x / (1 + exp(-2u)), -2u capped at 80, as gpt2/fast/ops.py's gelu
        c = -2 * math.sqrt(2 / math.pi)
        return cupy.ElementwiseKernel(
            "float32 x", "float32 y",
            f"float u = x * ({c!r}f * (1.f + 0.044715f * x * x)); y = x / (1.f + expf(fminf(u, "
            f"80.f)));",
            "picospec_gelu")
    return cupy.RawModule(code=SOURCE).get_function(name)


def _rows(x):  # -> (x as a C-contiguous array, rows, n)
    import cupy

    x = cupy.ascontiguousarray(x)
    n = x.shape[-1]
    return x, x.size // n if n else 0, n


def layer_norm(x, g, b, eps=1e-5):
    import cupy

    x, rows, n = _rows(x)
    y = cupy.empty_like(x)
    if rows:
        _get("layer_norm")((rows,), (THREADS,),
                           (x, cupy.ascontiguousarray(g), cupy.ascontiguousarray(b), y,
                                                  cupy.int32(n), cupy.float32(eps)))
    return y


def softmax(x):
    import cupy

    x, rows, n = _rows(x)
    y = cupy.empty_like(x)
    if rows:
        _get("softmax")((rows,), (THREADS,), (x, y, cupy.int32(n)))
    return y


def gelu(x):
    return _get("gelu")(x)
