#!/usr/bin/env bash
# GPU check for issue #7 (run on the device machine; CI never has a GPU). Under 8 minutes:
#   1. trains the embedded backend on CUDA, a larger random model (model.size=medium), budget=smoke;
#   2. times arena's PG loss against verl's loss for the same method (PPO dual-clip, token-mean),
#      forward + backward, with CUDA events, and checks that the two values agree.
# verl's core_algos imports `ray`; Ray's wheel is larger than the carry limit, so when `import ray`
# fails a stub `ray` package (import only, no behaviour) is put on PYTHONPATH, and the script says so.
set -u
PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
OUT=${OUT:-$(mktemp -d)}
echo "[gpu_smoke] python: $PY ($($PY -c 'import sys; print(sys.version.split()[0])'))  out: $OUT"
$PY -c "import torch; print('[gpu_smoke] torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"

STUB=$(mktemp -d)
if ! $PY -c "import ray" 2>/dev/null; then
  mkdir -p "$STUB/ray"
  cat > "$STUB/ray/__init__.py" <<'PYEOF'
"""Stub ray for import only (benchmarks/gpu_smoke.sh): every attribute is a dummy."""
import types
class _Dummy:
    def __init__(self, *a, **k): pass
    def __call__(self, *a, **k): return a[0] if len(a) == 1 and callable(a[0]) and not k else _Dummy()
    def __getattr__(self, name): return _Dummy()
    def __mro_entries__(self, bases): return (object,)
def __getattr__(name): return _Dummy()
PYEOF
  for sub in util util.queue util.scheduling_strategies util.placement_group actor exceptions experimental runtime_env; do
    d="$STUB/ray/${sub//.//}"; mkdir -p "$d"
    echo 'from ray import __getattr__, _Dummy  # noqa' > "$d/__init__.py"
  done
  export PYTHONPATH="$STUB${PYTHONPATH:+:$PYTHONPATH}"
  echo "[gpu_smoke] STUBBED: ray (import-only stub at $STUB/ray; no Ray wheel on this machine)"
fi

echo "[gpu_smoke] 1/2 embedded backend on CUDA, model.size=medium, budget=smoke"
timeout 300 $PY -c "import sys; from arena.cli import main; sys.exit(main(sys.argv[1:]))" \
  train device=cuda budget=smoke model.size=medium wandb.enabled=false out="$OUT/smoke_run" \
  && echo "[gpu_smoke] train OK: $(cat "$OUT/smoke_run/summary.json" 2>/dev/null | head -c 400)" \
  || echo "[gpu_smoke] train FAILED (rc=$?)"

echo "[gpu_smoke] 2/2 loss timing: arena policy_loss vs verl compute_policy_loss_vanilla"
timeout 120 $PY - <<'PYEOF'
import torch
from arena.po.compose import ResolvedPO, policy_loss
from arena.po.aggregation import AggNorm
dev = "cuda"
B, T = 64, 1024
g = torch.Generator(device=dev).manual_seed(0)
old = -torch.rand(B, T, device=dev, generator=g)  # [B, T]
logp0 = old + 0.1 * torch.randn(B, T, device=dev, generator=g)  # [B, T]
adv = torch.randn(B, 1, device=dev, generator=g).expand(B, T).contiguous()  # [B, T]
mask = (torch.rand(B, T, device=dev, generator=g) < 0.8).float()  # [B, T]
po = ResolvedPO(None, None, "token_mean", "ppo", None, "none", "grpo", "global", {"eps_low": 0.2, "eps_high": 0.2, "clip_c": 3.0})

def timed(fn, n=50):
    for _ in range(5):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize(); start.record()
    for _ in range(n):
        fn()
    end.record(); torch.cuda.synchronize()
    return start.elapsed_time(end) / n

def ours():
    logp = logp0.clone().requires_grad_(True)
    loss, _ = policy_loss(po, logp, old, adv, mask, norm=AggNorm.of(mask))
    loss.backward()
    return loss
print(f"[gpu_smoke] arena policy_loss fwd+bwd: {timed(ours):.3f} ms  (B={B}, T={T})")
try:
    from verl.trainer.ppo.core_algos import compute_policy_loss_vanilla
    from verl.workers.config import ActorConfig
    cfg = ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=B)
    def theirs():
        logp = logp0.clone().requires_grad_(True)
        loss, _ = compute_policy_loss_vanilla(old, logp, adv, mask.bool(), "token-mean", cfg)
        loss.backward()
        return loss
    print(f"[gpu_smoke] verl vanilla      fwd+bwd: {timed(theirs):.3f} ms")
    print(f"[gpu_smoke] values: arena {ours().item():.8f}  verl {theirs().item():.8f}")
except Exception as exc:  # verl missing or not importable on this machine
    print(f"[gpu_smoke] verl timing SKIPPED: {type(exc).__name__}: {exc}")
PYEOF
echo "[gpu_smoke] done"
