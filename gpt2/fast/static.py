"""The static-shape step: a forward whose arrays keep their shapes and addresses from call to call.

A GPU runs a decoding step of these models as a few hundred small kernels, and launching them costs
more host time than they take to run (gpt2/fast/gpu_kernels.py). Serving engines (vLLM, SGLang)
record a step once as a CUDA graph and replay it: one launch per step. A graph replays the same
kernels on the same memory, so the step it records must read and write fixed buffers: the same
shapes and the same addresses at every call, whatever the cache holds.

StaticStep gives the engine's pass (gpt2/engine.py's row_layout: each row's new tokens and tree
nodes, their positions, cache slots and mask) that form:
- T, the tokens per row, is padded up to a bucket (1, 2, 4, 8, ...), and every row of the engine
  runs (B = rows);
- the pass attends to a fixed number of cache slots n_kv: the whole cache (buckets=False) or the
  next power of two at least 16 (a length bucket); the mask hides the slots a token may not see, so
  the result is the dynamic pass's;
- ids, positions, slots and mask are copied in place into buffers made once per (T, n_kv), the cache
  (already preallocated, gpt2/cache.py) is written at the slots in place, and the hidden states land
  in a preallocated output [B, T, n_embd].
Padding (extra tokens, rows not in the call) writes the cache's spare last slot, which no real token
sees, and sees slot 0 only, so that no softmax row is all -inf. The forward itself is
gpt2/model.py's, called with a mask.

On CuPy, graphs=True records each (T, n_kv) pass as a CUDA graph at its second call and replays it
after that (capture). On the CPU nothing is launched, so the fixed shapes only add work (attention
over n_kv slots, padding): the static step is off by default and exists there to be tested against
the dynamic one.

Shapes: B rows, T tokens per row (bucketed), S cache slots per row, n_kv slots attended to
(bucketed), n_embd.
"""
import numpy as np

MIN_KV = 16  # the smallest length bucket


def bucket(n, low=1):  # the next power of two >= max(n, low). Example: bucket(5) -> 8
    return max(low, 1 << (n - 1).bit_length())


class StaticStep:
    """Fixed buffers for each (T, n_kv) of an engine of `rows` rows, `n_slots` cache slots a row."""

    def __init__(self, rows, n_slots, n_ctx, n_embd, xp, buckets=True, graphs=False):
        self.rows, self.n_slots, self.n_ctx, self.n_embd, self.xp = rows, n_slots, n_ctx, n_embd, xp
        self.buckets, self.graphs = buckets, graphs
        self.buffers = {}  # (T, n_kv) -> {"ids", "positions", "slots", "mask", "out", "graph", ...}

    def shape(self, T, n_kv):  # -> the fixed (T, n_kv) of a pass of T tokens a row over n_kv slots
        n_kv = min(self.n_slots, bucket(n_kv, MIN_KV)) if self.buckets else self.n_slots
        return bucket(T), n_kv

    def _buffers(self, T, n_kv):
        if (T, n_kv) not in self.buffers:
            B, xp = self.rows, self.xp
            self.buffers[T, n_kv] = {
                "ids": xp.zeros((B, T), dtype=np.int64),  # [B, T]
                "positions": xp.zeros((B, T), dtype=np.int64),  # [B, T]
                "slots": xp.zeros((B, T), dtype=np.int64),  # [B, T]
                "mask": xp.zeros((B, 1, T, n_kv), dtype=bool),  # [B, 1, T, n_kv]
                "out": xp.zeros((B, T, self.n_embd), dtype=np.float32),  # [B, T, n_embd]
                "graph": None, "calls": 0}
        return self.buffers[T, n_kv]

    def inputs(self, rows):
        """A row_layout (host NumPy) as fixed-shape host arrays -> (T, n_kv, {"ids", "positions",
        "slots", "mask"})."""
        ids = rows["ids"]  # [B', T']
        B, T0 = ids.shape
        T, n_kv = self.shape(T0, rows["n_kv"])
        spare = self.n_slots - 1
        out = {"ids": np.zeros((self.rows, T), dtype=np.int64),  # [B, T]
               "positions": np.full((self.rows, T), self.n_ctx - 1, dtype=np.int64),  # [B, T]
               "slots": np.full((self.rows, T), spare, dtype=np.int64),  # [B, T]: padding: spare
               "mask": np.zeros((self.rows, 1, T, n_kv), dtype=bool)}  # [B, 1, T, n_kv]
        out["mask"][:, 0, :, 0] = True  # padding sees slot 0 (its output is never read)
        out["ids"][:B, :T0] = ids
        out["positions"][:B, :T0] = rows["positions"]  # [T'] (one prefix for all rows) or [B', T']
        p0 = rows["p0"]
        out["slots"][:B, :T0] = p0 + np.arange(T0) if rows["slots"] is None else rows["slots"]
        m = rows["n_kv"]
        if rows["mask"] is None:  # one token a row after one prefix: it sees every slot to its own
            out["mask"][:B, 0, 0, :m] = True
        else:  # [T', n_kv] (causal, one prefix) or [B', 1, T', n_kv]
            out["mask"][:B, :, :T0, :m] = rows["mask"]
        return T, n_kv, out

    def __call__(self, rows, cache, forward):
        """Run forward(ids, positions, mask) -> hidden [B, T, n_embd] with `cache` writing at the
        fixed slots and attending to n_kv of them -> the output buffer [B, T, n_embd] (the same
        array at every call of a shape)."""
        T, n_kv, host = self.inputs(rows)
        buf = self._buffers(T, n_kv)
        for name, a in host.items():  # in place: the buffers keep their addresses
            if self.xp is np:
                buf[name][...] = a
            else:
                buf[name].set(a)
        cache.at(buf["slots"], n_kv)

        def run():  # the pass, reading and writing only the fixed buffers and the cache
            buf["out"][...] = forward(buf["ids"], buf["positions"], buf["mask"])  # [B, T, n_embd]

        if self.graphs and self.xp is not np:
            replay(buf, run, self.xp)
        else:
            run()
        return buf["out"]


def replay(buf, run, cupy):
    """Run a pass on CuPy: eagerly at its first call (kernels compile), recorded as a CUDA graph at
    its second, replayed from then on. The recording allocates its intermediate arrays from a
    memory pool of its own, kept with the graph, so that no later allocation reuses the memory a
    replay writes."""
    buf["calls"] += 1
    if buf["calls"] == 1:
        return run()
    if buf["graph"] is None:
        pool, stream = cupy.cuda.MemoryPool(), cupy.cuda.Stream(non_blocking=True)
        cupy.cuda.Stream.null.synchronize()
        previous = cupy.get_default_memory_pool()
        cupy.cuda.set_allocator(pool.malloc)
        try:
            with stream:
                stream.begin_capture()
                try:
                    run()
                finally:
                    buf["graph"] = stream.end_capture()
        finally:
            cupy.cuda.set_allocator(previous.malloc)
        buf["pool"], buf["stream"] = pool, stream
    cupy.cuda.get_current_stream().synchronize()  # the inputs are copied in before a replay
    buf["graph"].launch(buf["stream"])
    buf["stream"].synchronize()
