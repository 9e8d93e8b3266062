"""Training: what makes the built-in models and their add-ons, apart from the model (gpt2/).

backprop.py paired with gpt2/model.py's forward (llm.c style); gpt2.py the training loop and the
GPT-2 trainer (`python -m gpt2.train.gpt2`); heads.py (Medusa and Hydra heads), eagle.py (the EAGLE
head), exit_adapter.py and skip_search.py (the self-draft's exit adapter and skip set); generate.py
the distillation decoder; corpus.py, bpe.py and ngram.py the data, the tokenizer and the n-gram
counts; card.py the model card. gpt2/ never imports this package; docs/architecture.md draws the
layers.
"""
