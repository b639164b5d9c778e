#!/usr/bin/env bash
# Install Debian's Slurm (slurm-wlm: slurmctld + slurmd + client) and munge when missing.
# Exit 0: everything present. Exit 3: cannot install here (reason on stderr) -> callers skip.
set -u
need=(slurmctld slurmd srun sbatch squeue scontrol sinfo munged munge)
missing() { for b in "${need[@]}"; do command -v "$b" >/dev/null 2>&1 || PATH="$PATH:/usr/sbin:/sbin" command -v "$b" >/dev/null 2>&1 || return 0; done; return 1; }
if ! missing; then exit 0; fi
if [ "$(id -u)" != 0 ]; then echo "slurm/munge missing and not root: cannot apt-get install" >&2; exit 3; fi
if ! command -v apt-get >/dev/null 2>&1; then echo "slurm/munge missing and no apt-get on this machine" >&2; exit 3; fi
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
if ! timeout 180 apt-get install -y --no-install-recommends slurm-wlm slurm-client munge >"$log" 2>&1; then
    # the package lists may be missing or stale: refresh once and retry
    if ! timeout 180 apt-get update >>"$log" 2>&1 \
        || ! timeout 300 apt-get install -y --no-install-recommends slurm-wlm slurm-client munge >>"$log" 2>&1; then
        echo "apt-get install slurm-wlm munge failed (no network or repository?): $(tail -n 1 "$log")" >&2
        rm -f "$log"; exit 3
    fi
fi
rm -f "$log"
if missing; then echo "installed slurm-wlm/munge but a binary is still missing" >&2; exit 3; fi
exit 0
