"""A model name -> (model, encoder):

    load_model("tiny-target") -> (GPT2, Encoder); "tiny-draft" is the other built-in
    load_model("ngram")       -> (NGram, Encoder): the built-in count-based draft
    load_model("gpt2-xl")     -> from the Hugging Face cache (gpt2/hub.py)
    load_model("./my-ckpt")   -> config.json, model.safetensors and a tokenizer there

and what a run loads beside its target: a draft on the target's tokenizer (load_draft), the
acceptance vectors measured beside the target (load_acceptance), heads (heads_folder).
"""
import json
from pathlib import Path

ASSETS = Path(__file__).resolve().parent / "assets"
NGRAM = "ngram"


def load_model(name, device="cpu", offline=False, **choices):
    """-> (model, encoder); choices: how the engine's forwards run (gpt2/engine.py's GPT2)."""
    from gpt2.encoder import load_encoder

    if name == NGRAM:
        from gpt2.ngram import NGram

        path = ASSETS / "ngram.safetensors"
        if not path.exists():
            raise ValueError(f"the built-in n-gram draft {path} is missing from gpt2/assets; "
                             "rebuild it with `python -m gpt2.train.ngram` (see README) or choose "
                             "another --draft")
        model, encoder = NGram.load(path), load_encoder(ASSETS / "tiny-target")  # the built-ins'
        model.tokenizer = model.tokenizer or encoder.fingerprint  # no record: counted with theirs
        model.folder = path
        return model, encoder

    from gpt2.engine import GPT2
    from gpt2.hub import resolve
    from gpt2.weights import load_checkpoint

    from gpt2.addons import check_kind

    folder = resolve(name, offline=offline)
    check_kind(folder, "model", f"model {name!r}", "--target or --draft")  # not a folder of heads
    hparams, params = load_checkpoint(folder)
    encoder = load_encoder(folder)
    check_vocabulary(folder, hparams["n_vocab"], encoder)
    model = GPT2(hparams, params, device=device, **choices)
    model.tokenizer, model.folder = encoder.fingerprint, folder  # for check_tokenizers
    return model, encoder


def load_draft(name, target, target_name, device="cpu", offline=None, role="draft"):
    """A draft model, built as the target's engine is, checked to share its tokenizer."""
    # the target's choices (threads asked, panels, static step) for every engine of the run
    asked = target.choices.keywords() if hasattr(target, "choices") else {}
    model = load_model(str(name), device, offline, **asked)[0]
    check_tokenizers(model, target, name, target_name, role)
    return model


def load_acceptance(target_name, draft, offline=None):
    """{"greedy": a, "sampled": a}: `draft`'s acceptance vectors from the target folder's
    sequoia.json (written by `python -m bench.token_trees --record`)."""
    from gpt2.hub import resolve

    path = resolve(str(target_name), offline=offline) / "sequoia.json"
    try:
        vectors = json.loads(path.read_text()).get(str(draft)) if path.exists() else None
    except (ValueError, AttributeError):
        raise ValueError(f"{path} is not a JSON object of acceptance vectors by draft: measure "
                         "them again with python -m bench.token_trees --record, or give "
                         "--acceptance a_1,a_2,..") from None
    if not vectors:
        raise ValueError(f"no acceptance vector of draft {draft!r} for target {target_name!r} was "
                         f"measured (sequoia.json in the target's folder): give --acceptance "
                         f"a_1,a_2,.., e.g. --acceptance 0.6,0.1,0.05")
    return vectors


def check_tokenizers(draft, target, draft_name, target_name, role="draft"):
    """ValueError unless draft and target share a tokenizer: equal sizes are not enough."""
    if draft.n_vocab != target.n_vocab:
        raise ValueError(f"{role} {draft_name!r} has {draft.n_vocab} tokens but target "
                         f"{target_name!r} has {target.n_vocab}: speculative decoding needs one "
                         "vocabulary; pick a matching pair")
    mine, theirs = getattr(draft, "tokenizer", None), getattr(target, "tokenizer", None)
    if mine is not None and theirs is not None and mine != theirs:
        where = getattr(draft, "folder", draft_name), getattr(target, "folder", target_name)
        raise ValueError(f"{role} {draft_name!r} ({where[0]}) and target {target_name!r} "
                         f"({where[1]}) have {target.n_vocab} tokens each but different tokenizers "
                         f"(vocabulary or merges differ, fingerprints {mine[:12]} and "
                         f"{theirs[:12]}): speculative decoding needs one tokenizer; pick a {role} "
                         "trained with the target's")


def check_vocabulary(folder, n_vocab, encoder):
    """CorruptFile unless the tokenizer's ids are the model's n_vocab rows."""
    from gpt2.weights import CorruptFile

    ids = set(encoder.decoder)
    if max(ids) >= n_vocab or len(ids) != n_vocab:
        raise CorruptFile(folder,
                          f"the tokenizer has {len(ids)} tokens (ids up to {max(ids)}) but the "
                          f"model has {n_vocab} (vocab_size in config.json): the tokenizer and the "
                          f"weights do not belong together",
                          "put the tokenizer files of this model beside its weights")


def heads_folder(name, kind, heads=None, offline=False):
    """--heads DIR, else `kind` in the backbone's folder, checked to hold that kind."""
    from gpt2.addons import check_kind, folder_kind
    from gpt2.hub import resolve

    folder = Path(heads) if heads else resolve(name, offline=offline) / kind
    if folder_kind(folder) is None:
        raise ValueError(f"no {kind} heads for {name!r} at {folder}: train them with `python -m "
                         f"gpt2.train.heads --backbone {name} --data DIR --out DIR` (see README) "
                         f"and pass --heads DIR")
    check_kind(folder, kind, f"--heads {heads}" if heads else f"{folder}", f"--method {kind}")
    return folder


def heads_function(folder, model):
    """-> (heads(h [n, C], n_heads=None) -> logits [n_heads or K, n, V], the heads' record)."""
    import numpy as np

    from gpt2.addons import heads_kind, note_other_target
    from gpt2.backend import to_numpy
    from gpt2.fast.policy import Threads
    from gpt2.heads import heads_logits, load_heads

    heads, config = load_heads(folder, n_embd=model.hparams["n_embd"], n_vocab=model.n_vocab)
    note_other_target(folder, heads_kind(config), config, model)  # same width, other weights
    wte = to_numpy(model.params["wte"])
    # on the host, on the target's BLAS threads there (the library's own count may oversubscribe)
    threads = model.plan.threads if model.device == "cpu" else Threads(wte.size)

    def fn(h, n_heads=None):  # h [n, C] -> logits [n_heads, n, V]
        h = np.asarray(h, dtype=np.float32)
        with threads.scope(h.shape[0]):
            return heads_logits(h, heads[:n_heads], wte, config)

    return fn, config
