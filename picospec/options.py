"""The method table's options (picospec_cli.Option): the checks run before any model loads,
and --tree read into rank paths. The algorithms raise ValueError with the fact; the words for
the command line are here and in picospec/methods.py."""
import json
import math

from picospec.tree import cartesian_choices, chain_choices, check_choices
from picospec_cli import Option


def K_option(help="draft tokens per step"):
    return Option("K", int, 4, help, low=1, high=64)


TREES = ("sparse", "chain", "cartesian")


def rank_paths(value):
    """Whether value is written as a list of rank paths: [[0], [0, 0], [1]] yes; [0, 1], [[True]],
    "[[0]]" no."""
    return isinstance(value,
                      list) and all(isinstance(c, list) and all(type(r) is int for r in c)
                                    for c in value)


def parse_tree(tree):
    """--tree as a user writes it: "sparse", "chain", "cartesian" or a JSON list of rank paths like
    "[[0],[0,0],[1]]" -> the name or the list of paths; ValueError for anything else."""
    if tree in TREES:
        return tree
    try:
        choices = json.loads(tree) if isinstance(tree, str) else tree
    except (json.JSONDecodeError, RecursionError):  # RecursionError: brackets nested thousands deep
        choices = None
    if not rank_paths(choices):
        shown = repr(tree) if len(repr(tree)) <= 80 else repr(tree)[:76] + "...'"
        raise ValueError(f"--tree {shown}: use sparse, chain, cartesian or a JSON list of rank "
                         f"paths like '[[0],[0,0],[1]]'")
    check_choices(choices)
    return choices


def medusa_tree(tree, n_heads, sparse=None):
    """medusa_choices for --tree: the heads' own sparse tree (built from their measured accuracy, if
    shipped), a chain of top-1 candidates, a 2-wide Cartesian tree, or the paths given."""
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


def tree_check(text):
    try:
        parse_tree(text)
    except ValueError as e:
        return str(e)
    return None


def eagle_tree_check(text):
    if text == "cartesian":
        return ("--tree cartesian is Medusa's; EAGLE takes sparse, chain or JSON rank paths like "
                "'[[0],[0,0],[1]]'")
    return tree_check(text)


def expansion_check(expansion):
    """A tree of at most 256 draft nodes (each level's children times the nodes above it): the most
    one tree call scores. Example: 1,1,2 -> 1 + 1 + 2 = 4 nodes."""
    nodes = sum(math.prod(expansion[:i + 1]) for i in range(len(expansion)))
    if nodes > 256:
        return (f"a tree of {nodes} draft nodes, more than the 256 one target call scores: use "
                f"fewer levels or children")
    return None


def skip_check(text):
    """--skip: sublayer names, comma-separated (a = attention, m = MLP, then the layer); the engine
    checks layers."""
    parts = [t.strip() for t in text.split(",")]
    if not all(len(t) > 1 and t[0] in "am" and t[1:].isdigit() for t in parts):
        return ("write the sublayers to skip as a<layer> (attention) or m<layer> (MLP), "
                "comma-separated, e.g. a3,m4")
    return None
