"""layer_norm, softmax and gelu as one CUDA kernel each for CuPy, in float32; sums run as a tree
over THREADS threads, so results differ from NumPy's by about 1e-6 relative. Shapes: [..., n], one
thread block per row of n (docs/performance.md).
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
            f"float u = x * ({c!r}f * (1.f + 0.044715f * x * x)); "
            "y = x / (1.f + expf(fminf(u, 80.f)));",
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
        g, b = cupy.ascontiguousarray(g), cupy.ascontiguousarray(b)  # [n], [n]
        _get("layer_norm")((rows,), (THREADS,), (x, g, b, y, cupy.int32(n), cupy.float32(eps)))
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
