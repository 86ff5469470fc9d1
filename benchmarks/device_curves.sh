#!/usr/bin/env bash
# How the curves of docs/log/2026-11-30-method-curves-on-the-calibrated-default.md were made on a 16-core device machine (the testbed task "also
# report"): the gpu-marked tests first, then `sweeps/grids/testbed_curves.yaml` x 3 seeds at
# budget=default, 16 one-thread cells at a time, with the calibrated BC checkpoint carried in
# results/bc/. Everything under results/sweeps comes back as curves.tgz, finished or not (a
# cell cut off by the deadline keeps its metrics rows so far).
#   usage (from a checkout copy): DEADLINE_S=560 bash benchmarks/device_curves.sh
set -u
T0=$(date +%s)
OUT=${OUT:-$(mktemp -d)}
WHL=${WHL:-../.whl}
if ls "$WHL"/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHL"/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nproc; python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))"
timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/embedded/test_cuda.py tests/embedded/test_sampler.py 2>&1 | tail -4
LEFT=$(( ${DEADLINE_S:-560} - ($(date +%s) - T0) ))
echo "sweep deadline: $LEFT s"
ARENA_MAX_PARALLEL=${ARENA_MAX_PARALLEL:-16} timeout $LEFT python3 -m arena.cli sweep grid=$PWD/sweeps/grids/testbed_curves.yaml \
  seeds=3 budget=default results_dir=$PWD/results wandb.enabled=false progress_s=60 2>&1 | grep -v "Loading weights\|Writing model" | tail -60
echo "sweep ended after $(( $(date +%s) - T0 )) s; summaries: $(find results/sweeps -name summary.json | wc -l)"
tar czf "$OUT/curves.tgz" results/sweeps
