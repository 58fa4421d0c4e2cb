#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for the tests of `iket run --executor slurm`
# (.ci/run calls it; docs/ci.md says what the Slurm executor needs of a cluster).
#   bash scripts/slurm_local.sh install   # Debian's slurmctld, slurmd, slurm-client, munge (root)
#   bash scripts/slurm_local.sh start     # munge key, slurm.conf, both daemons; waits for `sinfo`
#   bash scripts/slurm_local.sh stop      # both daemons and munged, by their pid files
# With SLURM_PREFIX set (packages unpacked there with dpkg -x: the GPU machine, scripts/gpu_slurm.sh)
# the binaries and plugins come from that prefix and slurm.conf goes to $SLURM_PREFIX/etc/slurm
# (export SLURM_CONF to it for the clients); SLURM_GPUS=N gives the node N GPUs (gres).
# The node has no GPUs; it offers 4x the machine's CPUs (the tests' jobs mostly sleep), and
# Slurm ends a job at its time limit without slack (OverTimeLimit=0) so that a test of a job past
# its limit takes about a minute, not three; KillWait is Slurm's default 30 s (iket in a job
# stopped by SIGTERM has that long to keep its evidence before SIGKILL: under load it can take
# more than a few seconds).
set -euo pipefail
action=${1:-start}
prefix=${SLURM_PREFIX:-}
gpus=${SLURM_GPUS:-0}
conf=$prefix/etc/slurm/slurm.conf
host=$(hostname -s)
sbin=$prefix/usr/sbin

install() {
  [[ -n $prefix ]] && return 0  # unpacked by the caller
  command -v slurmctld >/dev/null && command -v munged >/dev/null && return 0
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurmctld slurmd slurm-client munge >/dev/null
}

start_munge() {
  mkdir -p /etc/munge /run/munge /var/log/munge /var/lib/munge
  if [[ ! -s /etc/munge/munge.key ]]; then
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  fi
  local owner=munge
  [[ -n $prefix ]] && owner=root  # the unpacked munged runs as root
  chown -R "$owner": /etc/munge /run/munge /var/log/munge /var/lib/munge
  chmod 700 /etc/munge && chmod 400 /etc/munge/munge.key
  if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    if [[ -n $prefix ]]; then "$sbin/munged" --force; else runuser -u munge -- /usr/sbin/munged --force; fi
  fi
  munge -n | unmunge | grep -q "Success" || { echo "munge does not answer" >&2; return 1; }
}

write_conf() {
  local cpus memory
  cpus=$(( $(nproc) * 4 ))
  memory=$(( $(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo) * 3 / 4 ))
  mkdir -p "$(dirname "$conf")" /var/spool/slurmctld /var/spool/slurmd /run/slurm /var/log/slurm
  local extra="" gres=""
  if [[ -n $prefix ]]; then extra="PluginDir=$prefix/usr/lib/x86_64-linux-gnu/slurm-wlm"; fi
  if (( gpus > 0 )); then
    extra="$extra"$'\n'"GresTypes=gpu"
    gres=" Gres=gpu:$gpus"
    for i in $(seq 0 $((gpus - 1))); do echo "NodeName=$host Name=gpu File=/dev/nvidia$i"; done >"$(dirname "$conf")/gres.conf"
  fi
  cat >"$conf" <<EOF
ClusterName=iket-ci
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=600
KillWait=30
OverTimeLimit=0
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
$extra
NodeName=$host CPUs=$cpus RealMemory=$memory$gres State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

stop() {
  for pid_file in /run/slurm/slurmd.pid /run/slurm/slurmctld.pid; do
    [[ -s $pid_file ]] && kill "$(cat "$pid_file")" 2>/dev/null || true
  done
  sleep 1
}

start() {
  install
  start_munge
  stop
  write_conf
  if [[ -x $sbin/slurmctld ]]; then "$sbin/slurmctld"; else "$sbin/slurmctld-wlm"; fi
  if [[ -x $sbin/slurmd ]]; then "$sbin/slurmd"; else "$sbin/slurmd-wlm"; fi
  for _ in $(seq 60); do
    if sinfo -h -o "%t" 2>/dev/null | grep -qE "^(idle|mix|alloc)"; then
      sinfo
      return 0
    fi
    sleep 0.5
  done
  echo "the Slurm node did not come up:" >&2
  sinfo >&2 || true
  tail -5 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
  return 1
}

stop_all() {  # the Slurm daemons, then munged (its pid file, else the process by name)
  stop
  if [[ -s /run/munge/munged.pid ]]; then
    kill "$(cat /run/munge/munged.pid)" 2>/dev/null || true
  else
    pkill -x munged 2>/dev/null || true
  fi
}

case $action in
  install) install ;;
  start) start ;;
  stop) stop_all ;;
  *) echo "usage: $0 install|start|stop" >&2; exit 2 ;;
esac
