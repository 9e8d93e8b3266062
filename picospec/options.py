"""The method table's options (picospec_cli.Option): checks run before any model loads."""
import json
import math

from picospec.tree import MOST_NODES, cartesian_choices, chain_choices, check_choices
from picospec_cli import Option


def dynamic_tree_options():
    """EAGLE-2's options of the dynamic tree (EAGLE-3 drafts the same tree)."""
    return (Option("depth", int, 5, "draft levels: the head runs once per level", low=1, high=64),
            Option("tree_top_k", int, 4,
                   "the paper's top-k: nodes expanded per level and children per expanded node "
                   "(named so beside --top_k, the sampling option)", low=1, high=64),
            Option("total_tokens", int, 16,
                   "draft nodes kept after reranking (the tree the target scores)", low=1,
                   high=256, unused=more_than_drafted))


def more_than_drafted(values):
    """--total_tokens past the nodes --depth and --tree_top_k draft: the first level's top_k, then
    top_k children of each of a level's top_k nodes."""
    d, k, kept = values["depth"], values["tree_top_k"], values["total_tokens"]
    drafted = k + (d - 1) * k * k
    return kept > drafted and (
        f"--total_tokens {kept} is more than the {drafted} nodes --depth {d} and --tree_top_k {k} "
        f"draft ({k} + {d - 1} x {k} x {k}): every one is kept, as at --total_tokens {drafted}")


def ranks_past_the_tree(values):
    """Medusa's --topk past the ranks a tree known before loading reads."""
    tree = parse_tree(values["tree"])
    if tree == "sparse":  # the heads' own, read when they load (ranks_past then)
        return None
    paths = cartesian_choices(3, 2) if tree == "cartesian" else [[0]] if tree == "chain" else tree
    return ranks_past(values["topk"], paths, f"--tree {values['tree']}")


def ranks_past(topk, paths, tree):
    """Why --topk offers more candidates than the rank paths of `tree` read, or None."""
    rank = max(max(path) for path in paths)
    return topk > rank + 1 and (
        f"--topk {topk} offers more candidates than {tree} reads: its paths use "
        f"{f'ranks 0..{rank}' if rank else 'rank 0 alone'}, so the run is the one at --topk "
        f"{rank + 1}")


# what other libraries call K (Hugging Face's assisted generation, vLLM), for did-you-mean
K_ALSO = ("num_draft_tokens", "num_assistant_tokens", "draft_tokens", "num_speculative_tokens",
          "gamma")  # gamma: Leviathan et al.'s letter for K


def K_option(help="draft tokens per step"):
    return Option("K", int, 4, help, low=1, high=64, also=K_ALSO)


TREES = ("sparse", "chain", "cartesian")


def rank_paths(value):
    """Whether value is a list of rank paths: [[0], [0, 0]] yes; [0, 1], [[True]] no."""
    return isinstance(value, list) and all(isinstance(c, list) and all(type(r) is int for r in c)
                                           for c in value)


def parse_tree(tree, names=TREES):
    """--tree: one of `names` ("sparse", "chain", "cartesian") or JSON rank paths -> the name or
    the paths."""
    if tree in names:
        return tree
    try:
        choices = json.loads(tree) if isinstance(tree, str) else tree
    except (json.JSONDecodeError, RecursionError):  # RecursionError: brackets nested thousands deep
        choices = None
    if choices and isinstance(choices, list) and all(isinstance(c, list) for c in choices) and (
            bad := next((c for c in choices if not all(type(r) is int for r in c)), None)):
        raise ValueError(f"node {json.dumps(bad)[:40]}: ranks must be non-negative integers")
    if not rank_paths(choices):
        shown = repr(tree) if len(repr(tree)) <= 80 else repr(tree)[:76] + "...'"
        raise ValueError(f"--tree {shown}: use {', '.join(names)} or a JSON list of rank paths "
                         f"like '[[0],[0,0],[1]]'")
    check_choices(choices)
    return choices


def medusa_tree(tree, n_heads, sparse=None):
    """medusa_choices for --tree: sparse, chain, a 2-wide tree, or the paths given."""
    tree = parse_tree(tree)
    if tree == "sparse":
        if sparse is None:
            raise ValueError("these heads have no sparse tree (medusa_choices.json): build one "
                             "with `python -m bench.trees --build DIR --budgets 7` or pass --tree "
                             "chain, cartesian or a list of paths")
        return sparse
    if tree == "chain":
        return chain_choices(n_heads)
    if tree == "cartesian":
        return cartesian_choices(min(n_heads, 3), 2)
    check_choices(tree, n_heads=n_heads)
    return tree


def tree_check(text, names=TREES):
    try:
        tree = parse_tree(text, names)
    except ValueError as e:
        return str(e)
    if isinstance(tree, list) and len(tree) > MOST_NODES:  # one node a path
        return (f"a tree of {len(tree)} nodes, more than the {MOST_NODES} one target call scores: "
                f"give fewer paths")
    return None


def eagle_tree_check(text):
    if text == "cartesian":
        return ("--tree cartesian is Medusa's; EAGLE takes sparse, chain or JSON rank paths like "
                "'[[0],[0,0],[1]]'")
    return tree_check(text, ("sparse", "chain"))


def expansion_check(expansion):
    """At most 256 draft nodes: 1,1,2 -> 4 nodes."""
    nodes = sum(math.prod(expansion[:i + 1]) for i in range(len(expansion)))
    if nodes > MOST_NODES:
        return (f"a tree of {nodes} draft nodes, more than the {MOST_NODES} one target call "
                f"scores: use fewer levels or children")
    return None


def skip_check(text):
    """--skip: comma-separated sublayers (a = attention, m = MLP, then the layer)."""
    parts = [t.strip() for t in text.split(",")]
    if not all(len(t) > 1 and t[0] in "am" and t[1:].isdigit() for t in parts):
        return ("write the sublayers to skip as a<layer> (attention) or m<layer> (MLP), "
                "comma-separated, e.g. a3,m4")
    keys = [(t[0], int(t[1:])) for t in parts]  # a01 is a1
    if twice := next((t for i, t in enumerate(parts) if keys[i] in keys[:i]), None):
        return f"{twice} names a sublayer given before it: name each sublayer once"
    return None
