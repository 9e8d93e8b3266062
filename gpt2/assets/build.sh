#!/usr/bin/env bash
# How the built-in models in this folder were made (the exact commands, run from the repository root, with Python
# 3.11.7's standard library as the corpus). Every training runs with --device gpu (CuPy; they ran on one H100);
# the same commands without --device gpu give the same models on the CPU up to float
# rounding (tests/gpt2/train/test_heads_gpu.py), in hours instead of minutes. The measuring (the sparse tree, bench.eagle's
# record, the self-drafting search, the card) ran on the 2-core CPU machine, because its choices are cost models of
# that CPU. An earlier pair (trained on 2 CPU cores, 1.7 passes over the data; card val loss 3.74) is in git
# history.
set -euo pipefail
DATA=${DATA:-data}
python -m gpt2.train.bpe --out gpt2/assets/tiny-target --vocab_size 4096 --overwrite  # ~1 min; copied to tiny-draft
python -m gpt2.train.corpus --tokenizer gpt2/assets/tiny-target --out "$DATA"       # train/val/heldout.bin + meta.json
# Eight passes over the 3.16M-token train split for both models (batch 64 x 1542 steps of 256 tokens), the three runs
# side by side on the GPU (with the draft at --lr 2.5e-3 as a third): 3.2 min for the target, 1.5 for the draft. The draft's rate was picked from two runs
# (2.5e-3: val loss 3.618; 4e-3: 3.484, shipped) by that loss and by speculative sampling's alpha against the new
# target (bench.harness: 0.705 against 0.666 at T = 0; the old draft's 0.570).
G="python -m gpt2.train.gpt2 --data $DATA --device gpu --n_ctx 256 --warmup 40 --max_steps 1542 --eval_every 193 --batch_size 64"
$G --out runs/tiny-target --n_layer 6 --n_embd 256 --n_head 4 --lr 2e-3 &
$G --out runs/tiny-draft --n_layer 2 --n_embd 128 --n_head 2 --lr 4e-3 &
wait
python -m gpt2.train.ngram --data "$DATA" --out gpt2/assets/ngram.safetensors --order 3 --min_count 2
for m in tiny-target tiny-draft; do
    cp runs/$m/config.json runs/$m/model.safetensors runs/$m/train_log.json gpt2/assets/$m/
    cp gpt2/assets/tiny-target/vocab.json gpt2/assets/tiny-target/merges.txt gpt2/assets/$m/ 2>/dev/null || true
done
# Heads on tiny-target, on self-distillation data: 1.6M tokens the target wrote greedily after training-text prompts.
# Medusa: 4 heads trained (MEDUSA-1), the first 2 shipped (4 would take gpt2/assets past its 32 MB budget).
# Blockwise: 3 tied ReLU heads on the same tokens. On the GPU: 4.2 min for both (most of it the data).
# (The recipe of the CPU-trained target, 0.8M tokens and 600 / 300 steps, gave heads 0.08-0.10 less accurate on this
# target: head 1 top-1 0.388 Medusa, 0.286 Blockwise, against 0.467 and 0.383 for these.)
python -m gpt2.train.heads --device gpu --data "$DATA" --out runs/medusa-long --n_heads 4 --batch_size 16 \
    --max_steps 2400 --distill_tokens 1600000 --distill_temperature 0
python -m gpt2.train.heads --device gpu --data "$DATA" --out runs/blockwise-long --n_heads 3 --tied --act relu \
    --batch_size 16 --max_steps 1200 --distill_data runs/medusa-long/distill.bin
mkdir -p gpt2/assets/tiny-target/medusa gpt2/assets/tiny-target/blockwise
python -m gpt2.heads --src runs/medusa-long --dst gpt2/assets/tiny-target/medusa --n 2
cp runs/blockwise-long/heads.json runs/blockwise-long/heads.safetensors gpt2/assets/tiny-target/blockwise/
python -m bench.trees --build gpt2/assets/tiny-target/medusa --budgets 7  # the sparse tree
# EAGLE head on tiny-target: 0.96M tokens the target wrote greedily after training-text prompts (7500 rows of 16 +
# 112), 3000 steps of 8 rows; 4.9 min on the GPU beside the heads' run (the CPU recipe, 0.32M tokens and 1000 steps,
# gave step-1 top-1 0.63 on this target against 0.80 for this one). bench.eagle writes the measured acceptance into
# eagle.json (the card reads it).
python -m gpt2.train.eagle --device gpu --data "$DATA" --out runs/eagle-long --distill_tokens 960000 \
    --distill_temperature 0 --batch_size 8 --max_steps 3000 --eval_every 100
mkdir -p gpt2/assets/tiny-target/eagle
cp runs/eagle-long/eagle.json runs/eagle-long/eagle.safetensors gpt2/assets/tiny-target/eagle/
# EAGLE-3 head on tiny-target, on the 2-core CPU machine: 0.96M tokens the target wrote greedily (EAGLE's recipe),
# 3 steps of training-time test, 3000 steps of 8 rows. A first run with the default draft vocabulary (a quarter of
# the tokens, 1024; 18 min for the rows, 9.5 for their features, 23 for training) held only 82% of the target's
# greedy tokens on held-out text in its vocabulary (top-1 0.73 at step 1); the shipped head, on the same rows, drafts
# over 2048 tokens.
python -m gpt2.train.eagle3 --data "$DATA" --out runs/eagle3-1024 --distill_tokens 960000 --distill_temperature 0 \
    --batch_size 8 --max_steps 3000 --test_steps 3 --eval_every 100 --max_minutes 65
python -m gpt2.train.eagle3 --data "$DATA" --out runs/eagle3 --distill_data runs/eagle3-1024/distill.bin \
    --draft_vocab 2048 --batch_size 8 --max_steps 3000 --test_steps 3 --eval_every 100 --max_minutes 35
mkdir -p gpt2/assets/tiny-target/eagle3
cp runs/eagle3/eagle3.json runs/eagle3/eagle3.safetensors gpt2/assets/tiny-target/eagle3/
# EAGLE's, EAGLE-2's and EAGLE-3's rows, into eagle.json and eagle3.json (the card reads them)
python -m bench.eagle --record gpt2/assets/tiny-target/eagle --out runs/eagle-long/bench.md
# Self-drafting, on the 2-core CPU machine: every skip set of tiny-target scored on held-out
# prompts (286 CPU s; self_draft.json: the set, K and threshold this machine's cost model picked, and the landscape),
# then exit adapters for layers 1-4 trained (400 steps each, ~4 CPU min) and the best exit shipped in early_exit/.
OPENBLAS_NUM_THREADS=1 python -m gpt2.train.self_draft --task search
OPENBLAS_NUM_THREADS=1 python -m gpt2.train.self_draft --task exits --exit_layers 1,2,3,4
# Sequoia's acceptance vectors of tiny-draft for tiny-target (greedy and sampled, 8 calibration prompts x 64
# tokens; sequoia.json, the default of --acceptance), measured beside the token-tree tables on the 2-core CPU.
python -m bench.token_trees --record gpt2/assets/tiny-target
python -m gpt2.train.card --data "$DATA"
