#!/usr/bin/env bash
# Issue 20 on the GPU machine: a one-node Slurm with the H200 as a gres GPU, from Debian's
# packages carried in .slurmdeb/ (unpacked with dpkg -x under /opt/iket-slurm, not over /),
# then `iket run --executor slurm` of one real TIRx capture through it. On the H200 machine
# (Ubuntu 24.04, 2026-12-03) the gres did not register (the node shows no gpu gres), so the
# job runs with gpus = 0 on that node, which still sees its GPU (no cgroup confines it).
#   source .gpu/gpu-env.sh; bash scripts/gpu_slurm.sh        (carry .gpu, .whl and .slurmdeb)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/iket-gpu-out}
mkdir -p "$out"
prefix=/opt/iket-slurm
mkdir -p "$prefix"
for deb in .slurmdeb/*.deb; do dpkg -x "$deb" "$prefix"; done
lib=$prefix/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/slurm-wlm:$prefix/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$prefix/usr/bin:$prefix/usr/sbin:$PATH SLURM_CONF=$prefix/etc/slurm/slurm.conf
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
# slurmd starts each job's slurmstepd from the path it was built with
[[ -e /usr/sbin/slurmstepd ]] || ln -s "$prefix/usr/sbin/slurmstepd-wlm" /usr/sbin/slurmstepd
echo "== one-node Slurm with $(nvidia-smi -L | wc -l) GPU(s)"
SLURM_PREFIX=$prefix SLURM_GPUS=1 bash scripts/slurm_local.sh start 2>&1 | tail -8
sinfo -N -o "%N %c %G %t"
gpus=1
if ! sinfo -h -N -o "%G" | grep -q gpu; then  # the gres did not register: say why, run without it
  echo "the node has no gpu gres; slurmctld says:"; grep -i -E "gres|error" /var/log/slurm/slurmctld.log | tail -8
  ldd "$lib/slurm-wlm/gres_gpu.so" | grep "not found"
  gpus=0
fi
echo "== iket doctor (Slurm line)"; python3 -m iket_cli doctor 2>&1 | grep -i slurm
work=/tmp/iket-slurm-work
rm -rf "$work" && mkdir -p "$work"
cat >"$work/iket.toml" <<EOF
output = "runs"
postprocess = "all"
executor = "slurm"
[slurm]
gpus = $gpus
time = 10
poll = 2
[[jobs]]
name = "two_stage"
target = "$PWD/examples/two_stage.py"
EOF
echo "== iket run --executor slurm"
(cd "$work" && python3 -m iket_cli run --junit junit.xml --summary summary.md) 2>&1 | tail -20
echo "rc=$?"
python3 - "$work/runs/run-manifest.json" <<'EOF'
import json, sys
record = json.load(open(sys.argv[1]))
for job in record["jobs"]:
    s = job["slurm"] or {}
    print(f"{job['name']}: {job['status']} gpu={job['gpu']} slurm={s.get('job_id')} {s.get('state')} "
          f"node={s.get('node')} queued={s.get('queued_s')} s run={s.get('run_s')} s")
EOF
python3 -m iket_cli show "$work/runs/two_stage" 2>&1 | head -12
cp "$work/runs/run-manifest.json" "$out/slurm-run-manifest.json"
cp "$work/summary.md" "$out/slurm-summary.md"
cp "$work/runs/.iket-slurm/two_stage.log" "$out/slurm-two_stage.log" 2>/dev/null
nvidia-smi --query-compute-apps=pid --format=csv,noheader
SLURM_PREFIX=$prefix bash scripts/slurm_local.sh stop
