"""The engine: GPT-2 in NumPy (model, KV cache, tokenizer, checkpoints, downloads, training). Knows nothing of speculation."""
