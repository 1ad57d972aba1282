#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for the Slurm tier (test/job-slurm.test.ts, docs/job.md "Under Slurm").
#   scripts/slurm-localhost.sh start DIR   writes DIR/slurm.conf, starts slurmctld and slurmd (as root), waits
#                                          until the node takes jobs, prints `SLURM_CONF=DIR/slurm.conf`
#   scripts/slurm-localhost.sh stop DIR    stops both daemons (by their pid files in DIR)
# Nothing under /etc/slurm is read or written: srun, sinfo, ... find the cluster through SLURM_CONF.
# Needs Debian's slurm-wlm (22.05: slurmctld, slurmd, srun). Authentication is auth/none with cred/none (the
# plugins slurm-wlm-basic-plugins ships): no munged to start, which is fine for one node where root runs everything
# and nothing listens beyond this machine (SlurmctldHost is this host; the ports are taken from SLURM_LOCAL_PORT).
# Slurm's own requirements on a machine like this (2 cores, no cgroup delegation, root):
#   ProctrackType=proctrack/linuxproc  proctrack/cgroup (the default) needs a cgroup hierarchy slurmd can manage
#   TaskPlugin=task/none               task/affinity binds each task to a core: more tasks than cores fail
#   srun -O (--overcommit)             for more tasks than the node's CPUs (srun -n 4 on 2 cores)
set -euo pipefail

cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
  echo "usage: $0 start|stop DIR" >&2
  exit 2
fi

stop() {
  for daemon in slurmd slurmctld; do
    local pidfile="$dir/$daemon.pid"
    [ -f "$pidfile" ] || continue
    local pid
    pid=$(cat "$pidfile")
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
  done
}

if [ "$cmd" = stop ]; then
  stop
  exit 0
fi
if [ "$cmd" != start ]; then
  echo "usage: $0 start|stop DIR" >&2
  exit 2
fi

for tool in slurmctld slurmd srun sinfo; do
  command -v "$tool" >/dev/null 2>&1 || { echo "$tool not found: apt-get install slurm-wlm" >&2; exit 3; }
done
if [ "$(id -u)" -ne 0 ]; then
  echo "slurmd must run as root (it starts the tasks as the job's user)" >&2
  exit 3
fi

mkdir -p "$dir/state" "$dir/spool"
dir=$(cd "$dir" && pwd)
host=$(hostname -s)
# At least 4 CPUs declared (SlurmdParameters=config_overrides keeps slurmd from draining a node that has fewer),
# so that the README's `srun --mpi=pmi2 -n 4 ...` runs as written on a 2-core machine instead of waiting for
# CPUs that never come; on a real cluster `srun -O` (--overcommit) is the way to run more tasks than CPUs.
cpus=$(nproc)
[ "$cpus" -ge 4 ] || cpus=4
port=${SLURM_LOCAL_PORT:-6817}
# slurmd's port: the next one. Steps use a range of their own (srun's and slurmstepd's listening sockets).
cat >"$dir/slurm.conf" <<EOF
# Written by scripts/slurm-localhost.sh: a one-node cluster on $host for netdirect's Slurm tier.
ClusterName=netdirect
SlurmctldHost=$host(127.0.0.1)
SlurmdParameters=config_overrides
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF

export SLURM_CONF="$dir/slurm.conf"
stop # daemons of an earlier start in the same DIR
# -c: a clean start (no jobs or nodes from an earlier state directory); -i: ignore state that cannot be read.
slurmctld -c -i -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"

# Wait until the node is idle (slurmd registered with slurmctld), at most 60 s.
for _ in $(seq 1 120); do
  state=$(sinfo -h -N -o '%t' 2>/dev/null | head -n1 || true)
  case "$state" in
    idle*|mix*|alloc*) echo "SLURM_CONF=$SLURM_CONF"; exit 0 ;;
  esac
  sleep 0.5
done
echo "the Slurm node did not become idle within 60 s (state: ${state:-none}); logs:" >&2
tail -n 20 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
stop
exit 1
