#!/usr/bin/env bash
# Start a single-node SLURM test cluster (slurmctld + slurmd + munge + slurmdbd/MariaDB) as root,
# without systemd. Recipe and pitfalls: the project's SLURM CI notes (copied below as
# comments where they matter). Stop it with tests/slurm/down.sh, which kills only what this
# script started (PIDs under $ARENA_SLURM_BASE/run).
#   ARENA_SLURM_BASE  state/log/pid folder (default /tmp/arena-slurm)
#   ARENA_SLURM_CPUS  CPUs the node declares (default max(nproc, 4); config_overrides allows > nproc)
# Exit codes: 0 ready (or a cluster already answers), 1 a daemon failed, 3 refused to overwrite
# a /etc/slurm config that this script did not write.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BASE=${ARENA_SLURM_BASE:-/tmp/arena-slurm}
NODE=$(hostname -s)
CPUS=${ARENA_SLURM_CPUS:-$(( $(nproc) > 4 ? $(nproc) : 4 ))}
MEM=$(( $(awk '/MemTotal/{print int($2/1024)}' /proc/meminfo) * 90 / 100 ))   # MB, 10% headroom
MARK="arena tests/slurm"
t0=$(date +%s%N)

[ "$(id -u)" = 0 ] || { echo "up.sh: must run as root"; exit 1; }
if scontrol ping 2>/dev/null | grep -q UP; then echo "up.sh: a SLURM controller already answers"; exit 0; fi
bash "$HERE/install.sh"
for f in /etc/slurm/slurm.conf /etc/slurm/slurmdbd.conf; do
  if [ -e "$f" ] && ! grep -q "$MARK" "$f"; then
    echo "up.sh: $f exists and was not written by $MARK; refusing to overwrite it"; exit 3
  fi
done

wait_for() {  # $1 = description, $2 = seconds, rest = command that succeeds when ready
  local what=$1 limit=$2; shift 2
  for _ in $(seq $(( limit * 4 ))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.25; done
  echo "up.sh: $what not ready after ${limit}s; logs in $BASE/log:"; tail -n 20 "$BASE"/log/* 2>/dev/null
  exit 1
}
daemon() {  # $1 = name, rest = command: run detached, pid in $BASE/run/<name>.fg.pid
  local name=$1; shift
  setsid "$@" < /dev/null > "$BASE/log/$name.out" 2>&1 &
  echo $! > "$BASE/run/$name.fg.pid"
}

# A fresh state dir per start (the accounting DB is recreated too: stale rows with reused job
# ids would confuse sacct, pitfall 12).
rm -rf "$BASE/state" "$BASE/spool" "$BASE/run"
mkdir -p "$BASE"/{state,spool,log,run}
getent hosts "$NODE" >/dev/null || echo "127.0.0.1 $NODE" >> /etc/hosts   # slurmd resolves it

# munge: the package's postinst created /etc/munge/munge.key (0600 munge:munge).
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  [ -s /etc/munge/munge.key ] || { mungekey --create --force; chown munge:munge /etc/munge/munge.key; chmod 600 /etc/munge/munge.key; }
  install -d -o munge -g munge -m 0755 /run/munge
  runuser -u munge -- /usr/sbin/munged          # daemonizes; pid in /run/munge/munged.pid
  wait_for munged 10 sh -c 'munge -n | unmunge'
  cp /run/munge/munged.pid "$BASE/run/munged.pid"
fi

# MariaDB (reused if one already answers on the default socket) + a fresh accounting DB.
if ! mariadb -e 'select 1' >/dev/null 2>&1; then
  install -d -o mysql -g mysql /run/mysqld
  daemon mariadbd mariadbd --user=mysql --bind-address=127.0.0.1
  wait_for mariadb 30 mariadb -e 'select 1'
fi
mariadb -e "DROP DATABASE IF EXISTS slurm_acct_db; CREATE DATABASE slurm_acct_db;
            CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmci';
            GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"

mkdir -p /etc/slurm
sed -e "s|@BASE@|$BASE|g" "$HERE/slurmdbd.conf.in" > /etc/slurm/slurmdbd.conf
chmod 600 /etc/slurm/slurmdbd.conf   # slurmdbd refuses a readable conf holding a password
sed -e "s|@BASE@|$BASE|g" -e "s|@NODE@|$NODE|g" -e "s|@CPUS@|$CPUS|g" -e "s|@MEM@|$MEM|g" \
  "$HERE/slurm.conf.in" > /etc/slurm/slurm.conf

daemon slurmdbd slurmdbd -D
wait_for slurmdbd 30 sacctmgr -n show cluster
sacctmgr -i add cluster ci >/dev/null 2>&1 || true   # the cluster must exist in the DB first

daemon slurmctld slurmctld -D -i
wait_for slurmctld 30 sh -c 'scontrol ping | grep -q UP'
daemon slurmd slurmd -D -N "$NODE"
wait_for "node $NODE idle" 30 sh -c '[ "$(sinfo -h -o %T)" = idle ]'
srun -t 1 true
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "up.sh: SLURM ready on $NODE ($CPUS CPUs, ${MEM} MB) in $((ms / 1000)).$(printf '%03d' $((ms % 1000)))s"
