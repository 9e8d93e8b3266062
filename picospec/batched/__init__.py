"""The serving forms: every method of the table for B prompts at once, ragged (each row accepts its own number of
tokens per step and leaves when done), each held to its single-sequence form row by row. One file per method, beside
the shared batched loops (loop.py) and the vLLM-contract rejection sampler (rejection.py)."""
