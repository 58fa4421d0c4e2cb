#!/usr/bin/env bash
# Issue 62 on the GPU: the session's knobs bisected, then many windows in one process.
#   source .gpu/gpu-env.sh; PARTS="bisect" BISECT_ARGS="--group windows --repeats 2" bash scripts/gpu_issue62.sh
# (.gpu/ holds the IKET GPU stack and gpu-env.sh: bash scripts/gpu_stack/make_bundle.sh makes it; carry it.)
# Parts: bisect (scripts/gpu_session_bisect.py with BISECT_ARGS), pytest (examples/test_kernels.py: twelve
# windows, then a slowed kernel), notebook (scripts/gpu_notebook62.py; carry .whl: IPython, ipykernel,
# nbclient), big (the 4.9M-event kernel in one window: BIG_UNSAFE=1 BIG_BUDGET=2048 BIG_BUFFER=86M),
# outrun (a --calls range the run outruns).
# Logs: $OUT/issue62-bisect-NAME.tar.xz, $OUT/issue62-checks.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/iket-gpu-out}; w=/tmp/iket-issue62; mkdir -p "$w" "$out"
export PYTHONPATH=$PWD/examples:$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
parts=" ${PARTS:-bisect} "
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import iket, importlib.metadata as m; print('nvidia-cutlass-dsl-libs-base', m.version('nvidia-cutlass-dsl-libs-base'))"
if [[ $parts == *" bisect "* ]]; then
  rm -rf "$w/bisect"
  # shellcheck disable=SC2086
  python3 scripts/gpu_session_bisect.py "$w/bisect" ${BISECT_ARGS:-} > "$w/bisect.out" 2> "$w/bisect.err"
  echo "bisect: exit $?"; sed -n '/^case /,$p' "$w/bisect.out"
  cp "$w/bisect/results.jsonl" "$out/bisect-${BISECT_NAME:-run}.jsonl" 2>/dev/null
  tar cJf "$out/issue62-bisect-${BISECT_NAME:-run}.tar.xz" -C "$w" bisect.out bisect.err bisect/logs bisect/results.jsonl
fi
if ls .whl/*.whl >/dev/null 2>&1; then  # IPython, ipykernel, nbclient (the GPU machine has none)
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
if [[ $parts == *" pytest "* ]]; then  # twelve marked tests over three kernels, then one slowed
  rm -rf "$w/caps" "$w/caps-slow"
  run_pytest() { python3 -m pytest -c /dev/null --rootdir "$PWD" -p no:cacheprovider examples/test_kernels.py "$@"; }
  # without iket a kernel compiled for IKET refuses to run (TIRx checks for run-iket): this times the imports and
  # compiles only, not a baseline of the same tests
  start=$SECONDS; run_pytest -p no:iket -q > "$w/pytest-plain.log" 2>&1; echo "without iket (refused kernels): exit $? in $((SECONDS - start)) s"
  start=$SECONDS; run_pytest -p iket_pytest --iket "$w/caps" -rA --junitxml "$w/junit.xml" > "$w/pytest-iket.log" 2>&1
  echo "pytest --iket (every window in the run's process): exit $? in $((SECONDS - start)) s; captures: $(ls "$w/caps" | grep -vc failed)"
  tail -3 "$w/pytest-iket.log"
  if [[ -n ${PYTEST_ISOLATED:-} ]]; then  # the same with each window test in a spawned child (134 s on the H100 before)
    start=$SECONDS; run_pytest -p iket_pytest --iket "$w/caps-iso" --iket-isolate -q > "$w/pytest-isolated.log" 2>&1
    echo "pytest --iket --iket-isolate: exit $? in $((SECONDS - start)) s"
  fi
  IKET_EXAMPLE_SLOW=1 run_pytest -p iket_pytest --iket "$w/caps-slow" -rA > "$w/pytest-slow.log" 2>&1
  echo "slowed spin: exit $?"; grep -E "^(FAILED|PASSED)|OVER" "$w/pytest-slow.log" | head -16
  grep -o 'name="iket[^/]*' "$w/junit.xml" | sort | uniq -c | head -8
fi
if [[ $parts == *" notebook "* ]]; then
  timeout 540 python3 scripts/gpu_notebook62.py "$w/nb" 2>&1 | tail -8
fi
if [[ $parts == *" big "* ]]; then  # the 4.9M-event kernel in a window at the budget it needs (BIG_BUDGET, BIG_BUFFER)
  # --window: the session stops in the live process (--one-pass stops it at interpreter exit: SIGSEGV at 2048)
  printf 'import big_kernel\nbig_kernel.workload()\n' > "$w/run_big.py"
  ITERS=512 LAUNCHES=3 IKET_CLI_SESSION_BUDGET_UNSAFE=${BIG_UNSAFE:-0} PYTHONPATH=$PWD/tests/fixtures/workloads:$PYTHONPATH \
    timeout 300 python3 -m iket_cli profile "$w/run_big.py" --window big_kernel:workload \
    --max-ts-cnt-per-warp "${BIG_BUDGET:-2048}" ${BIG_BUFFER:+--context-buffer-size $BIG_BUFFER} \
    -o "$w/big" --clobber --postprocess json 2> "$w/big.err"
  echo "big window: exit $?"; tail -3 "$w/big.err"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('ranges', sum(len(l['ranges']) for l in d['launches']), 'marks', sum(len(l['markers']) for l in d['launches']), '(two passes: 2,437,776 and 2,433,024)')" "$(ls "$w"/big/iket_pid_*.trace.json | head -1)"
fi
if [[ $parts == *" outrun "* ]]; then  # issue 63: a --calls range the run outruns is INCOMPLETE
  timeout 200 python3 -m iket_cli profile examples/model_step.py --window model_tirx_kernel:affine --calls 3-99 --no-stop-after \
    -o "$w/outrun" --clobber 2> "$w/outrun.err"; echo "outrun: exit $?"; grep -E "INCOMPLETE|holds calls" "$w/outrun.err" | head -3
fi
tar cJf "$out/issue62-checks.tar.xz" -C "$w" --exclude='*.pftrace*' --exclude='*.html' --exclude='*.trace.json' \
  --exclude='bisect' . 2>/dev/null
echo "GPU compute apps left: [$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | tr '\n' ' ')]"
