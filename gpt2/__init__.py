"""The model: GPT-2 in NumPy. model.py is the forward, written once; engine.py the model contract
over a KV cache of B >= 1 rows; fast/ the performance variants, kept apart. Knows nothing of
speculation. The layers and their directions: docs/architecture.md."""
