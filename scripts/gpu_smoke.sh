#!/usr/bin/env bash
# The first contact with a GPU node (docs/verl.md, First GPU run): checks the driver, torch,
# vLLM, flash-attn and Ray, then trains 2 steps of a 1.5B model on Sokoban through verl and
# vLLM, and prints what it saw. Usage:
#   scripts/gpu_smoke.sh MODEL_DIR [key=value ...]
# MODEL_DIR: a local Qwen2.5-1.5B-Instruct folder (huggingface-cli download
# Qwen/Qwen2.5-1.5B-Instruct --local-dir MODEL_DIR); extra keys go to `arena train`.
# Exit 0: both steps ran; 1: a check or the run failed (the reason is printed).
set -uo pipefail

MODEL_DIR=${1:?usage: scripts/gpu_smoke.sh MODEL_DIR [key=value ...]}
shift
PYTHON=${PYTHON:-python}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/arena-gpu-smoke.XXXXXX")}
failed=0

check() {  # check NAME PYTHON-CODE: print what the code prints, or its error
    local name=$1 code=$2 out
    if out=$("$PYTHON" -c "$code" 2>&1); then
        printf '  ok    %-10s %s\n' "$name" "$(tail -n 1 <<<"$out")"
    else
        printf '  FAIL  %-10s %s\n' "$name" "$(tail -n 1 <<<"$out")"
        failed=1
    fi
}

echo "== driver"
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | sed 's/^/  /'
else
    echo "  FAIL  nvidia-smi not found: no NVIDIA driver on this node"
    failed=1
fi
echo "== packages"
# torch.cuda's own error names a driver too old for torch's CUDA build
check torch "import torch; torch.cuda.init(); print(torch.__version__, 'CUDA', torch.version.cuda, 'GPUs', torch.cuda.device_count())"
check vllm "import vllm; print(vllm.__version__)"
check flash-attn "import flash_attn; print(flash_attn.__version__)"
check ray "import ray; print(ray.__version__)"
check verl "import verl; print(verl.__version__)"
if (( failed )); then
    echo "a check failed: docs/verl.md, Install, says what each CUDA major needs"
    exit 1
fi

echo "== 2 steps of Qwen2.5-1.5B on Sokoban (run folder $OUT/run)"
export WANDB_MODE=disabled
"$PYTHON" -m arena.cli train model=qwen2.5-1.5b "model.path=$MODEL_DIR" env=sokoban budget=smoke steps=2 batch_envs=8 \
    save_freq=2 test_freq=2 eval.n=16 "out=$OUT/run" "results_dir=$OUT" "$@"
status=$?
echo "== what the run saw"
if [[ -f "$OUT/run/metrics.jsonl" ]]; then
    "$PYTHON" - "$OUT/run/metrics.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    row = json.loads(line)
    keys = [k for k in ("step", "eval/success_rate", "train/success_rate", "rollout/format_valid_ratio",
                        "actor/pg_loss", "actor/grad_norm", "response_length/mean", "prompt_length/mean",
                        "perf/time_per_step", "timing_s/gen", "timing_s/update_actor") if k in row]
    print("  " + "  ".join(f"{k}={row[k]:.4g}" if isinstance(row[k], float) else f"{k}={row[k]}" for k in keys))
PY
fi
[[ -f "$OUT/run/error.txt" ]] && tail -n 20 "$OUT/run/error.txt"
echo "exit $status; run folder $OUT/run"
exit $(( status == 0 ? 0 : 1 ))
