"""The static-shape step: fixed buffers, so that CuPy can replay a pass as a CUDA graph. A pass
runs bucket(T') tokens on all B rows over n_kv slots, masked to equal the dynamic pass; padding
writes the spare last slot and sees slot 0 (docs/performance.md).
"""
import numpy as np

MIN_KV = 16  # the smallest length bucket


def bucket(n, low=1):  # the next power of two >= max(n, low). Example: bucket(5) -> 8
    return max(low, 1 << (n - 1).bit_length())


class StaticStep:
    """Fixed buffers per (T, n_kv) for `rows` rows of `n_slots` cache slots."""

    def __init__(self, rows, n_slots, n_ctx, n_embd, xp, buckets=True, graphs=False):
        self.rows, self.n_slots, self.n_ctx, self.n_embd, self.xp = rows, n_slots, n_ctx, n_embd, xp
        self.buckets, self.graphs = buckets, graphs
        self.refused = None  # why CuPy would not record a graph, once it refused one
        # (T, n_kv, width) -> {"ids", "positions", "slots", "mask", "out", "graph", ...}
        self.buffers = {}

    def shape(self, T, n_kv):  # -> the fixed (T, n_kv) of a pass of T tokens a row over n_kv slots
        n_kv = min(self.n_slots, bucket(n_kv, MIN_KV)) if self.buckets else self.n_slots
        return bucket(T), n_kv

    def _buffers(self, T, n_kv, width):
        if (T, n_kv, width) not in self.buffers:
            B, xp = self.rows, self.xp
            self.buffers[T, n_kv, width] = {
                "ids": xp.zeros((B, T), dtype=np.int64),  # [B, T]
                "positions": xp.zeros((B, T), dtype=np.int64),  # [B, T]
                "slots": xp.zeros((B, T), dtype=np.int64),  # [B, T]
                "mask": xp.zeros((B, 1, T, n_kv), dtype=bool),  # [B, 1, T, n_kv]
                "out": xp.zeros((B, T, width), dtype=np.float32),  # [B, T, width]
                "graph": None, "calls": 0}
        return self.buffers[T, n_kv, width]

    def inputs(self, rows):
        """engine.py's row_layout -> (T, n_kv, {"ids", "positions", "slots", "mask"})."""
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

    def __call__(self, rows, cache, forward, width=None):
        """-> forward(ids, positions, mask) in the output buffer [B, T, width] (n_embd, or wider
        with the outputs of tapped blocks)."""
        T, n_kv, host = self.inputs(rows)
        buf = self._buffers(T, n_kv, width or self.n_embd)
        for name, a in host.items():  # in place: the buffers keep their addresses
            if self.xp is np:
                buf[name][...] = a
            else:
                buf[name].set(a)
        cache.at(buf["slots"], n_kv)

        def run():  # the pass, reading and writing only the fixed buffers and the cache
            buf["out"][...] = forward(buf["ids"], buf["positions"], buf["mask"])  # [B, T, width]

        if self.graphs and self.xp is not np:
            if refused := replay(buf, run, self.xp):
                self.graphs, self.refused = False, refused  # every pass eager from now on
        else:
            run()
        return buf["out"]


def replay(buf, run, cupy):
    """Run a pass eagerly, then record it as a CUDA graph (own memory pool), then replay it.
    -> None, or why CuPy would not record it (a call it cannot capture, such as a cuBLAS product):
    then no graph is kept and the pass runs eagerly."""
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
                    graph = stream.end_capture()
        except NotImplementedError as refusal:  # CuPy's answer to a call it cannot capture
            refused = str(refusal) or type(refusal).__name__
        else:
            refused = None
        finally:
            cupy.cuda.set_allocator(previous.malloc)
        if refused:
            run()  # nothing of the pass ran while it was being recorded
            return refused
        buf["graph"], buf["pool"], buf["stream"] = graph, pool, stream
    cupy.cuda.get_current_stream().synchronize()  # the inputs are copied in before a replay
    buf["graph"].launch(buf["stream"])
    buf["stream"].synchronize()
