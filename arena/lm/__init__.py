"""The model kit that every backend, evaluation and BC share: a small Qwen3 policy and its tools.

model.py (build/load/save), tokenizer.py (a tiny local tokenizer), decoding.py + sampler.py
(KV-cache batched sampling and the rollout loop's policy adapter), logprobs.py (one-pass
log-probs and entropy), micro_batches.py (rows by length, trimmed padding), evaluate.py (greedy
success on held-out seeds), checkpoint.py (atomic training-state checkpoints). Submodules are
imported explicitly, so importing this package stays cheap (no torch).
"""
