"""Curated mutation testing: plausible one-line bugs, each planted alone in a temporary copy of the
checkout and run against the test files that use the module it breaks. A mutant the tests miss is a
hole in the suite.

    # every mutant: caught / missed, by which test, time
    python -m tests.suite.mutants
    python -m tests.suite.mutants --only verify-tree-origins,batch-generators-by-row
    python -m tests.suite.mutants --list                            # the list only, nothing run

A mutant is (name, area, kind, file, old, new, tests, why): `old` is a piece of `file` that must
occur exactly once (tests/suite/test_mutants.py checks every one, so the list cannot rot silently;
here a text not found is reported as an error of the list, never as caught); `new` replaces it;
`tests` (files, or one test as file::name) are run one after another, each by `pytest -x -q -p
no:cacheprovider`, until one fails: the pointed ones first, so a caught mutant costs seconds (one
pytest call per entry: pytest given a test and its file together runs the file in its own order). At
the end the tests that caught mutants run once more, together, on the unmutated copy: one that fails
there too proves nothing, and its mutant is reported as an error (a broken tree cannot pass for a
good score). kind says what it breaks: "rule" (what is accepted, sampled or computed) or "record"
(the origins and statistics a step reports). Every method of picospec/methods.py has at least one of
each.

Example line: `caught  verify-tree-origins
tests/picospec/test_tree.py::test_verify_tree_origin_of_each_step_by_hand[Q0]  2 s`
"""
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("rule", "record")


class Mutant(NamedTuple):
    name: str
    area: str  # the module or method it breaks
    kind: str  # "rule" or "record"
    file: str
    old: str
    new: str
    tests: tuple
    why: str


ORIGINS = "tests/picospec/test_methods_step_records.py"

MUTANTS = (
    # --- sampling: the pieces every method shares
    Mutant("residual-flipped", "sampling", "rule", "picospec/sampling.py",
           "r = np.maximum(q - p, 0)", "r = np.maximum(p - q, 0)",
           ("tests/picospec/test_sampling.py",),
           "the residual's subtraction the wrong way round (Leviathan's letters)"),
    Mutant("vocab-check-never-refuses", "sampling", "rule", "picospec/sampling.py",
           "if a is not None and b is not None and a != b:",
           "if a is not None and b is not None and a != b and False:",
           ("tests/picospec/test_sampling_vocab.py",),
           "a draft of another tokenizer runs against the target until shapes clash far inside"),
    Mutant("vocab-check-left-out-of-specinfer", "specinfer", "rule", "picospec/specinfer.py",
           "    for d in drafts:\n        check_vocab(d, target)\n", "",
           ("tests/picospec/test_sampling_vocab.py",),
           "SpecInfer's drafts are no longer checked against the target's vocabulary"),
    Mutant("temperature-multiplied", "sampling", "rule", "picospec/sampling.py",
           "logits = (logs / np.float64(temperature))", "logits = (logs * np.float64(temperature))",
           ("tests/picospec/test_sampling.py",), "q^T instead of q^(1/T)"),
    # --- verify: the lossless core
    Mutant("accept-ratio-inverted", "verify", "rule", "picospec/verify.py",
           "if r < min(1, q[x] / p[x]):", "if r < min(1, p[x] / q[x]):",
           ("tests/picospec/test_sampling.py", "tests/picospec/test_speculative.py"),
           "p/q for q/p: the papers' letters mixed"),
    Mutant("verify-chain-origin", "verify", "record", "picospec/verify.py",
           'return t, token, "resample"', 'return t, token, "bonus"',
           (ORIGINS,), "a rejection's token reported as a bonus"),
    Mutant("verify-tree-origins", "verify", "record", "picospec/verify.py",
           '"resample" if trials.get(node) else "bonus"',
           '"bonus" if trials.get(node) else "resample"',
           ("tests/picospec/test_tree.py", ORIGINS),
           "once missed: verify_tree's two origins swapped (got past the whole suite)"),
    Mutant("verify-tree-residual-of-q", "verify", "rule", "picospec/verify.py",
           "q = residual(q, p)", "q = residual(Q[node + 1], p)",
           ("tests/picospec/test_tree.py",),
           "each sibling's residual taken from the node's q, forgetting earlier rejections"),
    Mutant("step-record-nodes", "record", "record", "picospec/verify.py",
           '"nodes": int(drafted if nodes is None else nodes)', '"nodes": int(drafted)',
           (ORIGINS,), "the step record drops the tree's node count"),
    Mutant("step-record-calls", "record", "record", "picospec/verify.py",
           '"calls": int(calls)', '"calls": 1',
           ("tests/picospec/test_blockwise.py",), "every step counted as one target call"),
    # --- rejection: the batched sampler (vLLM's contract)
    Mutant("recovered-reuses-accept-uniform", "rejection", "rule", "picospec/batched/rejection.py",
           "U = u[:, k:][rejected, at]", "U = u[:, :k][rejected, at]",
           ("tests/picospec/batched/test_rejection.py",),
           "once missed: the recovered token drawn with the acceptance uniform"),
    Mutant("first-rejection-is-a-count", "rejection", "rule", "picospec/batched/rejection.py",
           "n_accepted = np.where(accepted.all(1), k, accepted.argmin(1))",
           "n_accepted = accepted.sum(1)",
           ("tests/picospec/batched/test_rejection.py",),
           "drafts accepted counted, not the position of the first rejection"),
    # --- batch
    Mutant("batch-generators-by-row", "batch", "rule", "picospec/batched/speculative.py",
           "gens = {i: generators[b]", "gens = {b: generators[b]",
           ("tests/picospec/batched/test_speculative.py",
            "tests/picospec/batched/test_rejection.py"),
           "once missed: seeded generators keyed by batch row, not by index among the active rows"),
    Mutant("batch-bonus-row", "batch", "rule", "picospec/batched/speculative.py",
           "bonus = sample_rows(Q[:, -1]", "bonus = sample_rows(Q[:, -2]",
           ("tests/picospec/batched/test_speculative.py",
            "tests/picospec/batched/test_rejection.py"),
           "the bonus token from the last draft's row"),
    Mutant("batch-accepted-counts-bonus", "batch", "record", "picospec/batched/speculative.py",
           "int((out[i] >= 0).sum()) - 1", "int((out[i] >= 0).sum())",
           ("tests/picospec/batched/test_speculative.py",),
           "the per-row accepted count includes the resampled or bonus token"),
    Mutant("batch-tree-mask-chain", "batch engine", "rule", "gpt2/engine.py",
           "mask[b, nodes, len(x):len(x) + m[b]] = tree_mask(parents, np)",
           "mask[b, nodes, len(x):len(x) + m[b]] = np.tril(np.ones((m[b], m[b]), bool))",
           ("tests/gpt2/test_engine_batch.py",),
           "a row's tree nodes see every node before them, not just their ancestors"),
    Mutant("batch-accept-keeps-nothing", "batch engine", "rule", "gpt2/engine.py",
           "self.cache.keep(list(range(n)) + [n + i for i in path], row=b)", "pass",
           ("tests/gpt2/test_engine_batch.py",),
           "accept() lists the path's tokens but leaves their keys and values behind"),
    Mutant("batch-medusa-shared-rng", "medusa", "rule", "picospec/batched/medusa.py",
           "logits[i], posterior, gen[b],", "logits[i], posterior, rng,",
           ("tests/picospec/batched/test_medusa.py::test_batched_rows_equal_each_row_alone",),
           "batched Medusa's posterior ignores the row's own generator"),
    Mutant("batch-medusa-accepted-counts-root", "medusa", "record", "picospec/batched/medusa.py",
           'step["accepted"][b] = len(path)',
           'step["accepted"][b] = len(path) + 1',
           ("tests/picospec/batched/test_medusa.py::test_batched_rows_equal_each_row_alone",),
           "batched Medusa's per-row accepted count includes the next root"),
    Mutant("batch-lookup-chain-as-siblings", "prompt_lookup", "rule",
           "picospec/batched/prompt_lookup.py",
           "return drafts, list(range(-1, len(drafts) - 1))", "return drafts, [-1] * len(drafts)",
           ("tests/picospec/batched/test_prompt_lookup.py::test_batched_rows_equal_each_row_alone",),
           "batched prompt lookup scores its drafts as siblings of the last token, not as a chain"),
    Mutant("batch-rest-unwarped", "rest", "rule", "picospec/batched/rest.py",
           "verify_tree(tokens, parents, warp(probs, **sampling_options), rng)",
           "verify_tree(tokens, parents, probs, rng)",
           ("tests/picospec/batched/test_rest.py::test_batched_rows_equal_each_row_alone",),
           "batched REST verifies each row's trie against the unwarped target"),
    Mutant("batch-lookahead-shared-pool", "lookahead", "rule", "picospec/batched/lookahead.py",
           "pools = [{} for _ in xs]", "pools = [{}] * len(xs)",
           ("tests/picospec/batched/test_lookahead.py::test_batched_rows_equal_each_row_alone",),
           "batched lookahead's rows share one n-gram pool, so a row verifies guesses another "
           "row's text made"),
    Mutant("batch-lookahead-path-unshifted", "lookahead", "rule", "picospec/batched/lookahead.py",
           "return [n_look[b] + j for j in path], token", "return [j for j in path], token",
           ("tests/picospec/batched/test_lookahead.py::test_batched_rows_equal_each_row_alone",),
           "batched lookahead keeps the window's nodes in the cache instead of the accepted trie "
           "path"),
    Mutant("batch-tree-row-by-position", "batch", "rule", "picospec/batched/loop.py",
           "[propose(b, xs[b], room) for b, room in zip(active, rooms)])",
           "[propose(i, xs[b], room) for i, (b, room) in enumerate(zip(active, rooms))])",
           ("tests/picospec/batched/test_lookahead.py::test_batched_rows_equal_each_row_alone",),
           "the batched tree loop names a row by its place among the active rows, so once a row "
           "finishes the next row proposes from another row's window and pool"),
    Mutant("batch-greedy-shared-K", "greedy", "rule", "picospec/batched/greedy.py",
           "Ks[b] = Ks[b] + 2 if n == len(drafts) else max(1, Ks[b] - 1)",
           "Ks[:] = [Ks[b] + 2 if n == len(drafts) else max(1, Ks[b] - 1)] * len(Ks)",
           ("tests/picospec/batched/test_greedy.py::test_batched_greedy_rows_equal_each_row_alone",),
           "batched greedy keeps one heuristic K for the whole batch, set by the last row "
           "verified"),
    Mutant("batch-greedy-confidence-stops-all", "greedy", "rule", "picospec/batched/greedy.py",
           "going[i] = False  # unsure", "going[:] = [False] * len(rows)  # unsure",
           ("tests/picospec/batched/test_greedy.py::test_batched_greedy_rows_equal_each_row_alone",),
           "batched greedy stops every row's drafting when one row's draft is unsure"),
    Mutant("batch-autoregressive-one-generator", "autoregressive", "rule",
           "picospec/batched/autoregressive.py",
           "row_uniforms(len(xs), 1, generators, rng)", "row_uniforms(len(xs), 1, None, rng)",
           ("tests/picospec/batched/test_autoregressive.py::test_batched_autoregressive_rows_equal_each_row_alone",),
           "batched autoregressive sampling draws every row from the shared generator, ignoring "
           "each row's own"),
    Mutant("batch-specinfer-shared-generator", "specinfer", "rule", "picospec/batched/specinfer.py",
           "k, gen[b], greedy,", "k, rng, greedy,",
           ("tests/picospec/batched/test_specinfer.py::test_batched_rows_equal_each_row_alone",),
           "batched SpecInfer draws every row's tree from the shared generator, not the row's own"),
    Mutant("batch-specinfer-law-of-the-parent", "specinfer", "rule",
           "picospec/batched/specinfer.py",
           "sample_children(tries[b], node, laws[i][node + 1],",
           "sample_children(tries[b], node, laws[i][max(node, 0)],",
           ("tests/picospec/batched/test_specinfer.py::test_batched_rows_equal_each_row_alone",
            "tests/picospec/batched/test_specinfer.py::test_micro_rows_equal_each_row_alone"),
           "batched SpecInfer draws a node's children from the law one row too early (its "
           "parent's, or the root's)"),
    Mutant("batch-sequoia-law-of-the-parent", "sequoia", "rule", "picospec/batched/sequoia.py",
           "laws[i][node[c] + 1]", "laws[i][max(node[c], 0)]",
           ("tests/picospec/batched/test_sequoia.py::test_batched_rows_equal_each_row_alone",
            "tests/picospec/batched/test_sequoia.py::test_micro_rows_equal_each_row_alone"),
           "batched Sequoia fills a node's children from the law one row too early"),
    Mutant("batch-blockwise-next-block-from-root", "blockwise", "rule",
           "picospec/batched/blockwise.py", "np.stack([logits[i][k_hat] for _, i, k_hat in again])",
           "np.stack([logits[i][k_hat - 1] for _, i, k_hat in again])",
           ("tests/picospec/batched/test_blockwise.py::test_batched_rows_equal_each_row_alone",),
           "batched Blockwise (merged) takes the next block's first token from the row one before "
           "the accepted end"),
    Mutant("batch-blockwise-verify-shifted", "blockwise", "rule", "picospec/batched/blockwise.py",
           "np.argmax(logits[i][1:], -1)", "np.argmax(logits[i][:-1], -1)",
           ("tests/picospec/batched/test_blockwise.py::test_batched_rows_equal_each_row_alone",),
           "batched Blockwise checks each proposal against p_1 one prefix too early (the tree's "
           "root row first)"),
    Mutant("batch-eagle-head-own-row-state", "eagle", "rule", "gpt2/eagle.py",
           "self.g0[b] if nodes[b][i][1] < 0 else self.g[b][nodes[b][i][1]]",
           "self.g0[b] if nodes[b][i][1] < 0 else self.g[bs[0]][nodes[b][i][1]]",
           ("tests/picospec/batched/test_eagle.py::test_batched_head_equals_each_head_alone",),
           "the batched EAGLE head feeds a node the guessed feature of its parent in the first "
           "row's tree"),
    Mutant("batch-eagle-features-one-early", "eagle", "rule", "picospec/batched/eagle.py",
           "F[b] += [H[i][0]] + [H[i][1 + j] for j in path]",
           "F[b] += [H[i][0]] + [H[i][j] for j in path]",
           ("tests/picospec/batched/test_eagle.py::test_batched_rows_equal_each_row_alone",),
           "batched EAGLE feeds the head each accepted node's parent's feature instead of its own"),
    Mutant("batch-tree-accepted-counts-token", "batch", "record", "picospec/batched/loop.py",
           'step["accepted"][b] = len(path)',
           'step["accepted"][b] = len(path) + 1',
           ("tests/picospec/batched/test_prompt_lookup.py::test_batched_rows_equal_each_row_alone",
            "tests/picospec/batched/test_rest.py::test_batched_rows_equal_each_row_alone"),
           "the batched tree loop's per-row accepted count includes the resampled or bonus token"),
    # --- cache and engine
    Mutant("cache-keep-values-from-keys", "cache", "rule", "gpt2/cache.py",
           "v[:, :, s:len(idx)] = v[:, :, moved]", "v[:, :, s:len(idx)] = k[:, :, moved]",
           ("tests/gpt2/test_engine.py",),
           "copy-paste: compaction moves keys into the value buffer"),
    Mutant("cache-reuse-too-much", "cache", "rule", "gpt2/engine.py",
           "p = [min(c, len(x) - n) for c, x in zip(self._match(xs), xs)]",
           "p = [min(c, len(x) - 1) for c, x in zip(self._match(xs), xs)]",
           ("tests/gpt2/test_engine.py",),
           "the cached prefix reused up to the last token even when n rows are asked for"),
    Mutant("panels-out-of-order", "panels", "rule", "gpt2/fast/panels.py",
           "return out.transpose(1, 0, 2).reshape(m, -1)[:, :n_out]",
           "return out.reshape(m, -1)[:, :n_out]",
           ("tests/gpt2/fast/test_panels.py",),
           "the panel products laid side by side in the wrong order (a reshape that "
           "fits the shape but not the layout)"),
    Mutant("panels-padding-first", "panels", "rule", "gpt2/fast/panels.py",
           "padded[:, :n_out] = w", "padded[:, padded.shape[1] - n_out:] = w",
           ("tests/gpt2/fast/test_panels.py",),
           "the last panel's zero columns put before the weight instead of after it"),
    Mutant("wide-threads-never", "backend", "rule", "gpt2/fast/policy.py",
           "return blas_limit(self.wide.threads if rows >= WIDE_ROWS else self.n)",
           "return blas_limit(self.n)", ("tests/gpt2/fast/test_policy.py",),
           "the thread policy's wide count chosen and reported but never applied"),
    Mutant("wide-threads-head-narrow", "backend", "rule", "gpt2/engine.py",
           "with self.plan.threads.scope(h.shape[0]):", "with self.plan.threads.scope(1):",
           ("tests/gpt2/fast/test_policy.py",),
           "the batched LM head (the largest product of a tiny model) left on one thread"),
    Mutant("threads-left-behind", "backend", "rule", "gpt2/fast/policy.py",
           "                lib.set_num_threads(count)", "                pass",
           ("tests/gpt2/fast/test_policy.py", "tests/gpt2/fast/test_ops.py"),
           "an engine call leaves its BLAS count to the rest of the process"),
    Mutant("threads-zero-accepted", "backend", "rule", "gpt2/fast/policy.py",
           "or requested < 1:", "or requested < 0:", ("tests/gpt2/fast/test_policy.py",),
           "threads=0 reported as 0 while OpenBLAS runs its default count"),
    Mutant("idle-below-zero", "backend", "rule", "gpt2/fast/policy.py",
           "return max(0.0, min(len(shares), sum(shares) + mine)) if shares else None",
           "return min(len(shares), sum(shares) + mine) if shares else None",
           ("tests/gpt2/fast/test_policy.py",), "the free-cores line reads '-0.0 idle now'"),
    Mutant("cpu-quota-ignored", "backend", "rule", "gpt2/fast/policy.py",
           "    quota = cpu_quota()\n", "    quota = None\n", ("tests/gpt2/fast/test_policy.py",),
           "a container given 2 CPUs runs on the host's idle cores"),
    Mutant("cpu-quota-most", "backend", "rule", "gpt2/fast/policy.py",
           "    return min(found) if found else None", "    return max(found) if found else None",
           ("tests/gpt2/fast/test_policy.py",),
           "a child cgroup's larger quota wins over its slice's"),
    Mutant("blas-line-cap-unsaid", "report", "rule", "picospec_app/machine.py",
           "ran is not None and ran < n", "ran is not None and ran > n",
           ("tests/gpt2/fast/test_policy.py",),
           "the BLAS line names 256 threads where the library runs 64"),
    Mutant("memory-limit-ignored", "batch", "rule", "picospec_app/machine.py",
           "host, limit = host_memory(), cgroup_memory_free()", "host, limit = host_memory(), None",
           ("tests/app/test_command_batch_memory.py",),
           "--batch plans for the host's memory inside a 1 GiB container"),
    Mutant("memory-cache-counted-used", "batch", "rule", "picospec_app/machine.py",
           "int(limit) - int(used) + int(stat.get(cache, 0))", "int(limit) - int(used)",
           ("tests/app/test_command_batch_memory.py",),
           "a cgroup's droppable page cache counted as memory in use"),
    Mutant("settings-no-home-traceback", "settings", "rule", "picospec_app/settings.py",
           "except RuntimeError:  # ~name", "except ValueError:  # ~name",
           ("tests/app/test_settings.py",),
           "PICOSPEC_CACHE=~nosuchuser/x ends in a traceback"),
    # --- the forward's operations: bugs that only one value's path takes
    Mutant("ops-self-draft-head-reference", "ops", "rule", "gpt2/self_draft.py",
           'x = ops.layer_norm(h, **params["ln_f"])  # [..., C]',
           'x = REFERENCE.layer_norm(h, **params["ln_f"])  # [..., C]',
           ("tests/gpt2/fast/test_ops.py",),
           "the self-draft's final layer norm on the reference while the engine runs others "
           "(half-fused on a GPU)"),
    Mutant("ops-sublayer-drops-ops", "ops", "rule", "gpt2/self_draft.py",
           'rows["mask"], self.cache, self.plan.ops)', 'rows["mask"], self.cache)',
           ("tests/gpt2/fast/test_ops.py",),
           "the self-draft's sublayers run without the engine's ops"),
    Mutant("ops-eagle-drops-ops", "ops", "rule", "gpt2/eagle.py",
           "cache=self.cache, ops=ops)  # [B, T, C]", "cache=self.cache)  # [B, T, C]",
           ("tests/gpt2/fast/test_ops.py",), "the EAGLE head's block runs without its ops"),
    Mutant("ops-gpu-softmax-reference", "ops", "rule", "gpt2/fast/ops.py",
           "return Ops(matmul, kernels.gelu, kernels.softmax, kernels.layer_norm)",
           "return Ops(matmul, kernels.gelu, softmax, kernels.layer_norm)",
           ("tests/gpt2/fast/test_ops.py",),
           "the GPU value's softmax left on the reference: one kernel not dispatched"),
    Mutant("ops-fast-gelu-constant", "ops", "rule", "gpt2/fast/ops.py",
           "(1 + 0.044715 * x * x)", "(1 + 0.04715 * x * x)", ("tests/gpt2/fast/test_ops.py",),
           "the CPU ops' GELU with a wrong cubic coefficient (the reference path is right)"),
    Mutant("ops-fast-layer-norm-eps", "ops", "rule", "gpt2/fast/ops.py",
           "x * (g / xp_of(x).sqrt(variance + eps)) + b", "x * (g / xp_of(x).sqrt(variance)) + b",
           ("tests/gpt2/fast/test_ops.py",), "the CPU ops' layer norm without its epsilon"),
    Mutant("ops-panels-drop-stacked-rows", "ops", "rule", "gpt2/fast/ops.py",
           "rows = x.reshape(m, x.shape[-1])  # [m, n_in]",
           "rows = x.reshape(m, x.shape[-1])[:x.shape[-2]]  # [m, n_in]",
           ("tests/gpt2/fast/test_ops.py", "tests/gpt2/fast/test_panels.py"),
           "a stack [B, n, C] through the panels keeps its first block only"),
    Mutant("ops-head-without-panels", "ops", "rule", "gpt2/fast/__init__.py",
           'fast.linear_weights(params["blocks"]) + [head], choices.panel_width,',
           'fast.linear_weights(params["blocks"]), choices.panel_width,',
           ("tests/gpt2/fast/test_ops.py", "tests/gpt2/fast/test_panels.py"),
           "the LM head, the largest product, left out of the panels"),
    Mutant("panel-rows-out-of-order", "panels", "rule", "gpt2/fast/panels.py",
           "return out.reshape(len(p), m, -1).transpose(1, 0, 2).reshape(m, -1)[:, :n_out]",
           "return out.reshape(m, len(p), -1).reshape(m, -1)[:, :n_out]",
           ("tests/gpt2/fast/test_panels.py",),
           "the row-by-row products read back row-major where they were written panel-major"),
    Mutant("panel-rows-range-short", "panels", "rule", "gpt2/fast/ops.py",
           "if m > self.max_rows and self.by_row:", "if m >= self.max_rows and self.by_row:",
           ("tests/gpt2/fast/test_panels.py",),
           "the largest product meant to go row by row through the panels sent to W instead"),
    Mutant("panel-rows-padding-misplaced", "panels", "rule", "gpt2/fast/panels.py",
           "return (np.concatenate([x, zeros]) @ w)[:m]  # [m, n_out]",
           "return (np.concatenate([zeros, x]) @ w)[:m]  # [m, n_out]",
           ("tests/gpt2/fast/test_panels.py",),
           "the zero rows put before the real ones, and the first m rows of the product kept"),
    Mutant("aligned-off-the-boundary", "backend", "rule", "gpt2/backend.py",
           "start = -buffer.ctypes.data % ALIGN", "start = 16 - buffer.ctypes.data % 16",
           ("tests/gpt2/test_backend.py",),
           "the copy put on a 16-byte boundary, as malloc gives, not on a cache line's"),
    Mutant("checkpoint-unaligned", "backend", "rule", "gpt2/weights.py",
           "out = aligned_empty(raw.shape, np.float32)", "out = np.empty(raw.shape, np.float32)",
           ("tests/gpt2/test_backend.py",),
           "a checkpoint's tensors land wherever malloc puts them, and every engine copies them"),
    Mutant("engine-weights-unaligned", "backend", "rule", "gpt2/engine.py",
           'aligned(self.xp.asarray(a, dtype="float32"))', 'self.xp.asarray(a, dtype="float32")',
           ("tests/gpt2/test_backend.py",),
           "an engine multiplies by its weights wherever the loader left them"),
    Mutant("panels-miss-unrecorded", "panels", "record", "gpt2/fast/ops.py",
           "            self.missed.add(w.shape)\n", "",
           ("tests/gpt2/fast/test_panels.py",),
           "a product that finds no panels for its weight leaves no trace: a copied weight runs "
           "slowly unseen"),
    # --- trees
    Mutant("tree-positions-off-by-one", "tree", "rule", "gpt2/engine.py",
           "len(x) - 1 + np.array(tree_depths(parents))", "len(x) + np.array(tree_depths(parents))",
           ("tests/gpt2/test_engine.py",), "tree nodes one position too far right"),
    Mutant("tree-mask-transposed", "tree", "rule", "picospec/tree.py",
           "attn_mask[index[c], index[c[:d]]] = True", "attn_mask[index[c[:d]], index[c]] = True",
           ("tests/picospec/test_tree.py",), "ancestors see descendants instead of the other way"),
    Mutant("greedy-path-row", "tree", "rule", "picospec/tree.py",
           "best = int(np.argmax(logits[node + 1]))", "best = int(np.argmax(logits[node]))",
           ("tests/picospec/test_tree.py",),
           "row i taken as the row after node i (it is the row after node i - 1)"),
    # --- medusa
    Mutant("medusa-typical-max", "medusa", "rule", "picospec/medusa.py",
           "threshold = np.minimum(epsilon, delta * np.exp(-entropy))",
           "threshold = np.maximum(epsilon, delta * np.exp(-entropy))",
           ("tests/picospec/test_medusa.py",),
           "once missed: typical acceptance's min(epsilon, delta e^-H) as max"),
    Mutant("medusa-hidden-one-row-early", "medusa", "rule", "picospec/medusa.py",
           "h = h_tree[[(path[-1] + 1) if path else 0]]", "h = h_tree[[path[-1] if path else 0]]",
           ("tests/picospec/test_medusa.py",),
           "once missed: the heads fed the hidden state one row too early (only speed drops)"),
    Mutant("medusa-greedy-origins", "medusa", "record", "picospec/medusa.py",
           "return path, token, greedy_origin(parents, path)", 'return path, token, "bonus"',
           (ORIGINS,), "the greedy posterior's next token always called a bonus"),
    Mutant("tree-greedy-origins-swapped", "tree", "record", "picospec/tree.py",
           'return "bonus" if not children(parents)[path[-1] if path else -1] else "resample"',
           'return "resample" if not children(parents)[path[-1] if path else -1] else "bonus"',
           (ORIGINS,), "the greedy origin of a node swapped for every tree method"),
    # --- blockwise
    Mutant("blockwise-verify-misaligned", "blockwise", "rule", "picospec/blockwise.py",
           "y_hat[k_hat] == best[k_hat - 1]", "y_hat[k_hat] == best[k_hat]",
           ("tests/picospec/test_blockwise.py",),
           "a proposal checked against the row after itself"),
    Mutant("blockwise-head-slice", "blockwise", "rule", "picospec/methods.py",
           'heads["fn"](h)[:K - 1]}', 'heads["fn"](h)[:K]}',
           ("tests/picospec/test_methods.py::test_blockwise_block_size_through_the_table",
            "tests/picospec/test_methods.py"),
           "--K k hands Blockwise k heads instead of k - 1 (p_1 is the model)"),
    Mutant("blockwise-origins-order", "blockwise", "record", "picospec/blockwise.py",
           '["bonus"] + ["draft"] * (k_hat - 1)', '["draft"] * (k_hat - 1) + ["bonus"]',
           (ORIGINS,), "p_1's own token listed last, as the other methods list theirs"),
    # --- prompt lookup
    Mutant("prompt-lookup-proposal-is-q", "prompt_lookup", "rule", "picospec/prompt_lookup.py",
           "P[np.arange(len(drafts)), drafts] = 1",
           "P[np.arange(len(drafts)), drafts] = Q[np.arange(len(drafts)), drafts]",
           ("tests/picospec/test_prompt_lookup.py",),
           "the copied draft's probability taken from the target: always accepted"),
    Mutant("prompt-lookup-drafted", "prompt_lookup", "record", "picospec/prompt_lookup.py",
           "drafted=len(drafts)))", "drafted=n))",
           (ORIGINS,), "drafted counts only the kept drafts: acceptance reads 100%"),
    # --- rest
    Mutant("rest-unwarped", "rest", "rule", "picospec/rest.py",
           "verify_tree(tokens, parents, warp(Q, **sampling_options), rng)",
           "verify_tree(tokens, parents, Q, rng)",
           ("tests/picospec/test_rest.py",), "the trie verified against the unwarped target"),
    Mutant("rest-drafted-is-size", "rest", "record", "picospec/rest.py",
           "drafted=depth(parents),", "drafted=len(tokens),",
           (ORIGINS,), "drafted = the tree's size instead of its depth"),
    # --- lookahead
    Mutant("lookahead-rows-off-by-one", "lookahead", "rule", "picospec/lookahead.py",
           "np.concatenate([Q[:1], Q[1 + n_look:]])", "np.concatenate([Q[:1], Q[n_look:]])",
           ("tests/picospec/test_lookahead.py",),
           "the trie's rows start one row early, in the window's"),
    Mutant("lookahead-accept-trie-indices", "lookahead", "rule", "picospec/lookahead.py",
           "target.accept([n_look + j for j in path])", "target.accept(path)",
           ("tests/picospec/test_lookahead.py",),
           "the cache keeps window nodes: trie indices passed as tree indices"),
    Mutant("lookahead-drafted-with-window", "lookahead", "record", "picospec/lookahead.py",
           "drafted=depth(v_parents)", "drafted=depth(parents)",
           (ORIGINS,), "the window's depth counted as drafted"),
    # --- greedy
    Mutant("greedy-verify-misaligned", "greedy", "rule", "picospec/greedy.py",
           "drafts[n] == best[n]", "drafts[n] == best[n + 1]",
           ("tests/picospec/test_greedy.py",),
           "a draft compared with the target's choice after it"),
    Mutant("greedy-bonus-when-any", "greedy", "record", "picospec/greedy.py",
           '"bonus" if n == k else "resample"', '"bonus" if n else "resample"',
           (ORIGINS,), "a bonus whenever something was accepted"),
    # --- speculative
    Mutant("speculative-argmax-draft", "speculative", "rule", "picospec/speculative.py",
           "drafts.append(sample(p, rng))", "drafts.append(int(np.argmax(p)))",
           ("tests/picospec/test_speculative.py",),
           "drafting by argmax while judging by p (jaymody's six-month bug)"),
    Mutant("speculative-bonus-at-K", "speculative", "record", "picospec/speculative.py",
           '["draft"] * n + [origin], drafted=k',
           '["draft"] * n + ["bonus" if n == K else "resample"], drafted=k',
           (ORIGINS,),
           "bonus decided against K, not the step's k (wrong on the shortened last steps)"),
    # --- autoregressive
    Mutant("autoregressive-unwarped", "autoregressive", "rule", "picospec/autoregressive.py",
           "q = warp(model(x)[-1], **sampling_options)", "q = model(x)[-1]",
           ("tests/picospec/test_autoregressive.py", "tests/picospec/test_greedy.py"),
           "the baseline ignores temperature"),
    Mutant("autoregressive-origin", "autoregressive", "record", "picospec/autoregressive.py",
           '["target"], drafted=0', '["bonus"], drafted=0',
           (ORIGINS,), "the target's own token called a bonus"),
    # --- EAGLE / EAGLE-2 (the head's tree, drafted at the feature level)
    Mutant("eagle-draws-with-replacement", "eagle", "rule", "picospec/eagle.py",
           "sample_without_replacement(p, len(below), rng)",
           "sample_without_replacement(p, 1, rng) * len(below)",
           ("tests/picospec/test_eagle.py::test_follows_the_target_exactly[sampled-top_k]",
            "tests/picospec/test_eagle.py"),
           "sampled children drawn with replacement but judged as drawn without it"),
    Mutant("eagle-drafted-is-path", "eagle", "record", "picospec/eagle.py",
           "drafted=tree_depth(parents), nodes=len(tokens)))",
           "drafted=len(path), nodes=len(tokens)))",
           (ORIGINS + "::test_origins_are_what_happened[eagle]",),
           "drafted counts the accepted path, not the tree"),
    Mutant("eagle2-value-not-cumulative", "eagle2", "rule", "picospec/eagle2.py",
           "value = (values[i] if i >= 0 else 0.0) + logp[t]", "value = logp[t]",
           ("tests/picospec/test_eagle2.py::test_dynamic_tree_keeps_the_best_nodes",
            "tests/picospec/test_eagle2.py"),
           "a node's value is its own log p, not the path's: the reranking keeps the wrong nodes"),
    Mutant("eagle2-target-unwarped", "eagle2", "rule", "picospec/eagle2.py",
           "Q = warp(np.exp(log_softmax(logits)), **sampling_options)  # [1 + m, V]",
           "Q = np.exp(log_softmax(logits))  # [1 + m, V]",
           ("tests/picospec/test_eagle2.py::test_follows_the_target_exactly",
            "tests/picospec/test_eagle2.py"),
           "the tree verified against the raw target law while the root token is warped"),
    Mutant("eagle2-greedy-origin", "eagle2", "record", "picospec/eagle2.py",
           "return path, root, greedy_origin(parents, path)",
           'return path, root, "bonus" if path else "resample"',
           (ORIGINS + "::test_origins_are_what_happened[eagle2]",),
           "bonus whenever a draft was kept, leaf or not"),
    Mutant("batch-eagle2-shared-generator", "eagle2", "rule", "picospec/batched/eagle2.py",
           "verify_dynamic_tree(*tree, z, greedy, gen[b], sampling_options)",
           "verify_dynamic_tree(*tree, z, greedy, rng, sampling_options)",
           ("tests/picospec/batched/test_eagle2.py::test_batched_rows_equal_each_row_alone",),
           "batched EAGLE-2 verifies every row with the shared generator, not the row's own"),
    Mutant("batch-eagle2-finished-rows-accept-zero", "eagle2", "record",
           "picospec/batched/eagle2.py", '"accepted": [-1] * len(xs), "tokens": [[] for _ in xs]}',
           '"accepted": [0] * len(xs), "tokens": [[] for _ in xs]}',
           ("tests/picospec/batched/test_eagle2.py::test_batched_rows_equal_each_row_alone",),
           "batched EAGLE-2 reports a finished row as a row that accepted nothing (0, not -1)"),
    # --- EAGLE-3: the draft vocabulary, the three depths, training-time test
    Mutant("eagle3-vocabulary-least-frequent", "eagle3", "rule", "picospec/eagle3.py",
           'return np.argsort(-counts, kind="stable")[:V_d].astype(np.int64)  # [V_d]',
           'return np.argsort(counts, kind="stable")[:V_d].astype(np.int64)  # [V_d]',
           ("tests/picospec/test_eagle3.py::"
            "test_draft_vocabulary_by_frequency_ties_to_the_lower_id",
            "tests/gpt2/test_eagle3.py::test_the_trainers_vocabulary_is_the_methods"),
           "the draft vocabulary keeps the rarest tokens, not the most frequent"),
    Mutant("eagle3-drafts-draft-ids", "eagle3", "rule", "picospec/eagle2.py",
           "tokens.append(t if d2t is None else int(d2t[t]))", "tokens.append(t)",
           ("tests/picospec/test_eagle3.py",),
           "the tree holds the draft ids 0..V_d - 1, not the target ids d2t names"),
    Mutant("eagle3-law-mass-outside", "eagle3", "rule", "picospec/eagle3.py",
           "p = np.zeros(z.shape[:-1] + (V,))  # [..., V]",
           "p = np.full(z.shape[:-1] + (V,), 1e-12)  # [..., V]",
           ("tests/picospec/test_eagle3.py::"
            "test_the_draft_law_has_no_mass_outside_and_keeps_the_heads_order",),
           "the draft law renormalised over all V: tokens outside the vocabulary get mass"),
    Mutant("eagle3-last-feature", "eagle3", "rule", "picospec/eagle2.py",
           'return getattr(draft, "layers", True)', "return True",
           ("tests/picospec/test_eagle3.py::test_temperature_zero_equals_greedy",),
           "the target gives its last feature, not the three depths the head reads"),
    Mutant("eagle3-records-dropped", "eagle3", "record", "picospec/eagle3.py",
           "total_tokens, stats,", "total_tokens, None,",
           (ORIGINS + "::test_origins_are_what_happened[eagle3]",
            "tests/picospec/test_eagle3.py"),
           "EAGLE-3 keeps no step records"),
    Mutant("eagle3-taps-off-by-one", "eagle3", "rule", "gpt2/model.py",
           "tapped += [x] * taps.count(layer)", "tapped += [x] * taps.count(layer + 1)",
           ("tests/gpt2/test_eagle3.py::test_engine_reads_the_blocks_outputs",),
           "the engine reads the block after the one asked for"),
    Mutant("eagle3-ttt-no-feedback", "eagle3", "rule", "gpt2/train/eagle3.py",
           "a = g  # the next step reads the head's own output",
           "a = a  # the next step reads the head's own output",
           ("tests/gpt2/test_eagle3.py::test_each_unrolled_step_is_the_head_drafting_a_chain",),
           "training-time test feeds every step the target's fused feature, not the head's output"),
    Mutant("eagle3-ttt-sees-all-paths", "eagle3", "rule", "gpt2/train/eagle3.py",
           "return xp.concatenate([first] + [own] * (s - 1), 1)",
           "return xp.concatenate([first] * s, 1)",
           ("tests/gpt2/test_eagle3.py::test_each_unrolled_step_is_the_head_drafting_a_chain",),
           "an unrolled step attends to the other positions' drafted paths, as no draft can"),
    Mutant("eagle3-ttt-token-not-shifted", "eagle3", "rule", "gpt2/train/eagle3.py",
           "tokens = ids[:, xp.minimum(xp.arange(J) + s, T - 1)]",
           "tokens = ids[:, xp.minimum(xp.arange(J) + 1, T - 1)]",
           ("tests/gpt2/test_eagle3.py::test_each_unrolled_step_is_the_head_drafting_a_chain",),
           "every unrolled step reads step 1's token, not the next one along the path"),
    Mutant("eagle3-ttt-gradient-not-carried", "eagle3", "rule", "gpt2/train/eagle3.py",
           "block_backward_past(dg + da, c_block", "block_backward_past(dg, c_block",
           ("tests/gpt2/test_eagle3.py::test_gradients_match_finite_differences",),
           "the gradient of a step's input does not flow back into the step before"),
    Mutant("eagle3-ttt-targets-at-draft-ids", "eagle3", "rule", "gpt2/train/eagle3.py",
           "return xp.exp(log_softmax(q_full[..., d2t])), keep",
           "return xp.exp(log_softmax(q_full[..., :len(d2t)])), keep",
           ("tests/gpt2/test_eagle3.py::test_step_targets",),
           "the training targets read the target's logits at ids 0..V_d - 1, not at d2t"),
    Mutant("batch-eagle3-shared-generator", "eagle3", "rule", "picospec/batched/eagle3.py",
           "generators, **sampling_options)", "None, **sampling_options)",
           ("tests/picospec/batched/test_eagle3.py::test_micro_rows_equal_each_row_alone",),
           "batched EAGLE-3 draws every row from the shared generator, not the row's own"),
    # --- self-drafting (layer_skip: Draft & Verify's skipped sublayers; early_exit: LayerSkip's
    # first E layers)
    Mutant("self-draft-verifies-unwarped", "layer_skip", "rule", "picospec/self_draft.py",
           "return token, p, float(p_raw[token])", "return token, p_raw, float(p_raw[token])",
           ("tests/picospec/test_self_draft.py::test_joint_law_equals_target_with_adaptive_stop[T=0.6]",
            "tests/picospec/test_self_draft.py"),
           "drafts judged against the unwarped draft law they were not drawn from"),
    Mutant("layer-skip-threshold-backwards", "layer_skip", "rule", "picospec/self_draft.py",
           "gamma_next = gamma + epsilon if AR <= alpha",
           "gamma_next = gamma - epsilon if AR <= alpha",
           ("tests/picospec/test_self_draft.py::test_adapt_threshold_worked_example",
            "tests/picospec/test_self_draft.py"),
           "the threshold falls while drafts are rejected (more drafts when they fail)"),
    Mutant("layer-skip-drafted-planned", "layer_skip", "record", "picospec/self_draft.py",
           "drafted=len(drafts)))", "drafted=k))",
           (ORIGINS + "::test_origins_are_what_happened[layer_skip]",),
           "drafted = the tokens planned, not those drafted before the draft stopped unsure"),
    Mutant("early-exit-verify-skips-a-sublayer", "early_exit", "rule", "gpt2/self_draft.py",
           'range(cut, 2 * self.hparams["n_layer"])', 'range(cut + 1, 2 * self.hparams["n_layer"])',
           ("tests/gpt2/test_self_draft.py::test_verification_reusing_the_draft_equals_a_full_forward",
            "tests/gpt2/test_self_draft.py"),
           "the verification resumes one sublayer past the cut"),
    Mutant("early-exit-first-token-bonus", "early_exit", "record", "picospec/self_draft.py",
           'step_record([token], ["target"], drafted=0)',
           'step_record([token], ["bonus"], drafted=0)',
           (ORIGINS + "::test_origins_are_what_happened[early_exit]",),
           "the target's first token called a bonus"),
    Mutant("batch-self-draft-reads-the-filler", "layer_skip", "rule",
           "picospec/batched/self_draft.py",
           "verify_chain(d, P[i], Q[i, :len(d) + 1], gen[b])",
           "verify_chain(d, P[i], Q[i, -len(d) - 1:], gen[b])",
           ("tests/picospec/batched/test_self_draft.py::test_batched_rows_equal_each_row_alone",
            "tests/picospec/batched/test_self_draft.py"),
           "batched: a row that drafted fewer than the step's k is verified against the laws after "
           "the filler"),
    Mutant("batch-self-draft-drafted-planned", "early_exit", "record",
           "picospec/batched/self_draft.py",
           'step = {"drafted": k, "accepted"', 'step = {"drafted": K, "accepted"',
           ("tests/picospec/batched/test_self_draft.py::test_batched_rows_equal_each_row_alone",),
           "batched: drafted = the K asked, not the most drafts a row made before it stopped "
           "unsure"),
    Mutant("batch-self-draft-reuses-a-left-prefix", "layer_skip", "rule", "gpt2/self_draft.py",
           "r = np.where(u == self.verified[:B], read, u)",
           "r = np.where(u <= self.verified[:B], read, u)",
           ("tests/picospec/batched/test_self_draft.py::test_batched_logits_equal_each_row_on_its_own_engine",
            "tests/picospec/batched/test_self_draft.py"),
           "batched: a row whose call leaves its verified prefix still reuses the draft's "
           "residuals at the cut"),
    # --- cascade drafting
    Mutant("cascade-verifies-against-drafter", "cascade", "rule", "picospec/cascade.py",
           "return drafts[:n] + [token], list(Q[:n + 1])",
           "return drafts[:n] + [token], list(laws[:n]) + [Q[n]]",
           ("tests/picospec/test_cascade.py::test_joint_law_equals_target[vertical-T=1]",
            "tests/picospec/test_cascade.py"),
           "a reviewed token verified against the smaller drafter's law, not the reviewer's"),
    Mutant("cascade-drafted-is-accepted", "cascade", "record", "picospec/cascade.py",
           "step_record(new, origins, drafted=drafted)",
           "step_record(new, origins, drafted=len(new) - 1)",
           (ORIGINS + "::test_origins_are_what_happened[cascade]",),
           "drafted counts the kept drafts only"),
    Mutant("batch-cascade-reviewer-first-rows", "cascade", "rule", "picospec/batched/cascade.py",
           "verify_drafts(d, p, q[n - len(d) - 1:], rng)",
           "verify_drafts(d, p, q[:len(d) + 1], rng)",
           ("tests/picospec/batched/test_cascade.py::test_batched_rows_equal_each_row_alone_on_toys",
            "tests/picospec/batched/test_cascade.py"),
           "batched cascade reads a row's reviewer laws from the first rows of the batched call, "
           "not its last: a row with a shorter draft than its neighbours is verified against the "
           "laws after the wrong prefixes"),
    Mutant("batch-cascade-accepted-counts-token", "cascade", "record",
           "picospec/batched/cascade.py", '"accepted": [records[b]["accepted"] if b in records',
           '"accepted": [len(records[b]["tokens"]) if b in records',
           ("tests/picospec/batched/test_cascade.py::test_batched_rows_equal_each_row_alone_on_toys",
            "tests/picospec/batched/test_cascade.py"),
           "batched cascade's per-row accepted count includes the resampled or bonus token"),
    # --- token trees (SpecInfer, Sequoia)
    Mutant("specinfer-repeats-merged", "specinfer", "rule", "picospec/specinfer.py",
           "picks = [sample(p, rng) for _ in range(k)]",
           "picks = list(dict.fromkeys(sample(p, rng) for _ in range(k)))",
           ("tests/picospec/test_specinfer.py",),
           "repeated i.i.d. draws tried once: the residual moves too little"),
    Mutant("specinfer-nodes-are-draws", "specinfer", "record", "picospec/specinfer.py",
           "nodes=len(tokens)))",
           "nodes=len(trie.draws)))",
           (ORIGINS + "::test_origins_are_what_happened[specinfer]",),
           "nodes counts draws, not scored nodes"),
    Mutant("sequoia-draws-with-replacement", "sequoia", "rule", "picospec/sampling.py",
           "p[picks[-1]] = 0", "p[picks[-1]] *= 1",
           ("tests/picospec/test_sequoia.py",),
           "siblings drawn with replacement but verified as without"),
    Mutant("sequoia-drafted-is-size", "sequoia", "record", "picospec/sequoia.py",
           "drafted=tree_depth(parents), nodes",
           "drafted=len(tokens), nodes",
           (ORIGINS + "::test_origins_are_what_happened[sequoia]",),
           "drafted = the tree's size, not its depth"),
    # --- the methods table
    Mutant("methods-auto-posterior-swapped", "methods", "rule", "picospec/methods.py",
           '"greedy" if sampling.get("temperature", 1) == 0 else "lossless"',
           '"lossless" if sampling.get("temperature", 1) == 0 else "greedy"',
           ("tests/picospec/test_medusa.py",),
           "--posterior auto: greedy and lossless the wrong way round"),
    Mutant("methods-sampling-dropped", "methods", "rule", "picospec/methods.py",
           'if law(method, options) == "greedy":', 'if law(method, options) != "greedy":',
           ("tests/picospec/test_methods.py",),
           "the sampling options kept from greedy-only rows and dropped from the rest"),
    # --- the figures the command reports (picospec_app), worked by hand in
    # tests/app/test_run_figures.py
    Mutant("summary-acceptance-per-node", "report", "rule", "picospec_app/run.py",
           '"acceptance": accepted / drafted if drafted else None',
           '"acceptance": accepted / nodes if nodes else None',
           ("tests/app/test_run_figures.py::test_acceptance_is_accepted_over_drafted_also_for_trees",
            "tests/app/test_run_figures.py"),
           "once missed: a tree method's acceptance divided by the nodes scored, not the tokens "
           "drafted"),
    Mutant("compare-c-is-the-draft", "report", "rule", "picospec_app/compare.py",
           '"c": float(c), "c_d": float(c_d)', '"c": float(c_d), "c_d": float(c)',
           ("tests/app/test_compare.py",),
           "compare's c names the draft's call again, not the target's (two meanings of c)"),
    Mutant("cost-model-rest-left-out", "report", "rule", "picospec_app/run.py",
           '"predicted": cost_model_speedup(E, c, pairs, rest, rest_base),',
           '"predicted": cost_model_speedup(E, c, pairs),',
           ("tests/app/test_run.py", "tests/app/test_run_figures.py"),
           "the cost model forgets the step's time outside its calls and predicts too much"),
    Mutant("cost-model-rest-of-baseline-left-out", "theory", "rule", "picospec/theory.py",
           "return E * (1 + rest_base) / (c + sum(k * c_d for k, c_d in drafts) + rest)",
           "return E / (c + sum(k * c_d for k, c_d in drafts) + rest)",
           ("tests/app/test_run.py", "tests/app/test_run_figures.py"),
           "autoregressive decoding's own time between calls left out: the method looks worse"),
    Mutant("cost-model-c-unscaled", "report", "rule", "picospec_app/run.py",
           'c = median(r["target_s"] / r["target_calls"] for r in runs) / one',
           'c = median(r["target_s"] / r["target_calls"] for r in runs)',
           ("tests/app/test_run_figures.py::test_a_run_all_accepted_by_hand",
            "tests/app/test_run_figures.py"),
           "c in seconds, not in one-token target calls"),
    Mutant("batch-speedup-inverted", "report", "rule", "picospec_app/report.py",
           "speedup = speedup_of(*rounds)", "speedup = speedup_of(*rounds[::-1])",
           ("tests/app/test_run_figures.py::test_batch_json_figures_by_hand",
            "tests/app/test_run_figures.py"),
           "once missed: --batch prints the method's time over the baseline's"),
    Mutant("batch-tokens-per-call-counts-finished-rows", "report", "rule",
           "picospec_app/run.py", 'for s in stats[g] if s["accepted"][b] >= 0)',
           "for s in stats[g])",
           ("tests/app/test_run_figures.py::test_batch_json_figures_by_hand",
            "tests/app/test_run_figures.py"),
           "once missed: a --batch row's tokens per target call counts the calls made after it "
           "had finished"),
    Mutant("batch-tree-nodes-summed", "record", "record", "picospec/batched/loop.py",
           '"nodes": max(len(t) for t, _ in trees)', '"nodes": sum(len(t) for t, _ in trees)',
           ("tests/app/test_run_figures.py::test_batched_tree_record_nodes_is_the_widest_tree",),
           "once missed: a batched step's nodes summed over the rows, not the widest tree"),
    # --- the checker's calibration, the theory, the engine's reuse, the batched warps
    Mutant("support-toy-keeps-token-0", "checker", "rule", "picospec/check/exact_law.py",
           "np.put_along_axis(mask, (diagonal % V)[..., None], True, -1)",
           "np.put_along_axis(mask, (diagonal % V)[..., None], False, -1)",
           ("tests/picospec/test_check.py::"
            "test_an_inverse_cdf_that_falls_back_to_token_0_fails_its_support_case",),
           "the support cases' target forbids token 0 nowhere: an inverse CDF landing on 0 passes"),
    Mutant("checker-dof-one-more", "checker", "rule", "picospec/check/exact_law.py",
           "G / williams(expected)), len(expected) - 1", "G / williams(expected)), len(expected)",
           ("tests/picospec/check/test_exact_law_calibration.py::test_pvalues_of_a_correct_sampler_are_uniform",
            "tests/picospec/check/test_exact_law_calibration.py"),
           "once missed: the G-test's degrees of freedom one too many (too lenient)"),
    Mutant("checker-dof-one-less", "checker", "rule", "picospec/check/exact_law.py",
           "G / williams(expected)), len(expected) - 1",
           "G / williams(expected)), len(expected) - 2",
           ("tests/picospec/check/test_exact_law_calibration.py::test_pvalues_of_a_correct_sampler_are_uniform",
            "tests/picospec/check/test_exact_law_calibration.py"),
           "the G-test's degrees of freedom one too few (too strict)"),
    Mutant("theory-alpha-target-one-position-late", "theory", "rule", "picospec/theory.py",
           "q = warp(target_model(x[:-1], n)", "q = warp(target_model(x, n)",
           ("tests/picospec/test_theory.py::test_acceptance_at_one_position_by_hand",
            "tests/picospec/test_theory.py"),
           "once missed: the acceptance estimate reads the target's law one position late"),
    Mutant("theory-chain-tokens-unconditional", "theory", "rule", "picospec/theory.py",
           "        total += reach", "        total += a",
           ("tests/picospec/test_theory.py::test_expected_tokens_of_a_step_by_hand_and_sampled",
            "tests/picospec/test_theory.py"),
           "the tokens a step expects add each position's acceptance, not the chance of reaching "
           "it"),
    Mutant("acceptance-vector-target-one-prefix-early", "theory", "rule", "picospec/sequoia.py",
           "Q = warp(target(list(seq), n), **sampling_options)",
           "Q = warp(target(list(seq)[:-1], n), **sampling_options)",
           ("tests/picospec/test_theory.py::test_acceptance_vector_at_temperature_zero_by_hand",
            "tests/picospec/test_theory.py"),
           "the measured acceptance vector verifies against the target's law one prefix early"),
    Mutant("cache-prefix-shortcut-off-by-one", "cache", "rule", "gpt2/engine.py",
           "a[:n - 16] == b[:n - 16] else 0", "a[:n - 17] == b[:n - 17] else 0",
           ("tests/gpt2/test_engine_reuse.py::test_common_prefix_length_at_every_parting_point",
            "tests/gpt2/test_engine_reuse.py"),
           "once missed: the common prefix's shortcut trusts one token it never compared"),
    Mutant("cache-prefix-shortcut-skips-one", "cache", "rule", "gpt2/engine.py",
           "i = n - 16 if n > 16", "i = n - 15 if n > 16",
           ("tests/gpt2/test_engine_reuse.py::test_single_engine_reuse_equals_a_fresh_engine",
            "tests/gpt2/test_engine_reuse.py"),
           "the common prefix's shortcut starts one token past what it compared"),
    Mutant("batch-speculative-unwarped-draft", "speculative", "rule",
           "picospec/batched/speculative.py",
           "p = warp(draft_model([x + d for x, d in zip(rows, drafts)])[:, -1], "
           "**sampling_options)",
           "p = draft_model([x + d for x, d in zip(rows, drafts)])[:, -1]",
           ("tests/picospec/batched/test_speculative.py::test_batched_rows_equal_each_row_alone",),
           "once missed: batched speculative sampling drafts from the unwarped draft law (still "
           "lossless, other draws)"),
    Mutant("batch-autoregressive-drops-top-p", "autoregressive", "rule",
           "picospec/batched/autoregressive.py",
           "q = warp(model(xs)[:, -1], **sampling_options)",
           'q = warp(model(xs)[:, -1], **{**sampling_options, "top_p": None})',
           ("tests/picospec/batched/test_autoregressive.py::test_batched_autoregressive_rows_equal_each_row_alone",),
           "batched autoregressive sampling ignores top-p when top-k is set too"),
    # --- the edges: the checker's pooling and the graders
    Mutant("checker-zeros-pooled-with-rare", "checker", "rule", "picospec/check/exact_law.py",
           "return (probs > 0) & (n * probs < min_expected)",
           "return n * probs < min_expected",
           ("tests/picospec/check/test_exact_law_zeros.py",),
           "sequences the target forbids pooled with the rare cells: a few forbidden draws pass"),
    Mutant("checker-forbidden-needs-three", "checker", "rule", "picospec/check/exact_law.py",
           "impossible = counts[..., ~possible].sum(-1) > 0",
           "impossible = counts[..., ~possible].sum(-1) > 2",
           ("tests/picospec/check/test_exact_law_zeros.py",),
           "up to two draws of a forbidden sequence are forgiven"),
    Mutant("grader-verdict-when-one-control-caught", "graders", "rule",
           "picospec/exercises/grading.py", "    if missed:\n",
           "    if len(missed) == len(caught):\n",
           ("tests/picospec/test_exercises.py::"
            "test_no_verdict_when_any_one_broken_sampler_passes",),
           "a law-graded verdict given while one of the checker's broken samplers went uncaught"),
    Mutant("grader-typical-accept-zip", "graders", "rule", "picospec/exercises/typical_accept.py",
           "[bool(y) for y in yours] == list(expected)",
           "all(bool(y) == e for y, e in zip(yours, expected))",
           ("tests/picospec/test_exercises.py::test_typical_accept_needs_one_boolean_per_node",
            "tests/picospec/test_exercises.py"),
           "fewer booleans than nodes (even none) pass typical_accept"),
    Mutant("grader-medusa-rows-as-sets", "graders", "rule", "picospec/exercises/medusa_buffers.py",
           "np.array(sorted(map(tuple, a.tolist())), a.dtype)",
           "np.array(sorted(map(tuple, map(sorted, a.tolist()))), a.dtype)",
           ("tests/picospec/test_exercises.py",),
           "a retrieve row listed leaf to root passes (each row compared as a set)"),
    # --- the edges: the run's figures and its memory plan
    Mutant("figures-full-acceptance-forgets-own-token", "run", "record", "picospec_app/run.py",
           'return 1 + float(np.mean([s["drafted"] for s in stats]))',
           'return float(np.mean([s["drafted"] for s in stats]))',
           ("tests/app/test_run_figures.py",),
           "'every draft accepted' E forgets the target's own token (4.00 and 2.40x for 5.00 and "
           "3.00x)"),
    Mutant("figures-accept-untimed", "run", "record", "picospec_app/run.py",
           "        self.model.accept(path)\n        self.seconds += self.clock() - start\n",
           "        self.model.accept(path)\n",
           ("tests/app/test_run_figures.py::test_a_tree_targets_accept_counts_in_its_seconds",
            "tests/app/test_run_figures.py"),
           "a tree method's accept (cache compaction) falls out of the target's seconds: c low"),
    Mutant("batch-plans-on-all-free-memory", "run", "rule", "picospec_app/plan.py",
           "budget = free // 2 if free is not None", "budget = free if free is not None",
           ("tests/app/test_command_batch_memory.py",),
           "--batch plans its groups on all the free memory, not half as its help says"),
    # --- the edges: the thread and panel policy, the plan's build, the settings, the door
    Mutant("policy-threads-request-not-wide", "policy", "rule", "gpt2/fast/policy.py",
           "self.wide = choose_wide(self.n_params, self.n, requested, free)",
           "self.wide = choose_wide(self.n_params, self.n, None, free)",
           ("tests/gpt2/fast/test_policy.py",),
           "--threads 1 no longer caps forwards of 33 rows or more"),
    Mutant("policy-idle-cores-cut", "policy", "rule", "gpt2/fast/policy.py",
           "return max(1, min(cpus, round(idle))), cpus",
           "return max(1, min(cpus, int(idle))), cpus",
           ("tests/gpt2/fast/test_policy.py",),
           "1.8 idle cores give 1 thread (cut, not rounded)"),
    Mutant("policy-wide-inside-panel-range", "policy", "rule", "gpt2/fast/policy.py",
           "WIDE_ROWS = MAX_ROWS + 1", "WIDE_ROWS = MAX_ROWS",
           ("tests/gpt2/fast/test_policy.py",),
           "a 32-row forward, still the panels' range, switches to the wide count"),
    Mutant("policy-panels-skylakex-only", "policy", "rule", "gpt2/fast/policy.py",
           'DIRECT_SGEMM = ("SkylakeX", "Cooperlake", "SapphireRapids")',
           'DIRECT_SGEMM = ("SkylakeX",)',
           ("tests/gpt2/fast/test_policy.py",),
           "panels off on OpenBLAS's Cooperlake and SapphireRapids kernels (same direct SGEMM)"),
    Mutant("forward-own-ops-unpadded", "policy", "rule", "gpt2/fast/__init__.py",
           'kind in ("cpu", "given")', 'kind == "cpu"',
           ("tests/gpt2/fast/test_policy.py",),
           "an engine on a caller's own Ops value loses its row padding"),
    Mutant("settings-threads-256-refused", "settings", "rule", "picospec_app/settings.py",
           "not 1 <= int(value) <= 256", "not 1 <= int(value) < 256",
           ("tests/app/test_settings.py",),
           "PICOSPEC_THREADS=256 refused though its message and --threads allow 256"),
    Mutant("settings-blank-threads-refused", "settings", "rule", "picospec_app/settings.py",
           'return environ.get(name, "").strip() or None',
           'return environ.get(name, "") or None',
           ("tests/app/test_settings.py",),
           "a blank setting of spaces counts as set (one rule for every setting broken)"),
    Mutant("settings-unknown-name-ignored", "settings", "rule", "picospec_app/settings.py",
           "    unknown_names(environ)\n", "",
           ("tests/app/test_settings.py",),
           "a dropped or misspelt PICOSPEC_* setting is ignored without a word"),
    Mutant("door-no-switch-value-unexpected", "door", "rule", "picospec_cli/__init__.py",
           'before.lstrip("-").removeprefix("no-")', 'before.lstrip("-")',
           ("tests/cli/test_picospec_cli.py",),
           "--no-json yes told 'unexpected argument' instead of 'is a switch'"),
    Mutant("door-negative-number-read-as-option", "door", "rule", "picospec_cli/__init__.py",
           'word == "--" or word[:1] == "-" and number(word)', 'word == "--"',
           ("tests/cli/test_picospec_cli_argv.py",),
           "--temperature -1e-3 told 'needs a value': argparse reads -1e-3 as an option"),
    Mutant("door-dashdash-value-lost", "door", "rule", "picospec_cli/__init__.py",
           'word == "--" or word[:1] == "-" and number(word)', 'word[:1] == "-" and number(word)',
           ("tests/cli/test_picospec_cli_argv.py",),
           "--prompt -- is read as the end of options, not as the text --"),
    Mutant("door-mark-left-on-value", "door", "rule", "picospec_cli/__init__.py",
           "v.removeprefix(MARK) if isinstance(v, str) else v", "v",
           ("tests/cli/test_picospec_cli_argv.py",),
           "a marked value keeps its mark: --K -3 arrives as text argparse never saw"),
    # --- the edges: offline and the hub
    Mutant("offline-setting-ignored", "load", "rule", "picospec_app/plan.py",
           'offline = "PICOSPEC_OFFLINE" if settings.offline else False',
           'offline = False if settings.offline else False',
           ("tests/gpt2/test_hub.py::test_main_offline_sends_no_request",),
           "PICOSPEC_OFFLINE=1 alone no longer keeps main.py off the network"),
    Mutant("offline-flag-ignored", "load", "rule", "picospec_app/plan.py",
           'offline = "--offline" if values["offline"] else False',
           'offline = False if values["offline"] else False',
           ("tests/gpt2/test_hub.py::test_main_offline_sends_no_request",),
           "--offline alone no longer keeps main.py off the network"),
    Mutant("hub-alias-shadowed-by-folder", "load", "rule", "gpt2/hub.py",
           "if name not in ALIASES and is_local(name):", "if is_local(name):",
           ("tests/gpt2/test_hub.py::"
            "test_an_alias_wins_over_a_folder_of_its_name_from_any_folder",),
           "a folder named like a hub alias in the current folder shadows the alias"),
    # --- the edges: Sequoia's hardware-aware size and its measured acceptance vector
    Mutant("sequoia-size-draft-call-per-node", "sequoia", "rule", "picospec/sequoia.py",
           "internal = len({tuple(c[:-1]) for c in choices})", "internal = len(choices)",
           ("tests/picospec/test_sequoia.py::"
            "test_hardware_aware_choice_charges_the_draft_calls_the_tree_makes",),
           "the hardware-aware size charges a draft call per node, not per node with children"),
    Mutant("sequoia-iid-acceptance-node-index", "sequoia", "record", "picospec/sequoia.py",
           "accepted = draws.index(path[0]) if path else None",
           "accepted = path[0] if path else None",
           ("tests/picospec/test_sequoia.py::test_iid_acceptance_credits_the_draw_rank",),
           "the i.i.d. acceptance vector credits a node's index instead of its draw rank"),
    # --- the edges: the results pages and the kernel-family runner
    Mutant("page-untracked-files-dirty", "pages", "record", "tools/page.py",
           '"status", "--porcelain", "--untracked-files=no"', '"status", "--porcelain"',
           ("tests/tools/test_page.py",),
           "any untracked file marks a page 'with uncommitted changes'"),
    Mutant("page-app-not-watched", "pages", "record", "tools/page.py",
           '"picospec", "picospec_app", "picospec_cli", "tools")', '"picospec", "tools")',
           ("tests/tools/test_page.py",),
           "a page's commit row stays clean after an edit under picospec_app/ or picospec_cli/"),
    Mutant("families-wait-without-page", "pages", "rule", "tools/families.py",
           "wait_quiet(quiet) if quiet and out else", "wait_quiet(quiet) if quiet else",
           ("tests/tools/test_families.py::test_no_page_no_wait",),
           "the family runner waits for a quiet machine when no page is asked for"),
    Mutant("families-relay-dies-on-closed-pipe", "pages", "rule", "tools/families.py",
           "except (BrokenPipeError, ValueError):", "except ValueError:",
           ("tests/tools/test_families.py::test_the_relay_outlives_a_closed_reader",),
           "a bench command piped to head: a BrokenPipeError traceback from the relay thread"),
    Mutant("families-gpu-run-per-family", "pages", "rule", "tools/families.py",
           'if values.get("device") == "gpu":', "if False:",
           ("tests/cli/test_gpt2.py::test_bench_gpu_without_cupy_is_one_line",),
           "bench.engine --device gpu prints a kernel family's header before CuPy's refusal"),
    Mutant("eagle-record-into-the-shipped-eagle3", "pages", "rule", "bench/eagle.py",
           "if eagle3.parent == Path(record).resolve().parent:", "if True:",
           ("tests/bench/test_eagle.py::"
            "test_record_writes_the_eagle_3_rows_only_beside_the_eagle_head",),
           "bench.eagle --record DIR of one's own head rewrites the shipped EAGLE-3 head's card"),
    # --- the edges: the tree checks read the project's tracked files only
    Mutant("tree-checks-read-untracked", "tree checks", "rule", "tests/support/tracked.py",
           "    listed = tracked(str(root))\n", "    listed = None\n",
           ("tests/test_architecture.py::"
            "test_build_output_a_venv_and_scratch_files_change_no_verdict",),
           "build/, a venv or a scratch file in the checkout changes the tree checks' verdict"),
    Mutant("door-closed-stdout-traceback", "door", "rule", "picospec_cli/__init__.py",
           "    if sys.stdout is None or sys.stderr is None:", "    if False:",
           ("tests/cli/test_picospec_cli.py::"
            "test_a_standard_output_closed_from_the_start_is_one_line",),
           "`python main.py >&-`: an AttributeError traceback from the error guard itself"),
    Mutant("batch-file-keeps-bom", "run", "rule", "picospec_app/plan.py",
           'open(path, encoding="utf-8-sig", newline=newline)',
           'open(path, encoding="utf-8", newline=newline)',
           ("tests/cli/test_main.py::test_batch_file_with_a_byte_order_mark",),
           "a --batch file with a byte-order mark keeps U+FEFF in prompt 1, silently"),
    # --- the edges: the training commands' inputs and a diverging run
    Mutant("train-nan-loss-unchecked", "training", "rule", "gpt2/train/gpt2.py",
           "if not math.isfinite(loss):", "if False:",
           ("tests/cli/test_gpt2_train.py::"
            "test_a_diverging_run_stops_with_one_line_and_writes_no_model",),
           "a run whose loss turns NaN trains on and writes a model of NaN weights"),
    Mutant("train-nan-weights-checkpointed", "training", "rule", "gpt2/train/gpt2.py",
           "if not finite(params):", "if False:",
           ("tests/cli/test_gpt2_train.py::"
            "test_a_diverging_run_stops_with_one_line_and_writes_no_model",),
           "weights that overflowed at the first update are checkpointed and saved, exit 0"),
    Mutant("train-data-of-another-tokenizer", "training", "rule", "gpt2/train/gpt2.py",
           "if made_with != theirs:", "if False:",
           ("tests/cli/test_gpt2_train.py::"
            "test_a_bad_command_line_is_one_line_and_leaves_nothing",),
           "heads trained on token files of another tokenizer than the backbone's"),
    Mutant("corpus-empty-split-written", "training", "rule", "gpt2/train/corpus.py",
           "if empty := [name for name, files in splits.items() if not files]:", "if empty := []:",
           ("tests/gpt2/train/test_bpe_corpus_cli.py::"
            "test_corpus_of_too_few_files_for_three_splits_is_refused",),
           "a corpus of 4 files writes empty val.bin and heldout.bin, exit 0"),
    # --- the edges: the grader's runner and its command
    Mutant("runner-unreadable-file-ended-early", "graders", "rule",
           "picospec/exercises/runner.py",
           'and "printed" not in result and "why" not in result:', 'and "printed" not in result:',
           ("tests/picospec/exercises/test_runner.py::"
            "test_a_file_that_cannot_be_read_is_named_once",),
           "an answer file with a syntax error also gets a false note: the grading process ended"),
    Mutant("replace-file-takes-path-tmp", "door", "rule", "picospec_cli/__init__.py",
           'fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")',
           'tmp = f"{path}.tmp"; fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)',
           ("tests/picospec/test_rest.py::test_save_touches_no_other_file",),
           "saving the REST datastore overwrites the user's PATH.tmp"),
    Mutant("sequoia-acceptance-sum-after-loading", "door", "rule", "picospec/methods.py",
           "if sum(a) > 1 + 1e-6 else None", "if False else None",
           ("tests/cli/test_picospec_cli.py::test_main_refuses_bad_command_lines",),
           "--acceptance 0.6,0.6 is refused only after the models load"),
    Mutant("cache-rest-folder-unchecked", "door", "rule", "picospec_app/plan.py",
           'check_cache_dir("rest")', "check_cache_dir()",
           ("tests/cli/test_picospec_cli.py::"
            "test_a_cache_folder_that_is_a_file_is_refused_before_work",),
           "a file named rest in the cache is found only after the datastore is built"),
    Mutant("stdin-prompt-not-utf8-late", "door", "rule", "picospec_app/plan.py",
           "try:  # standard input's bytes that were not UTF-8 arrive as lone surrogates\n"
           '        text.encode("utf-8")', "try:\n        pass",
           ("tests/cli/test_picospec_cli.py::"
            "test_a_prompt_on_standard_input_that_is_not_utf8_is_one_line_before_loading",),
           "a non-UTF-8 prompt piped in fails after loading with the codec's message"),
    Mutant("power-ignores-contract", "checker", "rule", "picospec/check/__main__.py",
           'SAMPLER_ONLY = ("contract", "seed"', 'SAMPLER_ONLY = ("seed"',
           ("tests/picospec/test_check.py::test_usage_errors_are_one_line",),
           "--power --contract tree prints the one power table as if it measured the tree check"),
    Mutant("build-datastore-alone-ignored", "door", "rule", "picospec_app/load.py",
           "        if build:", "        if False:",
           ("tests/cli/test_picospec_cli.py::test_main_refuses_bad_command_lines",),
           "--build_datastore without --datastore is taken and does nothing"),
    Mutant("skip-twice-taken", "door", "rule", "picospec/options.py",
           "if keys[i] in keys[:i]", "if keys[i] in keys[:i] and False",
           ("tests/cli/test_main_mistakes.py::test_mistakes_end_in_one_true_line",),
           "--skip a1,a1 runs as if a1 were named once, without a word"),
    Mutant("grade-csv-without-notes", "graders", "record", "picospec/exercises/__main__.py",
           '                             "; ".join(notes)])', '                             ""])',
           ("tests/picospec/test_exercises.py::test_grade_a_folder_as_json_and_csv",),
           "a class's CSV says a file was not graded and never why"),
    Mutant("iterator-answer-compared", "graders", "rule", "picospec/exercises/grading.py",
           "if isinstance(yours, Iterator) or inspect.isawaitable(yours):",
           "if False:", ("tests/picospec/test_exercises.py::"
                         "test_a_wrong_answer_fails_where_expected",),
           "an answer that yields the right values (a generator, not the tuple asked) passes"),
    Mutant("async-sampler-run", "checker", "rule", "picospec/check/battery.py",
           "if test(fn):  # a call", "if False:  # a call",
           ("tests/picospec/test_check.py::test_usage_errors_are_one_line",),
           "an async or generator sampler runs every case into the same contract error"),
    Mutant("no-color-ignored", "report", "rule", "picospec_app/plan.py",
           "color=sys.stdout.isatty() and settings.color,", "color=sys.stdout.isatty(),",
           ("tests/cli/test_main_mistakes.py::"
            "test_the_text_is_coloured_on_a_terminal_unless_no_color",),
           "NO_COLOR set, the text still comes in ANSI colors"),
    Mutant("dumb-terminal-coloured", "report", "rule", "picospec_app/settings.py",
           'and environ.get("TERM") != "dumb"', "",
           ("tests/app/test_settings.py::test_each_variable_by_hand",),
           "a dumb terminal (TERM=dumb) shows the escape codes as text"),
    Mutant("runner-sys-exit-escapes", "graders", "rule", "picospec/exercises/runner.py",
           "except BaseException as e:  # sys.exit or Ctrl-C", "except Exception as e:  # ",
           ("tests/picospec/exercises/test_runner.py::"
            "test_sys_exit_in_a_function_is_its_failure",),
           "an answer's sys.exit inside the graded function ends the grading unreported"),
    Mutant("runner-own-answer-passes", "graders", "rule", "picospec/exercises/runner.py",
           "if (own := uses_own(name, namespace)) is not None:", "if (own := None) is not None:",
           ("tests/picospec/test_exercises.py::"
            "test_the_projects_own_answers_are_flagged_not_passed",),
           "an answer that imports picospec's own function passes"),
    Mutant("grade-file-missing-counts-as-pass", "graders", "rule",
           "picospec/exercises/__main__.py",
           'passed = sum(mark == "pass" for mark, _, _ in out.values())',
           'passed = sum(mark != "FAIL" for mark, _, _ in out.values())',
           ("tests/picospec/test_exercises.py::"
            "test_a_partial_file_fails_naming_what_is_missing",),
           "a file answering 1 of 12 exercises is 'all pass', exit 0"),
    Mutant("grade-folder-unanswered-counts-as-pass", "graders", "rule",
           "picospec/exercises/__main__.py",
           'failing = sum(any(mark != "pass" for', 'failing = sum(any(mark == "FAIL" for',
           ("tests/picospec/test_exercises.py::test_grade_a_folder_one_row_per_learner",),
           "a class's summary counts a learner who answered 1 of 12 as passing every exercise"),
    Mutant("grade-stub-marked-fail", "graders", "rule", "picospec/exercises/__main__.py",
           'else "FAIL" if got.get("answered", True) else "-"', 'else "FAIL"',
           ("tests/picospec/test_exercises.py::test_grade_a_folder_one_row_per_learner",),
           "a class table marks a stub that still raises NotImplementedError as FAIL, not '-'"),
    Mutant("handout-overwrites-the-teachers-notebook", "graders", "rule",
           "picospec/exercises/__main__.py",
           "if Path(out).exists() and Path(out).resolve() == Path(notebook).resolve():",
           "if False:",
           ("tests/picospec/test_exercises.py::test_usage_errors_are_one_line_exit_2",),
           "handout T.ipynb --out T.ipynb overwrites the teacher's answers with stubs"),
    Mutant("grader-inputs-not-checked", "graders", "rule", "picospec/exercises/grading.py",
           "if part is None and (changed := changed_input(args, before)) is not None:",
           "if part is None and (changed := None) is not None:",
           ("tests/picospec/test_exercises.py",),
           "an answer computed in place (changing q or p) passes"),
    Mutant("grader-residual-support-tolerance", "graders", "rule", "picospec/exercises/residual.py",
           "if np.any(np.asarray(yours, dtype=float)[np.asarray(expected) == 0] != 0):",
           "if np.any(np.asarray(yours, dtype=float)[np.asarray(expected) == 0] > 1e-9):",
           ("tests/picospec/test_exercises.py",),
           "residual + 1e-12 passes: a token the target forbids gets mass"),
    Mutant("grader-rng-not-checked", "graders", "rule", "picospec/exercises/grading.py",
           "    if uncertain is not None and (i := outside_rng(fn, uncertain)) is not None:",
           "    if uncertain is not None and (i := None) is not None:",
           ("tests/picospec/test_exercises.py",),
           "uniforms from Python's random or NumPy's global generator pass"),
    Mutant("grader-no-large-ids", "graders", "rule", "picospec/exercises/longest_suffix.py",
           "    out += [([11, 2], [1, 2], 2),", "    out += [([1, 2], [1, 2], 2),",
           ("tests/picospec/test_exercises.py",),
           "longest suffix by string containment passes (ids never multi-digit)"),
    Mutant("grader-return-not-checked", "graders", "rule", "picospec/exercises/grading.py",
           "    if ok:\n        return None\n", "    if True:\n        return None\n",
           ("tests/picospec/test_exercises.py::"
            "test_a_law_graded_answer_returning_the_wrong_thing_is_told_so",),
           "an answer returning None or a string is blamed on its arguments, not on what it "
           "returns"),
    Mutant("grader-known-mistake-never-named", "graders", "record",
           "picospec/exercises/grading.py",
           "            if not np.array_equal(yours[i], sequences(wrong, i, case)):",
           "            if yours[i] is not sequences(wrong, i, case):",
           ("tests/picospec/test_exercises.py::"
            "test_a_law_failure_names_the_known_mistake_it_behaves_as",),
           "a law failure that is a known mistake is not named as one"),
    Mutant("shape-lint-any-brackets", "tree checks", "rule", "tests/test_architecture.py",
           'SHAPE_NOTE = re.compile(rf"#.*(\\[\\s*{DIM}(?:\\s*,\\s*{DIM})*\\s*\\]|\\bscalar\\b)")',
           'SHAPE_NOTE = re.compile(r"#.*(\\[.*\\]|\\bscalar\\b|\\bshape)")',
           ("tests/test_architecture.py::test_an_array_line_without_its_shape_is_caught",),
           "the shape lint accepts any words in brackets, or the word shape, as a shape"),
    # --- the graders and the checker: calls watched, students' mistakes, the command line
    Mutant("grader-law-inputs-not-checked", "graders", "rule", "picospec/exercises/grading.py",
           "return out, changed_input(args, inputs[:len(args)], names) or problem",
           "return out, problem",
           ("tests/picospec/exercises/test_grading.py::test_what_a_sampled_law_cannot_show_is_caught_call_by_call",),
           "a law-graded answer that writes into Q or P passes (it is right in law)"),
    Mutant("grader-chain-certain-keep-unchecked", "graders", "rule",
           "picospec/exercises/verify_chain.py",
           "    if n < K and Q[n][drafts[n]] >= P[n][drafts[n]]:",
           "    if False and Q[n][drafts[n]] >= P[n][drafts[n]]:",
           ("tests/picospec/exercises/test_grading.py::test_the_chain_rules_by_hand",),
           "a draft that min(1, q/p) = 1 keeps may be rejected (the bonus token forgotten)"),
    Mutant("grader-chain-residual-support-unchecked", "graders", "rule",
           "picospec/exercises/verify_chain.py",
           "    if n < K and Q[n][x] <= P[n][x]:", "    if False and Q[n][x] <= P[n][x]:",
           ("tests/picospec/exercises/test_grading.py::test_the_first_call_that_breaks_a_rule_is_written_out",),
           "a replacement token the residual forbids passes its call's check"),
    Mutant("grader-tree-certain-keep-unchecked", "graders", "rule",
           "picospec/exercises/verify_without_replacement.py",
           "            if q[t] >= p[t]:", "            if False:",
           ("tests/picospec/exercises/test_grading.py::test_what_a_sampled_law_cannot_show_is_caught_call_by_call",),
           "a tree walk stopped a level early passes (its children never tried)"),
    Mutant("grader-support-cases-first", "graders", "record", "picospec/exercises/grading.py",
           "for i, case in sorted(cases, key=lambda ic: ic[1].support):",
           "for i, case in sorted(cases, key=lambda ic: not ic[1].support):",
           ("tests/picospec/exercises/test_grading.py::test_five_sampler_bugs_get_five_lines_and_their_names",),
           "an inverted ratio is reported as ties are, at the all-zero case"),
    Mutant("grader-recording-changes-draws", "graders", "record", "picospec/exercises/grading.py",
           "rng = recording(type(args[rng_at]))(args[rng_at].bit_generator)",
           "rng = recording(type(args[rng_at]))(np.random.PCG64(0))",
           ("tests/picospec/exercises/test_grading.py::test_the_first_call_that_breaks_a_rule_is_written_out",),
           "the watched calls draw other uniforms than the learner's rng would"),
    Mutant("grader-mistake-named-on-one-case", "graders", "record",
           "picospec/exercises/grading.py",
           "        for i, case in cases_of(contract) if battery is None else battery.cases:",
           "        for i, case in (cases_of(contract) if battery is None else battery.cases)[:1]:",
           ("tests/picospec/exercises/test_grading.py::test_five_sampler_bugs_get_five_lines_and_their_names",),
           "ties toward the draft named as the inverted ratio (alike at all-zero uniforms)"),
    Mutant("grader-float32-accepted-as-values", "graders", "record",
           "picospec/exercises/grading.py", "yours.dtype.itemsize < right.itemsize",
           "yours.dtype.itemsize < 0",
           ("tests/picospec/exercises/test_grading.py::test_a_wrong_kind_of_value_or_a_changed_input_is_named",),
           "a float32 answer told only that its values differ"),
    Mutant("grader-int-mask-passes", "graders", "rule", "picospec/exercises/grading.py",
           '    if right.kind == "b" and yours.dtype.kind != "b":', "    if False:",
           ("tests/picospec/exercises/test_grading.py::test_a_wrong_kind_of_value_or_a_changed_input_is_named",),
           "a 0/1 integer attention mask passes as a boolean one"),
    Mutant("grader-prompt-lookup-on-copies", "graders", "rule",
           "picospec/exercises/find_candidates.py",
           "    return grade_cases(NAME, fn, reference, cases(), compare,",
           "    return grade_cases(NAME, lambda x, n, k: fn(list(x), n, k), reference, cases(), "
           "compare,",
           ("tests/picospec/exercises/test_grading.py::test_a_wrong_kind_of_value_or_a_changed_input_is_named",),
           "a prompt lookup that cuts the caller's token list passes"),
    Mutant("grader-no-text-search-case", "graders", "rule", "picospec/exercises/find_candidates.py",
           "([2, 9, 11, 2, 7, 1, 2], 2, 1), ", "",
           ("tests/picospec/exercises/test_grading.py::test_text_search_for_an_ngram_fails_on_multi_digit_ids",),
           "prompt lookup by text search passes (1 2 found inside 11 2)"),
    Mutant("checker-near-one-is-one-half", "checker", "rule", "picospec/check/drivers.py",
           "        top = np.nextafter(one, 0 * one)", "        top = one / 2",
           ("tests/picospec/test_check.py::"
            "test_the_near_one_case_hands_the_sampler_the_largest_uniforms_below_one",),
           "the near-one support case hands out 0.5, not the largest uniform below 1"),
    Mutant("checker-signature-unchecked", "checker", "rule", "picospec/check/__main__.py",
           'if problem := signature_problem(fn, values["contract"]):', "if problem := None:",
           ("tests/picospec/test_check.py::test_usage_errors_are_one_line",),
           "a sampler of the wrong signature runs every case to an error, exit 1"),
    Mutant("checker-prints-on-stdout", "checker", "rule", "picospec/check/__main__.py",
           "with contextlib.redirect_stdout(sys.stderr):", "with contextlib.nullcontext():",
           ("tests/picospec/test_check.py::test_what_a_sampler_prints_goes_to_standard_error",),
           "a sampler's prints land in --json's output"),
    Mutant("checker-half-a-token-accepted", "checker", "rule", "picospec/check/drivers.py",
           "    if n != v:", "    if False:",
           ("tests/picospec/test_check.py::test_a_broken_contract_fails_its_case_with_a_reason",),
           "n_accepted = 0.5 is read as 0, silently"),
    Mutant("grader-list-for-array", "graders", "rule", "picospec/exercises/grading.py",
           "if isinstance(expected, np.ndarray) and expected.ndim and not isinstance(yours, "
           "np.ndarray):", "if False:",
           ("tests/picospec/exercises/test_grading.py::test_a_wrong_kind_of_value_or_a_changed_input_is_named",),
           "a residual or a mask returned as a Python list passes"),
    Mutant("grader-no-wide-logits", "graders", "rule", "picospec/exercises/draft_law.py",
           "        z[..., 0] -= self.gap", "        pass",
           ("tests/picospec/exercises/test_draft_law.py",),
           "a softmax that subtracts each row's min passes (no row spans more than exp takes)"),
    Mutant("grader-bool-for-int", "graders", "rule", "picospec/exercises/longest_suffix.py",
           "isinstance(yours, (bool, np.bool_)) or ", "",
           ("tests/picospec/exercises/test_grading.py::test_a_wrong_kind_of_value_or_a_changed_input_is_named",),
           "a longest suffix of True for 1 passes"),
    Mutant("checker-negative-token-is-padding", "checker", "rule", "picospec/check/drivers.py",
           "    if not 0 <= token < V:", "    if not token < V:",
           ("tests/picospec/test_check.py",),
           "a sampler returning next_token -1 after K accepted drafts passes (the bonus skipped)"),
    Mutant("checker-inputs-changed-unseen", "checker", "rule", "picospec/check/drivers.py",
           '        unchanged(before, (d, p, q), ("drafts", "P", "Q"))', "        pass",
           ("tests/picospec/test_check.py",),
           "a sampler that overwrites the caller's target laws passes"),
    Mutant("checker-untested-said-pass", "checker", "rule", "picospec/check/battery.py",
           "if not forbidden and not extreme.draws:", "if False:",
           ("tests/picospec/test_check.py",),
           "a support case its sampler never drew a uniform in reads pass"),
    Mutant("grader-untested-fails", "graders", "rule", "picospec/exercises/grading.py",
           "        if bad.verdict in FAILED:", '        if bad.verdict != "pass":',
           ("tests/picospec/exercises/test_grading.py",),
           "a right answer drawing no uniform in a support case fails"),
    Mutant("medusa-typical-cold-lossy", "medusa", "rule", "picospec/methods.py",
           '    if temperature == 0 and posterior != "lossless":',
           '    if posterior == "auto" and temperature == 0:', ("tests/picospec/test_medusa.py",),
           "--posterior typical at temperature 0 reports lossy where it decodes greedily"),
    Mutant("medusa-topk-unchecked", "medusa", "rule", "picospec/methods.py",
           "    if rank >= topk:  # a head offers", "    if False:  # a head offers",
           ("tests/picospec/test_medusa.py",),
           "a tree beyond --topk fails in the run, naming neither --tree nor --topk"),
    Mutant("skip-layer-unnamed", "settings", "rule", "picospec_app/load.py",
           """raise ValueError(f"--skip {options['skip']}: {e}") from None""", "raise",
           ("tests/cli/test_picospec_cli.py",), "--skip a9 on 6 layers does not name --skip"),
    Mutant("out-of-memory-traceback", "settings", "rule", "picospec_cli/__init__.py",
           "    except MemoryError:", "    except ZeroDivisionError:",
           ("tests/cli/test_picospec_cli.py::test_out_of_memory_is_one_line",),
           "a MemoryError ends a command in a traceback"),
    Mutant("runner-kill-child-only", "graders", "rule", "picospec/exercises/runner.py",
           "        os.killpg(process.pid, signal.SIGKILL)", "        process.kill()",
           ("tests/picospec/exercises/test_runner_interrupted.py",),
           "a stopped grader leaves what the answer started running"),
    Mutant("runner-output-read-at-end", "graders", "rule", "picospec/exercises/runner.py",
           "        reader.start()\n", "",
           ("tests/picospec/exercises/test_runner.py::"
            "test_output_past_print_neither_blocks_nor_floods",),
           "200 kB past print blocks the answer until the time limit"),
    Mutant("weights-shape-wraps", "cache", "rule", "gpt2/weights.py",
           'count = math.prod(info["shape"])',
           'count = int(np.prod(info["shape"], dtype=np.int64))',
           ("tests/gpt2/test_weights.py",),
           "a safetensors shape of 2^40 x 2^40 wraps to 0 elements in int64"),
    Mutant("hub-dangling-link-remote", "settings", "rule", "gpt2/hub.py",
           "or Path(name).exists() or Path(name).is_symlink())", "or Path(name).exists())",
           ("tests/gpt2/test_hub.py",),
           "--target LINK to nowhere is looked up as a model name"),
    Mutant("g-test-uncorrected", "checker", "rule", "picospec/check/exact_law.py",
           "G / williams(expected)", "G",
           ("tests/picospec/check/test_exact_law_small_cells.py",),
           "a right sampler rejected at 1.4 to 1.8 times alpha among cells expected 5 to 20 times"),
    Mutant("tv90-spread-only", "checker", "rule", "picospec/check/battery.py",
           'detectable_tv(probs, samples, "anywhere")', "detectable_tv(probs, samples)",
           ("tests/picospec/check/test_exact_law_tv90.py",),
           "tv90 claims errors inside the pooled rare sequences it cannot see"),
    Mutant("bpe-replaces-a-models-tokenizer", "training", "rule", "gpt2/train/bpe.py",
           'if (Path(out) / "model.safetensors").exists() and held and not overwrite:',
           "if False:", ("tests/gpt2/train/test_bpe_corpus_cli.py",),
           "a new vocabulary written over a trained model's tokenizer"),
    Mutant("exit-adapter-not-put-back", "training", "rule", "gpt2/train/self_draft.py",
           "os.replace(old, place)\n", "pass\n",
           ("tests/gpt2/train/test_self_draft.py::test_an_adapter_is_installed_whole_or_not_at_all",),
           "Ctrl-C between the install's two renames leaves the target without an exit adapter"),
)


def problems(mutants=MUTANTS, root=ROOT):
    """What is wrong with the list itself, one line each: old text missing or not unique, unknown
    files or kinds."""
    found, names = [], set()
    for m in mutants:
        if m.name in names:
            found.append(f"{m.name}: listed twice")
        names.add(m.name)
        if m.kind not in KINDS:
            found.append(f"{m.name}: kind {m.kind!r} is not one of {KINDS}")
        if m.old == m.new:
            found.append(f"{m.name}: new text equals old text")
        path = root / m.file
        if not path.is_file():
            found.append(f"{m.name}: no file {m.file}")
            continue
        count = path.read_text(encoding="utf-8").count(m.old)
        if count != 1:
            found.append(f"{m.name}: its text occurs {count} times in {m.file} (must be exactly "
                         f"once): {m.old!r}")
        found += [f"{m.name}: no test file {t}" for t in m.tests
                  if not (root / t.split("::")[0]).is_file()]
    return found


def copy_checkout(dest):
    """The working tree (tracked and untracked files alike) without .git and caches."""
    shutil.copytree(ROOT, dest,
                    ignore=shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache",
                                                              ".ipynb_checkpoints", "*.pyc"))
    return dest


FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.M)


def pytest(copy, args, timeout):
    """pytest in the copy, no cache, no bytecode written -> the finished process (TimeoutExpired
    past timeout)."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                          cwd=copy, env=env, capture_output=True, text=True, timeout=timeout)


def run_mutant(m, copy, timeout):
    """Plant m in the copy, run its tests with -x, put the file back -> (status, the test that
    caught it, seconds)."""
    path = copy / m.file
    original = path.read_text(encoding="utf-8")
    if original.count(m.old) != 1:
        return "error", f"text occurs {original.count(m.old)} times in {m.file}", 0.0
    path.write_text(original.replace(m.old, m.new), encoding="utf-8")
    start = time.perf_counter()
    try:
        for tests in m.tests:  # until one fails
            done = pytest(copy, ["-x", tests], max(1, timeout - (time.perf_counter() - start)))
            if done.returncode != 0:
                break
    except subprocess.TimeoutExpired:
        return "timeout", f"no verdict in {timeout} s", time.perf_counter() - start
    finally:
        path.write_text(original, encoding="utf-8")
    seconds = time.perf_counter() - start
    if done.returncode == 0:
        return "missed", "", seconds
    if done.returncode == 1:
        hit = FAILED.search(done.stdout)
        return "caught", hit.group(1) if hit else "(a failing test)", seconds
    tail = (done.stdout
            + done.stderr).strip().splitlines()[-1:] or [f"pytest exit {done.returncode}"]
    return "caught", f"collection/usage error: {tail[0][:100]}", seconds


def confirm(results, copy, timeout):
    """Run every test that caught a mutant once more, together, on the unmutated copy: one that
    fails there too caught nothing (the tree is broken, or the test is) and its mutant becomes an
    error. -> the tests that failed."""
    nodes = sorted({where for _, status, where,
                    _ in results if status == "caught" and "::" in where})
    if not nodes:
        return set()
    try:
        done = pytest(copy, nodes, timeout * 2)
    except subprocess.TimeoutExpired:
        return set(nodes)
    return set(FAILED.findall(done.stdout)) if done.returncode else set()


def main(only=None, timeout=300, list=False, out=None):
    """Run the curated mutants (or those named by --only) and print caught / missed; exit 1 if any
    is not caught."""
    chosen = [m for m in MUTANTS if not only or m.name in only]
    unknown = sorted(set(only or ()) - {m.name for m in MUTANTS})
    if unknown:
        raise ValueError(f"unknown mutant {', '.join(unknown)}: see python -m tests.suite.mutants "
                         f"--list")
    width = max(len(m.name) for m in chosen)
    if list:
        for m in chosen:
            print(f"{m.name:<{width}}  {m.area:<14} {m.kind:<6} {m.file}: {m.why}")
        return
    from tools.page import page_of_output

    with page_of_output(out, threads="one pytest run at a time, BLAS as each test sets it",
                        fenced=True):
        bad = {line.split(":")[0] for line in problems(chosen)}
        results, start, cpu = [], time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        with tempfile.TemporaryDirectory(prefix="picospec-mutants-") as tmp:
            copy = copy_checkout(Path(tmp) / "checkout")
            for m in chosen:
                status, where, seconds = ("error", "; ".join(problems([m])), 0.0) if m.name in bad \
                    else run_mutant(m, copy, timeout)
                results.append((m, status, where, seconds))
                print(f"{status:<7} {m.name:<{width}}  {where or '-'}  {seconds:.1f} s", flush=True)
            # the verdicts hold only if each catching test passes without its mutant
            broken = confirm(results, copy, timeout)
        for i, (m, status, where, seconds) in enumerate(results):
            if status == "caught" and where in broken:
                results[i] = (m, "error", f"{where} fails without the mutant too", seconds)
                print(f"error   {m.name:<{width}}  {where} fails without the mutant too: fix "
                      f"the tree or the test first")
        statuses = [status for _, status, _, _ in results]
        caught, used = statuses.count("caught"), resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime
        print(f"\n{caught}/{len(statuses)} caught in {time.perf_counter() - start:.0f} s "
              f"({cpu:.0f} s of CPU); each catching test passes without its mutant"
              + "".join(f", {statuses.count(s)} {s}" for s in ("missed", "timeout", "error")
                        if statuses.count(s)))
    if caught < len(statuses):  # after the page is written: a missed mutant is a result too
        sys.exit(1)


if __name__ == "__main__":
    from picospec_cli import Option, command

    command(main,
            [Option("only", "strs", None, "run only these mutants (names as --list prints them)"),
                   Option("timeout", int, 300,
                          "seconds one mutant's tests may run before it counts as a timeout",
                          low=1),
                   Option("list", bool, False, "print the list and run nothing"),
                   Option("out", "out", None, "also write the results page here "
                          "(docs/results/mutants.md)")])
