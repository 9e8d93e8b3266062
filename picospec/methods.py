"""The table of methods, the one place that lists them: main.py, the benchmarks, the notebooks,
the tests and docs/methods.md read it. A method is one file in picospec/ and one row here."""
from typing import Callable, NamedTuple

from picospec.autoregressive import autoregressive_sampling
from picospec.batched.autoregressive import batch_autoregressive_sampling
from picospec.batched.blockwise import batch_blockwise_decoding
from picospec.batched.cascade import batch_cascade_decoding
from picospec.batched.eagle import batch_eagle_decoding
from picospec.batched.eagle2 import batch_eagle2_decoding
from picospec.batched.eagle3 import batch_eagle3_decoding
from picospec.batched.greedy import batch_greedy_decoding
from picospec.batched.lookahead import batch_lookahead_decoding
from picospec.batched.medusa import batch_medusa_decoding
from picospec.batched.prompt_lookup import batch_prompt_lookup_decoding
from picospec.batched.rest import batch_rest_decoding
from picospec.batched.self_draft import batch_self_speculative_decoding
from picospec.batched.sequoia import batch_sequoia_decoding
from picospec.batched.specinfer import batch_specinfer_decoding
from picospec.batched.speculative import batch_speculative_sampling
from picospec.blockwise import blockwise_decoding
from picospec.cascade import cascade_decoding
from picospec.eagle import CANDIDATES, eagle_decoding, static_tree
from picospec.eagle2 import eagle2_decoding
from picospec.eagle3 import eagle3_decoding
from picospec.greedy import SCHEDULES, greedy_decoding
from picospec.lookahead import lookahead_decoding
from picospec.medusa import POSTERIORS, medusa_decoding
from picospec.options import (K_ALSO, K_option, dynamic_tree_options, eagle_tree_check,
                              expansion_check, medusa_tree, parse_tree, ranks_past_the_tree,
                              skip_check, tree_check)
from picospec.prompt_lookup import prompt_lookup_decoding
from picospec.rest import rest_decoding
from picospec.self_draft import self_speculative_decoding
from picospec.sequoia import sequoia_decoding
from picospec.specinfer import specinfer_decoding
from picospec.speculative import speculative_sampling
from picospec_cli import Option, nearest

LAWS = ("lossless", "greedy", "lossy")


class Method(NamedTuple):
    name: str  # what --method takes
    fn: Callable  # the algorithm, a function in its own file of picospec/
    # fn's positional arguments by name: x, N, rng, target, draft, draft2, heads, datastore, or an
    # option
    args: tuple
    help: str
    paper: str
    # what must be loaded before it runs: "draft", "draft2" (a second, smaller drafter, from
    # --draft2), "heads:medusa" / "heads:blockwise" / "heads:eagle" / "heads:eagle3" (heads on
    # the target),
    # "datastore" (REST's suffix array), "self_draft:layer_skip" / "self_draft:early_exit" (the
    # target and its own draft path on one engine: they replace "target"), "acceptance" (Sequoia's
    # vectors measured for the pair)
    needs: tuple = ()
    # "lossless" (the warped target's law at every temperature), "greedy" (exact at temperature 0,
    # refuses temperature > 0) or "lossy"; a function of the options where an option decides it
    # (Medusa's posterior)
    law: object = "lossless"
    # the method's own options (picospec_cli.Option: type, default, help, bounds, checks; the door
    # runs them before anything loads); load=True: read by the loader of the needs, not passed to fn
    options: tuple = ()
    instead: str = None  # for a greedy-only method: the lossless method to use at temperature > 0
    # (options, loaded, sampling) -> keyword arguments of fn, where options need what loaded
    prepare: Callable = None
    batch: Callable = None  # the batched form, for --batch (None: the method refuses --batch)
    also: tuple = ()  # names other projects or papers give it, answered with "did you mean"
    # what the seed draws at temperature 0, where it draws anything (the tokens never change)
    seeded: str = None


def prepare_medusa(options, loaded, sampling):
    """--tree read; --posterior auto: greedy at temperature 0, lossless above."""
    heads, tree = loaded["heads"], options.pop("tree")
    if options["posterior"] == "auto":
        options["posterior"] = medusa_posterior(options, sampling.get("temperature", 1))
    given = f"--tree {tree}" + (" (the default: the heads' medusa_choices.json)"
                                if tree == "sparse" else "")
    try:
        choices = medusa_tree(tree, heads["n_heads"], heads.get("sparse"))
    except ValueError as e:  # deeper than the heads, say
        raise ValueError(f"{given}: {e}") from None
    rank, topk = max(max(c) for c in choices), options["topk"]
    if rank >= topk:  # a head offers its topk likeliest tokens: ranks 0 .. topk - 1
        most = next(o.high for o in find("medusa").options if o.name == "topk")
        fix = (f"give --topk {rank + 1} or more" if rank < most else
               f"--topk is at most {most}: use ranks below {most}")
        raise ValueError(f"{given} asks for candidate rank {rank}, but --topk {topk} offers ranks "
                         f"0..{topk - 1}: {fix}, or a tree of smaller ranks (--tree chain)")
    return {**options, "heads": heads["fn"], "medusa_choices": choices}


def inner_past_K(values):
    """Cascade's --K_inner past what --K lets --draft review: K - 1 of --draft2's tokens a call
    (its review call adds the K-th)."""
    K, inner = values["K"], values["K_inner"]
    if inner <= K - 1:
        return None
    if K == 1:
        return (f"--K_inner {inner} has no effect at --K 1: --draft samples its one token, "
                f"reviewing none of --draft2's")
    return (f"--K_inner {inner} runs as --K_inner {K - 1}: a --draft review call checks at most "
            f"--K - 1 = {K - 1} of --draft2's tokens (the call adds the K-th)")


def prepare_blockwise(options, loaded, sampling):
    """Block size k = --K: p_1 and the first k - 1 heads."""
    heads, K = loaded["heads"], options["K"]
    if K > heads["n_heads"] + 1:
        raise ValueError(f"--K {K} is more than the {heads['n_heads']} blockwise heads + 1 allow; "
                         f"use --K <= {heads['n_heads'] + 1}")
    return {**options, "heads": lambda h: heads["fn"](h)[:K - 1]}  # p_2..p_K


def prepare_eagle(options, loaded, sampling):
    """The static tree from --tree, --nodes and --depth."""
    head, tree = loaded["heads"], parse_tree(options.pop("tree"))
    if tree == "sparse" and head.accuracy is None:
        raise ValueError("this EAGLE head has no accuracy record to build the sparse tree from: "
                         "pass --tree chain or a list of rank paths like '[[0],[0,0],[1]]'")
    choices = static_tree(tree, head.accuracy, options.pop("nodes"), options.pop("depth"))
    V = loaded["target"].n_vocab
    if (c := next((c for c in choices if max(c) >= V), None)) is not None:
        raise ValueError(f"--tree node {list(c)} asks for rank {max(c)}, but the vocabulary has "
                         f"{V} tokens (ranks 0..{V - 1})")
    return {**options, "heads": head, "choices": choices}


def prepare_eagle2(options, loaded, sampling):
    return {**options, "heads": loaded["heads"]}


def prepare_eagle3(options, loaded, sampling):
    """--draft_vocab: the head drafts over that many of its most frequent tokens."""
    head, n = loaded["heads"], options.pop("draft_vocab")
    one = getattr(head, "head", head)  # a batched head's EAGLE-3 head
    one.use_vocabulary(len(one.params["d2t"]) if n is None else n)
    return {**options, "heads": head}


def prepare_specinfer(options, loaded, sampling):
    """--merge: --draft and --draft2 grow trees by one expansion, merged."""
    merge = options.pop("merge")
    return {**options, "draft": [loaded["draft"], loaded["draft2"]] if merge else loaded["draft"]}


def prepare_sequoia(options, loaded, sampling):
    """--acceptance left out: the pair's measured vector."""
    if options["acceptance"] is None:
        kind = "greedy" if sampling.get("temperature", 1) == 0 else "sampled"
        options["acceptance"] = loaded["acceptance"][kind]
    return options


def prepare_self_draft(options, loaded, sampling):
    """--K, --threshold left out: the values searched with the draft path."""
    searched = loaded["self_draft"]
    return {k: searched[k] if v is None and k in searched else v for k, v in options.items()}


def medusa_posterior(options, temperature=None):
    """The posterior a run decodes with: auto is greedy at temperature 0, lossless above; at
    temperature 0 every posterior but lossless takes the argmax (medusa.evaluate_posterior)."""
    posterior = options.get("posterior", "auto")
    if temperature == 0 and posterior != "lossless":
        return "greedy"
    return "lossless" if posterior == "auto" else posterior


def posterior_unused(of):
    """An Option's unused for a threshold of the posterior `of` alone."""
    return lambda values: (medusa_posterior(values, values["temperature"]) != of
                           and f"it is the {of} posterior's (--posterior {of}, at --temperature "
                               f"> 0)")


def medusa_law(options, temperature=None):
    """The law of the posterior a run decodes with (medusa_posterior)."""
    return {"greedy": "greedy", "typical": "lossy",
            "nucleus": "lossy"}.get(medusa_posterior(options, temperature), "lossless")


METHODS = (
    Method("autoregressive", autoregressive_sampling, ("x", "target", "N", "rng"),
           "one target call per token: the baseline every method is timed against",
           "Chen et al. 2023, arXiv:2302.01318, Alg. 1", batch=batch_autoregressive_sampling),
    Method("speculative", speculative_sampling, ("x", "draft", "target", "N", "K", "rng"),
           "speculative sampling: K draft tokens, one target call, modified rejection sampling",
           "Chen et al. 2023, arXiv:2302.01318, Alg. 2; Leviathan et al. 2023, arXiv:2211.17192",
           needs=("draft",), options=(K_option(),), batch=batch_speculative_sampling,
           also=("speculative_decoding", "speculative_sampling", "sps")),
    Method("greedy", greedy_decoding, ("x", "draft", "target", "N", "K"),
           "assisted generation: greedy drafts kept up to the first mismatch with the target's "
           "argmax",
           "Leviathan et al. 2023, arXiv:2211.17192, Alg. 1 at temperature 0",
           needs=("draft",), law="greedy", instead="speculative",
           options=(K_option("draft tokens per step (the first step's, with --schedule heuristic)"),
                    Option("schedule", str, "constant",
                           "how K changes per step: constant, or heuristic "
                           "(+2 after a full accept, -1 otherwise)", choices=SCHEDULES),
                    Option("confidence", float, None,
                           "stop drafting when the draft's top probability falls "
                           "below this", above=0, high=1)), batch=batch_greedy_decoding,
           also=("assisted", "assisted_generation", "assisted_decoding")),
    Method("prompt_lookup", prompt_lookup_decoding, ("x", "target", "N", "rng"),
           "drafts copied from the sequence itself by n-gram match, verified losslessly",
           "Saxena 2023, Prompt Lookup Decoding",
           options=(Option("max_ngram_size", int, 3, "longest trailing n-gram searched for", low=1,
                           high=64),
                    Option("num_pred_tokens", int, 10, "most tokens copied as the draft", low=1,
                           high=64)),
           batch=batch_prompt_lookup_decoding, also=("pld",)),
    Method("medusa", medusa_decoding, ("x", "target", "heads", "N", "rng"),
           "Medusa heads guess tokens 2..K+1 ahead; their top-k tree is verified in one "
           "tree-attention call",
           "Cai et al. 2024, arXiv:2401.10774",
           needs=("heads:medusa",), law=medusa_law, instead="medusa --posterior lossless",
           prepare=prepare_medusa,
           options=(Option("heads", "dir", None,
                           "folder of trained Medusa heads (default: the target's medusa/)",
                           load=True),
                    Option("tree", str, "sparse",
                           "sparse (the heads' own), chain, cartesian, or JSON rank paths "
                           "like '[[0],[0,0],[1]]'", check=tree_check),
                    Option("topk", int, 10, "candidates per head", low=1, high=100,
                           unused=ranks_past_the_tree),
                    Option("posterior", str, "auto",
                           "how much of the tree to accept: greedy, typical (lossy), nucleus "
                           "(lossy), lossless; auto = greedy at temperature 0, lossless above",
                           choices=("auto",) + POSTERIORS),
                    Option("epsilon", float, 0.09, "typical acceptance's hard threshold (Medusa's "
                           "posterior_threshold)", above=0, high=1,
                           unused=posterior_unused("typical")),
                    Option("delta", float, 0.3,
                           "typical acceptance's entropy factor (Medusa's posterior_alpha)",
                           above=0, unused=posterior_unused("typical")),
                    Option("nucleus_p", float, 0.8, "the nucleus posterior's top-p", above=0,
                           high=1, unused=posterior_unused("nucleus"))),
           batch=batch_medusa_decoding),
    Method("blockwise", blockwise_decoding, ("x", "target", "heads", "N", "K"),
           "Blockwise parallel decoding: k - 1 heads propose a block, the model keeps its greedy "
           "prefix",
           "Stern, Shazeer, Uszkoreit 2018, arXiv:1811.03115",
           needs=("heads:blockwise",), law="greedy", instead="medusa --posterior lossless",
           prepare=prepare_blockwise,
           options=(Option("heads", "dir", None,
                           "folder of trained Blockwise heads (default: the target's "
                           "blockwise/)", load=True),
                    K_option("block size k: p_1 and k - 1 heads"),
                    Option("merged", bool, True,
                           "combined scoring and proposal (one call per block); "
                           "--no-merged: the basic predict / verify loop")),
           batch=batch_blockwise_decoding),
    Method("eagle", eagle_decoding, ("x", "target", "heads", "N", "rng"),
           "EAGLE-1: a one-block head drafts on the target's features; a static tree, verified in "
           "one tree call",
           "Li, Wei, Zhang, Zhang 2024, arXiv:2401.15077",
           needs=("heads:eagle",), prepare=prepare_eagle,
           options=(Option("heads", "dir", None,
                           "folder of a trained EAGLE head (default: the target's eagle/)",
                           load=True),
                    Option("tree", str, "sparse",
                           "sparse (built from the head's measured accuracy per step ahead), "
                           "chain, or JSON rank paths like '[[0],[0,0],[1]]'",
                           check=eagle_tree_check),
                    Option("nodes", int, 10, "nodes of the sparse tree", low=1, high=256,
                           unused=lambda v: v["tree"] != "sparse" and "it sizes --tree sparse"),
                    Option("depth", int, 5, "most levels of the sparse tree; the chain's length",
                           low=1, high=64, unused=lambda v: v["tree"] not in ("sparse", "chain")
                           and "it bounds --tree sparse and chain, not paths given"),
                    Option("candidates", str, "sample",
                           "children at temperature > 0: sample (drawn without replacement from "
                           "the head's warped law, judged against it) or topk (the head's top "
                           "tokens, verified as one-hot proposals); temperature 0 always takes the "
                           "top tokens",
                           choices=CANDIDATES, unused=lambda v: v["temperature"] == 0
                           and "temperature 0 always takes the top tokens")),
           batch=batch_eagle_decoding),
    Method("eagle2", eagle2_decoding, ("x", "target", "heads", "N", "rng"),
           "EAGLE-2: the EAGLE head grows a dynamic tree by cumulative draft log-probability, "
           "reranked, one tree call",
           "Li, Wei, Zhang, Zhang 2024, arXiv:2406.16858",
           needs=("heads:eagle",), prepare=prepare_eagle2,
           options=(Option("heads", "dir", None,
                           "folder of a trained EAGLE head (default: the target's eagle/)",
                           load=True),
                    *dynamic_tree_options()), batch=batch_eagle2_decoding),
    Method("eagle3", eagle3_decoding, ("x", "target", "heads", "N", "rng"),
           "EAGLE-3: a head on the target's features from three depths, trained with "
           "training-time test, drafts EAGLE-2's dynamic tree over a draft vocabulary of its own",
           "Li, Wei, Zhang, Zhang 2025, arXiv:2503.01840",
           needs=("heads:eagle3",), prepare=prepare_eagle3,
           options=(Option("heads", "dir", None,
                           "folder of a trained EAGLE-3 head (default: the target's eagle3/)",
                           load=True),
                    *dynamic_tree_options(),
                    Option("draft_vocab", int, None,
                           "V_d: draft over the head's V_d most frequent tokens (default: all it "
                           "was trained on)", low=1)), batch=batch_eagle3_decoding),
    Method("rest", rest_decoding, ("x", "target", "N", "rng", "datastore"),
           "retrieval: continuations of the context's longest suffix in a datastore, verified as "
           "one trie",
           "He et al. 2023, arXiv:2311.08252",
           needs=("datastore",),
           options=(Option("datastore", "path", None,
                           "a REST datastore .npz (default: built once from the "
                           "standard library's train split, cached)", load=True),
                    Option("build_datastore", bool, False,
                           "build the --datastore file if it does not exist", load=True),
                    Option("num_draft_nodes", int, 7, "tree nodes kept (most frequent)", low=1,
                           high=256),
                    Option("max_matches", int, 100, "retrieved continuations per step", low=1),
                    Option("draft_len", int, 10, "tokens per retrieved continuation", low=1,
                           high=64)),
           batch=batch_rest_decoding),
    Method("lookahead", lookahead_decoding, ("x", "target", "N", "rng"),
           "Jacobi iteration on a window of guesses, n-grams pooled and verified, both in one call",
           "Fu, Bailis, Stoica, Zhang 2024, arXiv:2402.02057",
           options=(Option("window", int, 4, "W: columns of the lookahead window", low=1, high=64),
                    Option("ngram", int, 3, "N: n-gram size (window levels + 1)", low=2, high=16),
                    Option("guesses", int, 4, "G: pooled n-grams verified per step", low=0,
                           high=64)),
           batch=batch_lookahead_decoding, seeded="first window of guesses (prompt tokens)"),
    Method("layer_skip", self_speculative_decoding, ("x", "draft", "target", "N", "K", "rng"),
           "self-drafting: the target with a searched set of sublayers skipped drafts until unsure "
           "(adaptive)",
           "Zhang et al. 2023 (Draft & Verify), arXiv:2309.08168",
           needs=("self_draft:layer_skip",), prepare=prepare_self_draft,
           options=(Option("K", int, None,
                           "most draft tokens per step (default: the K searched with the skip "
                           "set)", low=1, high=64, also=K_ALSO),
                    Option("skip", str, None,
                           "sublayers to skip, e.g. a3,m4 (default: the set searched for the "
                           "target, its self_draft.json)", check=skip_check, load=True),
                    Option("threshold", float, None,
                           "gamma: stop drafting after a token the draft gives less "
                           "than this probability (0: never; default: the one searched with the "
                           "skip set)", low=0,
                           high=1),
                    Option("adaptive", bool, True,
                           "move gamma after each step towards --alpha acceptance "
                           "(Draft & Verify's rule); --no-adaptive keeps it fixed"),
                    Option("alpha", float, 0.9,
                           "the acceptance rate the adaptive threshold aims at", above=0,
                           high=1, unused=lambda v: not v["adaptive"]
                           and "it is the adaptive threshold's aim, and --no-adaptive keeps the "
                               "threshold fixed")), batch=batch_self_speculative_decoding,
           also=("draft_and_verify", "self_speculative")),
    Method("early_exit", self_speculative_decoding, ("x", "draft", "target", "N", "K", "rng"),
           "self-drafting: the first E layers draft, the rest verify reusing their KV cache",
           "Elhoushi et al. 2024 (LayerSkip), arXiv:2404.16710",
           needs=("self_draft:early_exit",), prepare=prepare_self_draft,
           options=(Option("K", int, None,
                           "draft tokens per step (default: the K searched with the exit layer)",
                           low=1, high=64, also=K_ALSO),
                    Option("exit_layer", int, None,
                           "E: draft with the first E layers (default: the target's "
                           "self_draft.json)", low=1, load=True),
                    Option("adapter", bool, True,
                           "exit through the trained exit adapter shipped with the target "
                           "(--no-adapter: the plain LM head)", load=True)),
           batch=batch_self_speculative_decoding),
    Method("cascade", cascade_decoding, ("x", "target", "draft", "draft2", "N", "K", "rng"),
           "cascade drafting: the draft's own drafts come from a smaller drafter (vertical), which "
           "also adds the last tokens (horizontal)",
           "Chen et al. 2023 (CS Drafting), arXiv:2312.11462",
           needs=("draft", "draft2"),
           options=(K_option("tokens of --draft per target step"),
                    Option("K_inner", int, 2,
                           "--draft2 tokens per --draft review call (vertical cascade; 0: "
                           "--draft drafts alone)", low=0, high=64, unused=inner_past_K),
                    Option("K_tail", int, 2,
                           "--draft2 tokens after --draft's (horizontal cascade; 0: none)",
                           low=0, high=64),
                    Option("draft2", str, "ngram", "the smaller drafter: ngram, tiny-draft, ...",
                           load=True, unused=lambda v: v["K_tail"] == 0 and (
                               v["K_inner"] == 0 or v["K"] == 1) and (
                               f"--K {v['K']}, --K_inner {v['K_inner']} and --K_tail 0 leave it "
                               f"no token to draft"))),
           batch=batch_cascade_decoding, also=("cs_drafting", "cascade_drafting")),
    Method("specinfer", specinfer_decoding, ("x", "draft", "target", "N", "rng"),
           "a token tree of draft samples grown by an expansion configuration (several drafts "
           "merged), verified in one tree call by multi-step speculative sampling",
           "Miao et al. 2024, arXiv:2305.09781",
           needs=("draft", "draft2"), prepare=prepare_specinfer,
           options=(Option("expansion", "ints", (1, 1, 2),
                           "children of every node at each depth (the paper's "
                           "<1,1,3,1,1,1,1,1> is 1,1,3,1,1,1,1,1)", low=1, high=16,
                           check_list=expansion_check),
                    Option("merge", bool, False,
                           "also grow a tree from --draft2 and merge it in (multi-draft): each "
                           "node remembers the law it was drawn from"),
                    Option("draft2", str, "ngram",
                           "the second drafter of --merge: ngram, tiny-draft, ...",
                           load=True, unused=lambda v: not v["merge"]
                           and "it is the second drafter of --merge")),
           batch=batch_specinfer_decoding),
    Method("sequoia", sequoia_decoding, ("x", "draft", "target", "N", "rng"),
           "the token tree that maximises expected accepted tokens (a dynamic program), drawn "
           "without replacement",
           "Chen et al. 2024, arXiv:2402.12374",
           needs=("draft", "acceptance"), prepare=prepare_sequoia,
           options=(Option("nodes", int, 3,
                           "draft nodes in the tree (the paper's n - 1; the best size for a "
                           "machine: docs/results/token_trees.md)", low=1,
                           high=255),
                    Option("depth", int, 3, "most draft tokens on one path (the paper's d)", low=1,
                           high=64),
                    Option("acceptance", "floats", None,
                           "acceptance vector a_1,a_2,..: P(the k-th child is the one "
                           "accepted), for the dynamic program (default: the pair's, measured: "
                           "sequoia.json in "
                           "the target's folder)", low=0, high=1,
                           check_list=lambda a: f"it sums to {sum(a):g}: a_k is the chance that "
                           "the k-th child is the one accepted, so they sum to at most 1"
                           if sum(a) > 1 + 1e-6 else None)), batch=batch_sequoia_decoding),
)
TABLE = {m.name: m for m in METHODS}
ALSO = {word: m.name for m in METHODS for word in m.also}  # --method assisted: greedy


def find(name):
    """The row for --method name, or a ValueError listing the methods."""
    if name in TABLE:
        return TABLE[name]
    near = nearest(str(name), list(TABLE), also=ALSO)
    hint = f" (did you mean {near}?)" if near else ""
    raise ValueError(f"unknown --method {name!r}{hint}: choose one of {', '.join(TABLE)}")


def defaults(method):
    return {o.name: o.default for o in method.options}


def law(method, options, temperature=None):
    """"lossless", "greedy" or "lossy" for this row, options and temperature."""
    return method.law(options, temperature) if callable(method.law) else method.law


def check_temperature(method, options, temperature):
    """Refuse temperature > 0 for a greedy-only method, naming its lossless peer."""
    if temperature > 0 and law(method, options) == "greedy":
        raise ValueError(f"--method "
                         f"{method.name}{' --posterior greedy' if method.name == 'medusa' else ''} "
                         f"is greedy-only (exact at --temperature 0) but --temperature is "
                         f"{temperature:g}: use --method {method.instead} to sample losslessly, or "
                         f"--temperature 0")


def batch_refusal(method):
    """Why --batch cannot run `method`, or None."""
    if method.batch is not None:
        return None
    batchable = ", ".join(m.name for m in METHODS if m.batch)
    return (f"--batch runs methods with a batched form ({batchable}); --method {method.name} has "
            f"none")


def prepared(method, options, loaded, sampling):
    """The options fn takes, settled by the row's prepare from what loaded -> (options,
    sampling); the loader's own options (load=True) left out."""
    sampling = {k: v for k, v in (sampling or {}).items() if v is not None}
    options = {**defaults(method), **(options or {})}
    check_temperature(method, options, sampling.get("temperature", 1.0))
    options = {k: v for k, v in options.items()
               if not next(o for o in method.options if o.name == k).load}
    if method.prepare:
        options = method.prepare(dict(options), loaded, sampling)
    return options, sampling


def settled(method, options, loaded, sampling=None):
    """The options as a run decodes with them -> {name: value}: what prepare settles (--posterior
    auto, the self-draft path's searched --K and --threshold, Sequoia's measured acceptance), and
    what the loaded models settled (their `settings`: the skip set, the exit layer and its
    adapter, EAGLE-3's draft vocabulary); the rest as given."""
    ready, _ = prepared(method, options, loaded, sampling)  # fn's keywords: its models too
    found = {**loaded.get("self_draft", {}), **getattr(loaded.get("heads"), "settings", {})}
    loader = {o.name for o in method.options if o.load}  # --heads: a folder, not the heads
    return {k: plain(ready[k] if k in ready and k not in loader else found.get(k, v))
            for k, v in {**defaults(method), **(options or {})}.items()}


def plain(v):  # a value as JSON writes it: arrays and tuples as lists, NumPy numbers as Python's
    if hasattr(v, "tolist"):
        return v.tolist()
    return [plain(x) for x in v] if isinstance(v, (list, tuple)) else v


def call(method, x, N, rng, loaded, sampling=None, options=None, stats=None, batch=False):
    """Run one row: fn(*args, **options, **sampling options) -> x then N tokens."""
    options, sampling = prepared(method, options, loaded, sampling)
    given = {"x": x, "N": N, "rng": rng, **loaded, **options}
    keywords = {k: v for k, v in options.items() if k not in method.args}
    if law(method, options) == "greedy":
        # greedy-only functions take no sampling options (temperature 0 was checked above)
        sampling = {}
    if batch and method.batch is None:
        raise ValueError(f"--method {method.name} has no batched form")
    return (method.batch if batch else method.fn)(*[given[a] for a in method.args], stats=stats,
                                                  **keywords, **sampling)


def markdown():
    """docs/methods.md's tables."""
    lines = ["| method | what it does | paper | needs | law at temperature > 0 | --batch |",
             "|---|---|---|---|---|---|"]
    for m in METHODS:
        kind = "depends on --posterior" if callable(m.law) else {"lossless": "lossless",
                                                                 "greedy": "greedy-only",
                                                                  "lossy": "lossy"}[m.law]
        lines.append(f"| `{m.name}` | {m.help} | {m.paper} | {', '.join(m.needs) or '-'} | {kind} "
                     f"| {'yes' if m.batch else 'no'} |")
    for m in METHODS:
        if m.options:
            lines += ["", f"`python main.py --method {m.name}` options:", "",
                      "| option | type | default | help |", "|---|---|---|---|"]
            for o in m.options:
                kind = o.type if isinstance(o.type, str) else o.type.__name__
                lines.append(f"| `--{o.name}` | {kind} | "
                             f"{'' if o.default is None else f'`{o.default}`'} | {o.help} |")
    return "\n".join(lines)
