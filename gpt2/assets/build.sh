#!/usr/bin/env bash
# How the built-in models in this folder were made (the exact commands, run from the repository root on a
# 2-core CPU machine with Python 3.11.7's standard library as the corpus). The two trainings started at the same
# time, one BLAS thread each; the target was stopped at its step-400 checkpoint once the draft had finished and resumed
# (exactly: optimizer, data order and clock restored) with two BLAS threads and a longer schedule (--max_steps 1300).
# (In the recorded run the process was killed at step ~420 and resumed from its step-400 checkpoint: the same thing.)
# Then `python -m gpt2.card --data $DATA` measured everything in README.md.
set -euo pipefail
DATA=${DATA:-data}
python -m gpt2.bpe --out gpt2/assets/tiny-target --vocab_size 4096            # ~1 min; same files copied to tiny-draft
python -m gpt2.corpus --tokenizer gpt2/assets/tiny-target --out "$DATA"       # train/val/heldout.bin + meta.json
OPENBLAS_NUM_THREADS=1 python -m gpt2.train --data "$DATA" --out runs/tiny-target --n_layer 6 --n_embd 256 --n_head 4 \
    --n_ctx 256 --batch_size 16 --lr 1.5e-3 --warmup 80 --max_steps 1000 --max_minutes 52 --eval_every 100 \
    --stop_at 400 &
OPENBLAS_NUM_THREADS=1 python -m gpt2.train --data "$DATA" --out runs/tiny-draft --n_layer 2 --n_embd 128 --n_head 2 \
    --n_ctx 256 --batch_size 16 --lr 2e-3 --warmup 100 --max_steps 1000 --max_minutes 25 --eval_every 200
wait
python -m gpt2.train --data "$DATA" --out runs/tiny-target --n_layer 6 --n_embd 256 --n_head 4 --n_ctx 256 \
    --batch_size 16 --lr 1.5e-3 --warmup 80 --max_steps 1300 --max_minutes 65 --eval_every 100   # resumes at step 400
python -m gpt2.ngram --data "$DATA" --out gpt2/assets/ngram.safetensors --order 3 --min_count 2
for m in tiny-target tiny-draft; do
    cp runs/$m/config.json runs/$m/model.safetensors runs/$m/train_log.json gpt2/assets/$m/
    cp gpt2/assets/tiny-target/vocab.json gpt2/assets/tiny-target/merges.txt gpt2/assets/$m/ 2>/dev/null || true
done
# Heads on tiny-target, both on self-distillation data: 0.8M tokens the target wrote greedily after training-text
# prompts (15 min of data, then 15 min of MEDUSA-1 training on 2 CPU cores). Medusa: 4 heads trained, the first 2 shipped
# (4 would take gpt2/assets past 25 MB). Blockwise: 3 tied ReLU heads on the same tokens. (The heads shipped before them
# were trained on the text: the same commands without the --distill options; README compares both.)
python -m gpt2.train_heads --data "$DATA" --out runs/medusa1-distilled --n_heads 4 --batch_size 16 --max_steps 600 \
    --distill_tokens 800000 --distill_temperature 0
python -m gpt2.train_heads --data "$DATA" --out runs/blockwise --n_heads 3 --tied --act relu --batch_size 16 --max_steps 300 \
    --distill_data runs/medusa1-distilled/distill.bin   # the same 0.8M distilled tokens (10 min on 2 cores)
mkdir -p gpt2/assets/tiny-target/medusa gpt2/assets/tiny-target/blockwise
python -m gpt2.heads --src runs/medusa1-distilled --dst gpt2/assets/tiny-target/medusa --n 2
cp runs/blockwise/heads.json runs/blockwise/heads.safetensors gpt2/assets/tiny-target/blockwise/
python -m bench.trees --build gpt2/assets/tiny-target/medusa --budgets 7  # the sparse tree
# EAGLE head on tiny-target: 0.32M tokens the target wrote greedily after training-text prompts (2500 rows of 16 + 112;
# 23 min of data and 12 min of features on a 2-core machine shared with other jobs, load ~11), then 18 min of training
# with one BLAS thread; measured acceptance written into eagle.json by bench.eagle (the card reads it).
OPENBLAS_NUM_THREADS=1 python -m gpt2.train_eagle --data "$DATA" --out runs/eagle --distill_tokens 320000 \
    --distill_temperature 0 --batch_size 8 --max_steps 1000 --max_minutes 18 --eval_every 25
mkdir -p gpt2/assets/tiny-target/eagle
cp runs/eagle/eagle.json runs/eagle/eagle.safetensors gpt2/assets/tiny-target/eagle/
python -m bench.eagle --record gpt2/assets/tiny-target/eagle --out runs/eagle/bench.md
# Self-drafting (issue 16), 2-core machine shared with other jobs: every skip set of tiny-target scored on held-out
# prompts (286 CPU s; self_draft.json: the set, K and threshold this machine's cost model picked, and the landscape),
# then exit adapters for layers 1-4 trained (400 steps each, ~4 CPU min) and the best exit shipped in early_exit/.
OPENBLAS_NUM_THREADS=1 python -m bench.self_draft --task search
OPENBLAS_NUM_THREADS=1 python -m bench.self_draft --task exits --exit_layers 1,2,3,4
python -m gpt2.card --data "$DATA"
