#!/usr/bin/env bash
# Issue 51's check, then issue 52's on the GPU: windows in a live process, --window, --one-pass.
#   source .gpu/gpu-env.sh; PARTS="51 api model seed" bash scripts/gpu_issue52.sh   (carry .gpu)
# Each part prints a short table or one line per case; logs go to $OUT/gpu-issue52.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/iket-gpu-out}; w=/tmp/iket-window; rm -rf "$w"; mkdir -p "$w" "$out"
export PYTHONPATH=$PWD/examples:$PWD/tests/fixtures/workloads:$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
parts=" ${PARTS:-51 api model seed} "
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [[ $parts == *" 51 "* ]]; then
  timeout 300 bash scripts/gpu_completeness.sh 2>&1 | tail -30
  python3 scripts/perfetto_identity.py /tmp/iket-completeness/*/ 2>&1 | tail -12
fi
if [[ $parts == *" api "* ]]; then
  for case in seed budget; do
    timeout 120 python3 scripts/gpu_window.py "$w" $case > "$w/$case.out" 2> "$w/$case.err"; echo "window api $case: exit $?"
    grep '^{' "$w/$case.out" | cut -c1-700; echo "  injection lines on the console: $(cat "$w/$case.out" "$w/$case.err" | grep -c IketInjectionManager)"
    tail -2 "$w/$case.err"
  done
  timeout 200 python3 -m iket_cli profile examples/profile_affine.py:workload -o "$w/runiket_seed" --clobber -q 2> "$w/runiket_seed.err"
  echo "two-pass seed: exit $?"
  python3 scripts/perfetto_identity.py "$w/runiket_seed" | tail -1
  python3 - "$w" <<'PY'
import sys; from pathlib import Path; from collections import Counter
sys.path.insert(0, "."); from scripts.perfetto_identity import events
w = Path(sys.argv[1])
def shape(folder):
    (p,) = [p for p in Path(folder).glob("iket_pid_*.pftrace") if ".flows." not in p.name]
    said = lambda rest: {n: v for n, _, v in rest}  # (field, wire type, value) triples
    return Counter((tuple(n[0].decode()[:3] for n in path), said(rest).get(23), said(rest).get(9))
                   for (ts, path, rest), c in events(p.read_bytes()).items() for _ in range(c))
a, b = shape(w / "w_seed"), shape(w / "runiket_seed")
print("window's Perfetto vs the two-pass capture's (tracks by kind, slice names, types):", "same" if a == b else f"differ: {a - b} / {b - a}")
PY
fi
if [[ $parts == *" model "* ]]; then
  timeout 200 python3 scripts/gpu_window.py "$w" model --window 3 > "$w/model3.out" 2> "$w/model3.err"; echo "model api window 3: exit $?"
  grep '^{' "$w/model3.out" | cut -c1-900; tail -2 "$w/model3.err"
  timeout 300 python3 bench/bench_window.py --case model --runs ${RUNS:-2} --json "$w/bench_model.json" 2>&1 | tail -14
fi
if [[ $parts == *" seed "* ]]; then
  timeout 300 python3 bench/bench_window.py --case seed --runs ${RUNS:-3} --json "$w/bench_seed.json" 2>&1 | tail -14
fi
if [[ $parts == *" big "* ]]; then
  timeout 500 python3 bench/bench_window.py --case big --runs ${RUNS:-1} --json "$w/bench_big.json" 2>&1 | tail -10
fi
echo "GPU compute apps left: [$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | tr '\n' ' ')]"
tar cJf "$out/gpu-issue52.tar.xz" -C "$w" --exclude='*.pftrace*' --exclude='*.html' . 2>/dev/null
[[ -d /tmp/iket-completeness ]] && cp /tmp/iket-gpu-out/gpu-completeness.tar.xz "$out/" 2>/dev/null
true
