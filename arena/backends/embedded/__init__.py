"""The embedded backend: a small Qwen3 model trained in-process on CPU (or one GPU).

model.py (build/load/save), tokenizer.py (a tiny local tokenizer), decoding.py + sampler.py
(KV-cache batched sampling and the rollout loop's policy adapter), logprobs.py (one-pass
log-probs and entropy for the trainer). Submodules are imported explicitly, so importing this
package stays cheap.
"""
