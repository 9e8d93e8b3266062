"""GPT-2 in NumPy: model.py the forward, engine.py the model contract, fast/ the performance
variants (docs/architecture.md). Knows nothing of speculation."""
