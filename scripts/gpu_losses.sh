#!/usr/bin/env bash
# Issue 51's fixtures: what IKET loses without saying so, recorded on the GPU with raw run-iket
# (--keep: the raw capture, the tracker pass, the injection logs at info) and through iket.
#   source .gpu/gpu-env.sh; bash scripts/gpu_losses.sh        (the device tool; carry .gpu)
# Cases: the seed kernel with --max-ts-cnt-per-warp 1 (it emits 3 a warp); multi_kernel.py with
# 3 (scale_loop emits 12 a warp, copy_kernel 2); graph_affine.py (a kernel in a CUDA graph).
# Also: the seed kernel at the default log level and at info, timed (the log's cost).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/iket-gpu-out}
keep=/tmp/iket-losses
rm -rf "$keep"; mkdir -p "$keep" "$out"
export PYTHONPATH=$PWD/examples:$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$keep/gpu.txt"
raw() {  # name, log level, max ts (or ""), python code
  local name=$1 level=$2 budget=$3 code=$4 start end
  start=$(date +%s.%N)
  run-iket --log-level "$level" --output-dir "$keep/$name" profile --keep --postprocess "${PP:-json}" \
    ${budget:+--max-ts-cnt-per-warp $budget} -- python3 -c "$code" > "$keep/$name.console.txt" 2>&1
  echo "exit $?" >> "$keep/$name.console.txt"
  end=$(date +%s.%N)
  echo "$name: $(tail -1 "$keep/$name.console.txt"), $(python3 -c "print(round($end - $start, 2))") s"
}
AFFINE="import profile_affine as p; p.workload()"
MULTI="import multi_kernel as m; m.workload()"
GRAPH="import graph_affine as g; g.workload()"
raw budget1 info 1 "$AFFINE"
raw multi3 info 3 "$MULTI"
raw graph info "" "$GRAPH"
echo "== iket on the same cases, and on whole ones (exit, completeness, lint)"
for case in "budget1:--max-ts-cnt-per-warp 1:examples/profile_affine.py:workload" \
            "multi3:--max-ts-cnt-per-warp 3:examples/multi_kernel.py:workload" \
            "graph::examples/graph_affine.py:workload" \
            "whole_affine::examples/profile_affine.py:workload" \
            "whole_multi::examples/multi_kernel.py:workload" \
            "whole_two_stage::examples/two_stage.py:workload"; do
  name=${case%%:*}; rest=${case#*:}; opts=${rest%%:*}; target=${rest#*:}
  timeout 150 python3 -m iket_cli profile $opts "$target" -o "$keep/iket_$name" --postprocess all --json \
    > "$keep/iket_$name.json" 2> "$keep/iket_$name.err"
  echo "iket $name: exit $?; $(grep -E "INCOMPLETE|captured" "$keep/iket_$name.err" | head -2 | cut -c1-300)"
  python3 -c "import json,sys; c=json.load(open(sys.argv[1]+'/manifest.json')).get('completeness'); print('  complete:', c and c['complete'], [(l['cause'], l['short'], l['launches'], l['records'], l['needed']) for l in (c or {}).get('losses', [])], 'unchecked:', [u['source'] for u in (c or {}).get('unchecked', [])])" "$keep/iket_$name"
  python3 -m iket_cli show "$keep/iket_$name" > "$keep/iket_$name.show.txt" 2>&1; echo "  show: exit $?"
  python3 -m iket_cli lint "$keep/iket_$name" > "$keep/iket_$name.lint.txt" 2>&1; echo "  lint: exit $? $(grep -oE "\[[a-z-]+\]" "$keep/iket_$name.lint.txt" | sort | uniq -c | tr '\n' ' ')"
done
start=$(date +%s.%N)
timeout 150 python3 -m iket_cli profile --max-ts-cnt-per-warp 3 --strict --tracker fresh examples/multi_kernel.py:workload \
  -o "$keep/iket_strict" > /dev/null 2> "$keep/iket_strict.err"
echo "iket --strict multi3: exit $? in $(python3 -c "import time; print(round(time.time() - $start, 1))") s; $(grep -c 'multi_kernel ok' "$keep/iket_strict.failed/iket.log" 2>/dev/null) workload run(s) finished"
tail -3 "$keep/iket_strict.err" | cut -c1-300
echo "== what the injection logs say"
for f in "$keep"/*/iket/pid_*/iket.injection.log; do echo "-- $f"; grep -vE "^\s*$" "$f" | cut -c1-220 | tail -6; done
grep -h "IKET profiling operation failed" "$keep"/graph*.console.txt | head -3
for t in "$keep"/budget1/iket_pid_*.trace.json "$keep"/multi3/iket_pid_*.trace.json "$keep"/graph/iket_pid_*.trace.json; do
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[1].split('/')[-2], [(l['kernelName'][:30], len(l['ranges']), len(l['markers'])) for l in d['launches']], 'graphLaunches', d.get('graphLaunches'))" "$t"
done
echo "== the in-process session (no run-iket): what it says when it loses data"
for probe in "s_budget1:--budget 1" "s_multi3:--multi --budget 3" "s_graph:--graph" "s_plain:" "s_plain_warn:--log 1"; do
  name=${probe%%:*}
  timeout 120 python3 scripts/gpu_session_probe.py "$keep/$name.trace.json" ${probe#*:} \
    > "$keep/$name.out.txt" 2> "$keep/$name.err.txt"; echo "$name: exit $? $(tail -1 "$keep/$name.out.txt" | cut -c1-400)"
  grep -ciE "warn|error|incomplete|dropped|graph" "$keep/$name.err.txt"
done
tar cJf "$out/gpu-losses.tar.xz" -C "$keep" --exclude='*.pftrace*' --exclude='*.html' --exclude='*.cubin' .
echo "== the injection log's cost: the seed kernel and big_kernel (ITERS=256, 2 launches), error/warn/info in turn"
for round in 1 2; do for level in error warn info; do PP=none raw "cost_$level$round" "$level" "" "$AFFINE"; done; done
cp tests/fixtures/workloads/big_kernel.py /tmp/big_kernel.py
BIG="import sys; sys.path.insert(0, '/tmp'); import big_kernel as b; b.workload()"
for round in 1 2; do for level in error warn info; do
  export ITERS=256 LAUNCHES=2; PP=none raw "big_$level$round" "$level" "" "$BIG"
  du -sh "$keep/big_$level$round/iket" | cut -f1; wc -c "$keep"/big_$level$round/iket/pid_*/iket.injection.log | tail -1
  rm -rf "$keep/big_$level$round"/iket_pid_* "$keep/big_$level$round"/iket/pid_*/iket.data.bin
done; done
tar cJf "$out/gpu-losses-cost.tar.xz" -C "$keep" --exclude='*.pftrace*' --exclude='*.html' --exclude='*.cubin' \
  --exclude='*.data.bin' --exclude='*.trace.json' $(cd "$keep" && ls -d cost_* big_* *.console.txt 2>/dev/null)
ls -la "$out"
