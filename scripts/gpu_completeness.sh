#!/usr/bin/env bash
# Issue 51 on the GPU, through iket: each way IKET loses data is said (INCOMPLETE, the kernel,
# the fix; show, lint, the manifest and --strict agree), and whole captures raise no alarm.
#   source .gpu/gpu-env.sh; bash scripts/gpu_completeness.sh        (the device tool; carry .gpu)
# Prints one line per case; the logs go to $OUT/gpu-completeness.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/iket-gpu-out}
keep=/tmp/iket-completeness
rm -rf "$keep"; mkdir -p "$keep" "$out"
export PYTHONPATH=$PWD/examples:$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$keep/gpu.txt"
cp tests/fixtures/workloads/big_kernel.py examples/big_kernel.py 2>/dev/null
case_() {  # name, options, target: exit, completeness, what show and lint say, the console's leaks
  local name=$1 opts=$2 target=$3 start
  start=$(date +%s.%N)
  timeout 240 python3 -m iket_cli profile $opts $target -o "$keep/$name" --postprocess all \
    > "$keep/$name.out" 2> "$keep/$name.err"
  local code=$? took
  took=$(python3 -c "import time; print(round(time.time() - $start, 1))")
  python3 -m iket_cli show "$keep/$name" > "$keep/$name.show" 2> "$keep/$name.show.err"
  python3 -m iket_cli lint "$keep/$name" > "$keep/$name.lint" 2>&1
  python3 - "$keep" "$name" "$code" "$took" <<'EOF'
import json, re, sys
keep, name, code, took = sys.argv[1:]
record = json.load(open(f"{keep}/{name}/manifest.json")) if code in ("0", "1") else {}
c = record.get("completeness") or {}
err = open(f"{keep}/{name}.err").read()
show = open(f"{keep}/{name}.show").read()
lint = open(f"{keep}/{name}.lint").read()
said = next((l for l in err.splitlines() if "INCOMPLETE:" in l and "warning" not in l), "")
launches = sum(p.get("launches") or 0 for p in record.get("processes", []))
print(f"{name}: exit {code} in {took} s; complete {c.get('complete')}; launches {launches}; "
      f"losses {[(l['cause'], l['short'], l['launches'], l['needed']) for l in c.get('losses', [])]}; "
      f"show banner {show.startswith('INCOMPLETE')}; lint {sorted(set(re.findall(r'\[([a-z-]+)\]', lint)))}; "
      f"injection lines on the console {err.count('[IketInjectionManager]')}; "
      f"unchecked {[u['source'] for u in c.get('unchecked', [])]}")
if said:
    print("   ", said[:260])
EOF
}
case_ budget1 "--max-ts-cnt-per-warp 1" examples/profile_affine.py:workload
case_ multi3 "--max-ts-cnt-per-warp 3" examples/multi_kernel.py:workload
case_ graph "" examples/graph_affine.py:workload
case_ whole_multi "" examples/multi_kernel.py:workload
[[ -n ${MORE:-} ]] && case_ whole_two_stage "" examples/two_stage.py:workload
[[ -n ${MORE:-} ]] && case_ whole_spawner "" examples/spawner.py
export ITERS=64 LAUNCHES=3
case_ whole_big64 "" examples/big_kernel.py:workload
unset ITERS LAUNCHES
case_ model_step_extract "--extract model_tirx_kernel:affine --calls 3" examples/model_step.py
start=$(date +%s.%N)
timeout 150 python3 -m iket_cli profile --max-ts-cnt-per-warp 3 --strict --tracker fresh examples/multi_kernel.py:workload \
  -o "$keep/strict" > "$keep/strict.out" 2> "$keep/strict.err"
echo "strict multi3: exit $? in $(python3 -c "import time; print(round(time.time() - $start, 1))") s; workload runs $(grep -c 'multi_kernel ok' "$keep/strict.out")"
grep -E "^iket: error" "$keep/strict.err" | cut -c1-240
echo "GPU compute apps left: [$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | tr '\n' ' ')]"
tar cJf "$out/gpu-completeness.tar.xz" -C "$keep" --exclude='*.pftrace*' --exclude='*.html' --exclude='*.trace.json' \
  --exclude='*/iket' --exclude='*/tracker' --exclude='*.cubin' --exclude='*/extract' .
