"""Each method for B prompts at once, row b equal to its single form on xs[b] with its generator
generators[b] (rows without one draw from rng)."""
