"""Turn a model name into a model: built-in tiny models, the n-gram draft, GPT-2 sizes, Hugging Face ids, folders.

    load_model("tiny-target") -> (GPT2 engine, Encoder)      # the built-in pair: "tiny-target", "tiny-draft"
    load_model("ngram")       -> (NGram, Encoder)            # the built-in count-based draft
    load_model("gpt2-xl")     -> downloads once into the cache folder, then loads from there
"""
from pathlib import Path

ASSETS = Path(__file__).resolve().parent / "assets"
NGRAM = "ngram"


def load_model(name, device="cpu", offline=None):
    from gpt2.encoder import load_encoder

    if name == NGRAM:
        from gpt2.ngram import NGram

        path = ASSETS / "ngram.safetensors"
        if not path.exists():
            raise ValueError(f"the built-in n-gram draft {path} is missing from this checkout; "
                             "rebuild it with `python -m gpt2.ngram` (see README) or choose another --draft")
        return NGram.load(path), load_encoder(ASSETS / "tiny-target")  # the built-in models share one tokenizer

    from gpt2.engine import GPT2
    from gpt2.hub import resolve
    from gpt2.weights import load_checkpoint

    folder = resolve(name, offline=offline)
    hparams, params = load_checkpoint(folder)
    return GPT2(hparams, params, device=device), load_encoder(folder)
