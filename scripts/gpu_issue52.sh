#!/usr/bin/env bash
# Issue 51's check, then issue 52's: windows in a live process, against run-iket captures.
#   source .gpu/gpu-env.sh; bash scripts/gpu_issue52.sh      (the device tool; carry .gpu)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/iket-gpu-out}; w=/tmp/iket-window; rm -rf "$w"; mkdir -p "$w" "$out"
export PYTHONPATH=$PWD/examples:$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
[[ -z ${SKIP51:-} ]] && timeout 300 bash scripts/gpu_completeness.sh 2>&1 | tail -30
[[ -z ${SKIP51:-} ]] && python3 scripts/perfetto_identity.py /tmp/iket-completeness/*/ 2>&1 | tail -12
for case in seed budget; do
  timeout 120 python3 scripts/gpu_window.py "$w" $case > "$w/$case.out" 2> "$w/$case.err"; echo "window $case: exit $?"
  grep '^{' "$w/$case.out" | cut -c1-900; grep -c IketInjectionManager "$w/$case.out" "$w/$case.err"; tail -3 "$w/$case.err"
done
timeout 200 python3 -m iket_cli profile examples/profile_affine.py:workload -o "$w/runiket_seed" --clobber > /dev/null 2> "$w/runiket_seed.err"
echo "run-iket seed: exit $?"
python3 - "$w" <<'PY'
import sys; from pathlib import Path; from collections import Counter
sys.path.insert(0, "."); from scripts.perfetto_identity import events
w = Path(sys.argv[1])
def shape(folder):
    (p,) = [p for p in Path(folder).glob("iket_pid_*.pftrace") if ".flows." not in p.name]
    return Counter((tuple(n[0].decode()[:4] for n in path), tuple(x[2] for x in rest if x[0] == 23), rest[0][2] if rest else None)
                   for (ts, path, rest), c in events(p.read_bytes()).items() for _ in range(c))
a, b = shape(w / "w_seed"), shape(w / "runiket_seed")
print("perfetto of the window vs run-iket's (tracks by kind, slice names):", "same" if a == b else f"differ: {a - b} / {b - a}")
PY
for k in 3; do
  timeout 200 python3 scripts/gpu_window.py "$w" model --window $k > "$w/model$k.out" 2> "$w/model$k.err"; echo "model window $k: exit $?"
  grep '^{' "$w/model$k.out" | cut -c1-900; tail -3 "$w/model$k.err"
done
timeout 200 python3 scripts/gpu_window.py "$w" model > "$w/model.out" 2> "$w/model.err"; echo "model no window: exit $?"; grep '^{' "$w/model.out" | cut -c1-400
echo "GPU compute apps left: [$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | tr '\n' ' ')]"
tar cJf "$out/gpu-window.tar.xz" -C "$w" --exclude='*.pftrace*' --exclude='*.html' .
