"""Training: what makes the built-in models and their add-ons; gpt2/ never imports it.

backprop.py the backward of gpt2/model.py's forward; gpt2.py the training loop and GPT-2 trainer;
heads.py Medusa and Blockwise heads; eagle.py the EAGLE head; exit_adapter.py and skip_search.py the
self-draft's adapter and skip set; generate.py batched decoding; corpus.py, bpe.py, ngram.py the
data, tokenizer and n-gram counts; card.py the model card.
"""
