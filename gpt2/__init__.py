"""GPT-2 in NumPy: model.py the forward, engine.py the model contract on a KV cache, fast/ the
performance variants (docs/architecture.md). Knows nothing of speculation."""
