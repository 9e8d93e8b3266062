"""Load what a method needs (a row's `needs` in picospec/methods.py): drafts, heads, the REST
datastore, a self-draft engine, Sequoia's acceptance vectors, and their batched forms. Drafts and
the acceptance vectors are gpt2's to read (gpt2/load.py); the heads' sparse tree and the datastore
are read here, with picospec's checks.
"""
import errno
import json
import sys
from pathlib import Path

import numpy as np

from gpt2.load import load_acceptance, load_draft


def check_target(name):
    """Refuse the n-gram as a target: it drafts only."""
    if str(name) == "ngram":
        raise ValueError("--target ngram: the n-gram model drafts only; give a GPT-2 target such "
                         "as tiny-target")


def check_needs(method, options):
    """Mistakes in the options that name files, found before any model loads."""
    if "datastore" not in method.needs:
        return
    build = options.get("build_datastore")
    if options.get("datastore") is None:
        if build:
            raise ValueError("--build_datastore builds the file --datastore names: add "
                             "--datastore NEW.npz, or drop it (without --datastore the datastore "
                             "is built once into the cache)")
        return
    path = Path(options["datastore"])
    try:
        folder, exists = path.is_dir(), path.exists()
    except OSError as e:  # a name too long for the file system
        raise ValueError(f"--datastore {path}: {e.strerror or e}") from None
    if folder:
        raise ValueError(f"--datastore {path} is a folder: give a .npz file")
    if not exists and not build:
        raise ValueError(f"--datastore {path} does not exist: give an existing datastore, or add "
                         f"--build_datastore to build it there")
    if not exists:  # --build_datastore: the door's checks of a file to write
        from picospec_cli import Option, convert

        convert(Option("datastore", "out"), str(path))


def load_needs(method, options, target, target_name, encoder, draft="tiny-draft", device="cpu",
               offline=None, progress=None):
    """{"target", and as method.needs say "draft", "draft2", "heads", "datastore", ...} for
    picospec.methods.call; "self_draft:KIND" puts target and draft on one engine."""
    loaded = {"target": target}
    # the target's own engine first, then the models by name, then the add-ons (a row has one)
    for need in method.needs:
        if need.startswith("self_draft:"):  # the target drafting for itself, on one cache
            loaded.update(load_self_draft(need.split(":")[1], options, target, target_name,
                                          offline))
        elif need == "draft":
            loaded["draft"] = load_draft(draft, target, target_name, device, offline)
        elif need == "draft2":  # a second, smaller drafter (cascades): --draft2, default the n-gram
            name = "ngram" if options.get("draft2") is None else options["draft2"]
            loaded["draft2"] = load_draft(name, target, target_name, device, offline, "--draft2")
        elif need == "acceptance":  # Sequoia's vectors for this pair, unless --acceptance
            if options.get("acceptance") is None:
                loaded["acceptance"] = load_acceptance(target_name, draft, offline)
        elif need.startswith("heads:"):
            loaded["heads"] = load_heads(target_name, need.split(":")[1], options.get("heads"),
                                         target, offline)
        elif need == "datastore":
            loaded["datastore"] = rest_datastore(options.get("datastore"), target_name, encoder,
                                                 progress)
        else:
            raise ValueError(f"method {method.name} needs {need!r}, which "
                             f"picospec_app.load.load_needs cannot load")
    return loaded


def load_self_draft(kind, options, target, target_name, offline=None):
    """{"target", "draft", "self_draft"}: the target and its own draft path on one KV cache."""
    from gpt2.hub import resolve
    from gpt2.self_draft import load_self_draft as load
    from gpt2.self_draft import parse_skip

    if options.get("skip") is not None:  # the door checked its form; the layers need the target
        try:
            parse_skip(options["skip"], target.hparams["n_layer"])
        except ValueError as e:
            raise ValueError(f"--skip {options['skip']}: {e}") from None
    # one engine on the target's weights, run as the target's are (its plan, gpt2/fast/)
    engine = load(target.hparams, target.params, resolve(str(target_name), offline=offline), kind,
                  skip=options.get("skip"), exit_layer=options.get("exit_layer"),
                  adapter=options.get("adapter", True), plan=target.plan)
    return {"target": engine.target, "draft": engine.draft, "self_draft": engine.settings}


def batched_models(loaded, rows):
    """load_needs' dict for a batched form over `rows` rows: engines, EAGLE heads and
    self-drafting sides become their batched classes; the rest stays."""
    from gpt2.eagle import BatchEagleHead, EagleHead
    from gpt2.engine import GPT2, BatchGPT2
    from gpt2.self_draft import Model as SelfDraftSide
    from gpt2.self_draft import batch_side
    from picospec.batched.loop import batched

    def batch(model):
        if isinstance(model, SelfDraftSide):
            return batch_side(model, rows)
        if isinstance(model, EagleHead):
            return BatchEagleHead(model, rows)
        return BatchGPT2(model, rows) if isinstance(model, GPT2) else batched(model)

    return {k: batch(v) if k in ("target", "draft", "draft2") or isinstance(v, EagleHead) else v
            for k, v in loaded.items()}


def batch_row_bytes(loaded, tokens):
    """Upper bound on one row's bytes in batched_models(loaded, ...) for passes of at most
    `tokens` tokens: each engine's KV caches and activations, counted once."""
    from gpt2.eagle import BatchEagleHead, EagleHead
    from gpt2.engine import GPT2, TREE_SLOTS, row_bytes
    from gpt2.self_draft import Model as SelfDraftSide

    total, engines = 0, set()
    for model in loaded.values():
        if isinstance(model, SelfDraftSide) and id(model.engine) not in engines:
            engines.add(id(model.engine))
            total += row_bytes(model.engine.hparams, 0, tokens)
        elif isinstance(model, EagleHead):
            total += BatchEagleHead.row_bytes(model, tokens)
        elif isinstance(model, GPT2):
            total += row_bytes(model.hparams, TREE_SLOTS, tokens)
    return total


def load_heads(target_name, kind, folder, target, offline=None):
    """{"fn": heads(h, n_heads=None) -> logits, "n_heads", "sparse": medusa_choices.json or None,
    "folder"}; kind "eagle" or "eagle3": the EAGLE or EAGLE-3 head (load_eagle)."""
    if kind in ("eagle", "eagle3"):
        return load_eagle(target_name, folder, target, offline, kind)
    from gpt2.load import heads_folder, heads_function

    folder = heads_folder(str(target_name), kind, folder, offline)
    fn, config = heads_function(folder, target)
    sparse, path = None, folder / "medusa_choices.json"
    if path.exists():
        from picospec.options import rank_paths
        from picospec.tree import check_choices

        try:
            sparse = json.loads(path.read_text(encoding="utf-8"))
            sparse = sparse.get("medusa_choices") if isinstance(sparse, dict) else None
            if not rank_paths(sparse):
                raise ValueError('expected {"medusa_choices": [[0], [0, 0], [1], ...]}, a list of '
                                 'rank paths')
            # no duplicates, every parent listed, one head per level
            check_choices(sparse, n_heads=config["n_heads"])
        except ValueError as e:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise ValueError(f"{path} is not a readable tree ({e}): rebuild it with `python -m "
                             f"bench.trees --build {folder} --budgets 7`") from None
    return {"fn": fn, "n_heads": config["n_heads"], "sparse": sparse, "folder": folder}


def load_eagle(target_name, folder, target, offline=None, kind="eagle"):
    """The EAGLE head (gpt2.eagle.EagleHead) or the EAGLE-3 head (gpt2.eagle3.Eagle3Head), with
    .accuracy (rank_share, for EAGLE-1's sparse tree) and .folder."""
    from gpt2.eagle import eagle_folder, eagle_head
    from gpt2.eagle3 import eagle3_head

    folder = eagle_folder(str(target_name), folder, offline, kind)
    head, config = (eagle_head if kind == "eagle" else eagle3_head)(folder, target)
    head.accuracy, head.folder = config.get("accuracy", {}).get("rank_share"), folder
    return head


def check_cache_dir(sub=None):
    """picospec's cache folder (PICOSPEC_CACHE, else ~/.cache/picospec), or its folder `sub`, if
    it can be made and written in, else a ValueError naming PICOSPEC_CACHE. Creates nothing."""
    from picospec_app.settings import read_settings
    from picospec_cli import cannot_make

    cache = Path(read_settings().cache or Path.home() / ".cache" / "picospec").expanduser()
    folder, where = (cache / sub, f"in PICOSPEC_CACHE, {cache}") if sub else (cache,
                                                                              "PICOSPEC_CACHE")
    fix = "set PICOSPEC_CACHE to a folder you can write to, or unset it to use ~/.cache/picospec"
    if (found := cannot_make(folder)) is None:
        return folder
    existing, why = found
    if why == "a file":
        raise ValueError(f"the cache folder {folder} ({where}) cannot be made: {existing} is a "
                         f"file; {fix}")
    raise ValueError(f"the cache folder {folder} ({where}) is not writable: cannot write in "
                     f"{existing} ({why}); {fix}")


def rest_datastore(path, target, encoder, progress=None):
    """Load --datastore FILE, or build it (there, or once into the cache) from the standard
    library's train split; an interrupted build leaves no file. A file that does not load is
    named with what to do."""
    from picospec.rest import Datastore

    advice = ("give a datastore that --build_datastore wrote, or build one into a new file with "
              "--method rest --datastore NEW.npz --build_datastore (the standard library's train "
              "split), or Datastore.build(tokens).save(path) in Python")
    elsewhere = "give --datastore a file in another folder"  # where a full disk sends the build
    if path is None:  # into the cache: an unwritable PICOSPEC_CACHE is named before the build
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in str(target))
        path = check_cache_dir("rest") / f"{safe}-stdlib-train.npz"
        if path.is_dir():
            raise ValueError(f"{path} is a folder where picospec keeps the REST datastore it "
                             f"builds: move that folder away, or set PICOSPEC_CACHE to another "
                             f"folder")
        # only here, in the cache, is the file picospec's own to delete
        advice = "picospec built it into its cache: delete it and run again to rebuild it"
        elsewhere = "set PICOSPEC_CACHE to a folder with room"
    path = Path(path)
    if not path.exists():
        return build_datastore(path, encoder, progress, elsewhere)
    try:
        return Datastore.load(path)
    except ValueError as e:
        raise ValueError(f"{e}; {advice}") from None


def build_datastore(path, encoder, progress=None, elsewhere="write it elsewhere"):
    """Build the REST datastore from the standard library's train split and save it at `path`;
    a file that cannot be written (a full disk) is named with what to do: make room, or
    `elsewhere`."""
    from tqdm import tqdm

    from gpt2.train.corpus import split_files, stdlib_files, tokenize
    from picospec.rest import Datastore

    print(f"building the REST datastore {path} (once) from the standard library's train split",
          file=sys.stderr)
    files = split_files(stdlib_files())["train"]
    off = None if progress is None else not progress  # tqdm's None: off where stderr is no terminal
    ids = [t for f in tqdm(files, desc="tokenize", unit="file", disable=off)
           for t in tokenize([f], encoder)]
    dtype = np.uint16 if encoder.n_vocab <= 65536 else np.int64
    store = Datastore.build(np.array(ids, dtype=dtype),
                            progress=lambda steps: tqdm(steps, desc="suffix array",
                                                        unit="doubling", disable=off))
    made = [p for p in path.parents if not p.exists()]  # the folders this build makes
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        store.save(path)
    except BaseException as e:
        for folder in made:  # innermost first, each only while empty
            if any(folder.iterdir()):
                break
            folder.rmdir()
        if isinstance(e, OSError):  # a full disk: which file, and where else it can go
            room = "make room there, or " * (e.errno in (errno.ENOSPC, errno.EDQUOT))
            raise ValueError(f"cannot write the REST datastore {path} ({e.strerror or e}): "
                             f"{room}{elsewhere}") from None
        raise
    return store
