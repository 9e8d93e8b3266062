"""Each method for B prompts at once: row b equals its single form on xs[b] with generators[b]
(else rng)."""
