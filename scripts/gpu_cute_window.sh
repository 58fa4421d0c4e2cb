#!/usr/bin/env bash
# Issue 52 with CuTe DSL (the two-call recipe, docs/cute.md): the bf16 model's CuTe DSL kernel in
# a window, through the API (show against a json.load recount) and through --window (the
# bench: window, whole-run window, --extract, the plain model, losses and ranges compared).
#   source .cute/cute-env.sh b; bash scripts/gpu_cute_window.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/iket-gpu-out}; w=/tmp/iket-cute-window; rm -rf "$w"; mkdir -p "$w" "$out"
export PYTHONPATH=$PWD/examples:$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 KERNEL=cute
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 python3 scripts/gpu_window.py "$w" model --window 3 > "$w/model3.out" 2> "$w/model3.err"
echo "cute model api window 3: exit $?"; grep '^{' "$w/model3.out" | cut -c1-900; tail -3 "$w/model3.err" | cut -c1-300
timeout 330 python3 bench/bench_window.py --case model --runs ${RUNS:-1} --json "$w/bench_model_cute.json" 2>&1 | tail -14
echo "GPU compute apps left: [$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | tr '\n' ' ')]"
tar cJf "$out/gpu-cute-window.tar.xz" -C "$w" --exclude='*.pftrace*' --exclude='*.html' . 2>/dev/null
true
