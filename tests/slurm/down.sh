#!/usr/bin/env bash
# Stop the test cluster started by tests/slurm/up.sh: only the PIDs it recorded under
# $ARENA_SLURM_BASE/run (slurmd+slurmctld, then slurmdbd, then MariaDB+munge).
BASE=${ARENA_SLURM_BASE:-/tmp/arena-slurm}
stop() {  # TERM the recorded pids, wait up to 10 s, then KILL what is left
  local pids=() f p
  for f in "$@"; do
    [ -s "$BASE/run/$f" ] && pids+=("$(cat "$BASE/run/$f")") && rm -f "$BASE/run/$f"
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  kill -TERM "${pids[@]}" 2>/dev/null
  for _ in $(seq 100); do
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && break; p=""; done
    [ -z "$p" ] && return 0
    sleep 0.1
  done
  echo "down.sh: pids ${pids[*]} ignored TERM for 10 s, sending KILL"; kill -KILL "${pids[@]}" 2>/dev/null
}
if [ -s "$BASE/run/slurmctld.fg.pid" ]; then
  scancel --user="$(id -un)" 2>/dev/null   # the cluster is ours: cancel our leftover test jobs
fi
stop slurmd.fg.pid slurmctld.fg.pid
stop slurmdbd.fg.pid
stop mariadbd.fg.pid munged.pid
exit 0
