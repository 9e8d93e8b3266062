"""picospec: speculative decoding, one file per paper; models are functions x -> probs [n, V]."""
