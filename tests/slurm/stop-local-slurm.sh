#!/usr/bin/env bash
# Stop what start-local-slurm.sh STATE_DIR started, by the PIDs it recorded, and remove
# its symlink at Slurm's default config path.
#
#   stop-local-slurm.sh STATE_DIR
#
# Jobs still queued or running on the private cluster are cancelled first (their
# slurmstepd processes belong to the slurmd we stop). Each PID is signalled only while
# /proc/PID/cmdline still names the daemon it was recorded for (a reused PID is left
# alone): SIGTERM, up to TC_SLURM_STOP_WAIT_S seconds (default 15), then SIGKILL.
# Safe to run twice, and after a start that failed half-way.
set -u
STATE=${1:?usage: stop-local-slurm.sh STATE_DIR}
[ -d "$STATE" ] || exit 0
STATE=$(cd "$STATE" && pwd)
DEFAULT_CONF=${TC_SLURM_DEFAULT_CONF:-/etc/slurm/slurm.conf}
WAIT_S=${TC_SLURM_STOP_WAIT_S:-15}
export PATH="$PATH:/usr/sbin:/sbin"

ours_conf() { [ "$(readlink "$DEFAULT_CONF" 2>/dev/null)" = "$STATE/slurm.conf" ]; }

if ours_conf && [ -f "$STATE/pids/slurmctld.pid" ]; then
    jobs=$(timeout 10 squeue -h -o %i 2>/dev/null | tr '\n' ' ')
    if [ -n "${jobs// /}" ]; then
        # shellcheck disable=SC2086
        timeout 10 scancel $jobs 2>/dev/null
        for _ in $(seq 1 50); do [ -z "$(timeout 5 squeue -h -t R,CG -o %i 2>/dev/null)" ] && break; sleep 0.2; done
    fi
fi

stop_pid() {  # NAME (pid file STATE/pids/NAME.pid) EXPECTED_COMMAND
    local file="$STATE/pids/$1.pid" want=$2 pid
    [ -f "$file" ] || return 0
    pid=$(cat "$file")
    is_it() { [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "$want"; }
    if is_it; then
        kill -TERM "$pid" 2>/dev/null
        for _ in $(seq 1 $((WAIT_S * 10))); do is_it || break; sleep 0.1; done
        if is_it; then kill -KILL "$pid" 2>/dev/null; sleep 0.2; fi
    fi
    # a child the shell never reaped shows as a zombie until its parent goes; gone either way
    rm -f "$file"
}
stop_pid slurmd-n1 slurmd
stop_pid slurmd-n2 slurmd
stop_pid slurmctld slurmctld
stop_pid munged munged
if ours_conf; then rm -f "$DEFAULT_CONF"; fi
exit 0
