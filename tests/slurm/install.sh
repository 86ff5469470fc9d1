#!/usr/bin/env bash
# Install a single-node SLURM 22.05 (+ munge, slurmdbd, MariaDB for `sacct`) from Debian's apt.
# Idempotent and quiet: returns at once when every package is already installed.
# Run as root (CI runs it before the slow stage). Non-root or apt-less machines: exits 0 doing
# nothing, and the SLURM tests skip with the reason.
set -euo pipefail
PKGS="slurmctld slurmd slurm-client munge slurmdbd mariadb-server"
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "tests/slurm/install.sh: needs root and apt-get; skipping (SLURM tests will skip)"; exit 0
fi
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
export DEBIAN_FRONTEND=noninteractive
t0=$(date +%s)
apt-get update -qq
# Postinst scripts do not start daemons in a container (policy-rc.d); tests/slurm/up.sh starts them.
if ! log=$(apt-get install -y -qq --no-install-recommends $missing 2>&1); then
  echo "$log"; exit 1
fi
echo "tests/slurm/install.sh: installed$missing in $(( $(date +%s) - t0 ))s"
