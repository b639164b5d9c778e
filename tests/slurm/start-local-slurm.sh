#!/usr/bin/env bash
# Start a private munge and a two-node Slurm cluster on localhost.
#
#   start-local-slurm.sh STATE_DIR
#
# Everything lives in STATE_DIR (keys, sockets, spool, logs, PID files under
# STATE_DIR/pids/), except one symlink: Slurm's compiled-in default config path
# (/etc/slurm/slurm.conf) -> STATE_DIR/slurm.conf, because the Snakemake SLURM executor's
# in-job helper drops SLURM_CONF before the job's own `srun` runs. An existing config at
# that path that is not ours is never touched (exit 4). Ports: TC_SLURMCTLD_PORT,
# TC_SLURMD1_PORT, TC_SLURMD2_PORT (defaults 16817-16819). Every daemon is started here
# in the foreground mode of its own session, its PID recorded; stop-local-slurm.sh STATE_DIR
# stops exactly those PIDs. Exit codes: 0 cluster up (both nodes idle); 3 cannot run here
# (not root, binaries missing); 4 a foreign config at the default path; 5 a daemon did
# not come up (logs tailed on stderr). On failure, whatever was started stays recorded
# for stop-local-slurm.sh.
set -u
STATE=${1:?usage: start-local-slurm.sh STATE_DIR}
mkdir -p "$STATE" && STATE=$(cd "$STATE" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
DEFAULT_CONF=${TC_SLURM_DEFAULT_CONF:-/etc/slurm/slurm.conf}
CTLD_PORT=${TC_SLURMCTLD_PORT:-16817}
N1_PORT=${TC_SLURMD1_PORT:-16818}
N2_PORT=${TC_SLURMD2_PORT:-16819}
CPUS=${TC_SLURM_CPUS:-4}
WAIT_S=${TC_SLURM_WAIT_S:-30}
export PATH="$PATH:/usr/sbin:/sbin"

fail() { echo "start-local-slurm: $2" >&2; exit "$1"; }
tail_logs() { for f in "$STATE"/log/*.log "$STATE"/munge/munged.log; do [ -f "$f" ] && { echo "== $f" >&2; tail -n 5 "$f" >&2; }; done; }

[ "$(id -u)" = 0 ] || fail 3 "slurmd must run as root (uid $(id -u))"
for b in munged munge unmunge slurmctld slurmd sinfo; do
    command -v "$b" >/dev/null 2>&1 || fail 3 "$b not installed (run install-slurm.sh)"
done
if [ -e "$DEFAULT_CONF" ] || [ -L "$DEFAULT_CONF" ]; then
    if [ "$(readlink "$DEFAULT_CONF" 2>/dev/null)" != "$STATE/slurm.conf" ]; then
        fail 4 "$DEFAULT_CONF exists and is not ours: a real Slurm config is installed here, refusing to replace it"
    fi
fi

mkdir -p "$STATE"/{munge,ctld,run,log,pids}
chmod 755 "$STATE/munge"

# --- munge: own key, socket and PID file ---
if [ ! -f "$STATE/munge/munge.key" ]; then
    dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$STATE/munge/munge.key"
fi
munged --force --key-file="$STATE/munge/munge.key" --socket="$STATE/munge/munge.socket" \
    --pid-file="$STATE/munge/munged.pid" --log-file="$STATE/munge/munged.log" \
    --seed-file="$STATE/munge/munged.seed" || { tail_logs; fail 5 "munged did not start"; }
for _ in $(seq 1 $((WAIT_S * 10))); do [ -s "$STATE/munge/munged.pid" ] && break; sleep 0.1; done
[ -s "$STATE/munge/munged.pid" ] || { tail_logs; fail 5 "munged wrote no PID file"; }
cp "$STATE/munge/munged.pid" "$STATE/pids/munged.pid"
munge -n -S "$STATE/munge/munge.socket" | unmunge -S "$STATE/munge/munge.socket" >/dev/null \
    || { tail_logs; fail 5 "munge credential round trip failed"; }

# --- slurm.conf at the default path (symlink, removed by the stop script) ---
sed -e "s|@STATE@|$STATE|g" -e "s|@CTLD_PORT@|$CTLD_PORT|g" -e "s|@N1_PORT@|$N1_PORT|g" \
    -e "s|@N2_PORT@|$N2_PORT|g" -e "s|@USER@|$(id -un)|g" -e "s|@CPUS@|$CPUS|g" \
    "$HERE/slurm.conf.in" >"$STATE/slurm.conf"
mkdir -p "$(dirname "$DEFAULT_CONF")"
ln -sfn "$STATE/slurm.conf" "$DEFAULT_CONF"

# --- daemons, each in its own session, in the foreground (so $! is the daemon) ---
start() {  # NAME CMD...
    local name=$1; shift
    setsid "$@" </dev/null >>"$STATE/log/$name.out" 2>&1 &
    echo $! >"$STATE/pids/$name.pid"
}
start slurmctld slurmctld -D -f "$STATE/slurm.conf"
for _ in $(seq 1 $((WAIT_S * 10))); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.1; done
scontrol ping 2>/dev/null | grep -q UP || { tail_logs; fail 5 "slurmctld not answering on port $CTLD_PORT"; }
start slurmd-n1 slurmd -D -N n1 -f "$STATE/slurm.conf"
start slurmd-n2 slurmd -D -N n2 -f "$STATE/slurm.conf"
for _ in $(seq 1 $((WAIT_S * 10))); do
    [ "$(sinfo -h -N -o '%N %t' 2>/dev/null | grep -c ' idle$')" = 2 ] && { sinfo -N; exit 0; }
    sleep 0.1
done
sinfo -N >&2
tail_logs
fail 5 "nodes n1 and n2 not idle after ${WAIT_S}s"
