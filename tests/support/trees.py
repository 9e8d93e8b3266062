"""Token trees the tree tests share: the seed tree of the Medusa article and one tree of each
shape."""
from picospec.tree import cartesian_choices, chain_choices

SEED_CHOICES = [[0], [0, 0], [0, 1], [0, 2], [1], [1, 0], [1, 1], [1, 2]]


TREES = {"chain": chain_choices(3), "cartesian": cartesian_choices(2, 3), "seed": SEED_CHOICES,
         "sparse": [[0], [1], [0, 0], [2], [0, 1], [0, 0, 0]]}
