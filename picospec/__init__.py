"""picospec: speculative decoding, one file per paper. Models are functions model(x, n=1) ->
probs [n, n_vocab]."""
