"""The embedded backend: a small Qwen3 model trained in-process on CPU (or one GPU).

run.py (`arena train` for this backend), trainer.py (the RL loop: rollout, log-probs,
advantages, update, eval, checkpoints) and update.py (one policy update: mini-batches x epochs,
micro-batches with exact gradient accumulation). The model kit it trains with is `arena.lm`, its
initial checkpoint comes from `arena.bc`. Submodules are imported explicitly, so importing this
package stays cheap.
"""
