#!/usr/bin/env bash
# Issue 53 on the GPU: iket's pytest plugin on examples/test_kernel.py (gates, fixture, baseline,
# a slowed kernel) and examples/notebook.ipynb's cells in an IPython shell.
#   source .gpu/gpu-env.sh; bash scripts/gpu_issue53.sh      (carry .gpu and .wheels53: pytest, IPython)
# .wheels53 (4 MB, ignored): pip download --only-binary=:all: --python-version 3.12 \
#   --platform manylinux2014_x86_64 -d .wheels53 pytest ipython, then rm .wheels53/{jedi,parso}-*
#   (IPython runs without them; the .gpu stack takes 47 of the 64 MiB a call carries)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/iket-gpu-out}; w=/tmp/iket53; rm -rf "$w"; mkdir -p "$w" "$out"
python3 -m pip install -q --no-deps --no-index --target /tmp/py53 .wheels53/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/py53:$PWD/examples:$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
run_pytest() { python3 -m pytest -c /dev/null --rootdir "$PWD" -p iket_pytest -p no:cacheprovider examples/test_kernel.py "$@"; }
IKET_CLI_SESSION_WINDOWS=1 run_pytest --iket "$w/refused" -rA 2>&1 | grep -E "passed|failed|second window" | cut -c1-200; echo "pytest --iket, IKET_CLI_SESSION_WINDOWS=1 (each window test in a process of its own): exit ${PIPESTATUS[0]}"
run_pytest --iket "$w/caps" -rA --junitxml "$w/junit.xml" 2>&1 | tail -25; echo "pytest --iket: exit ${PIPESTATUS[0]}"
grep -o 'name="iket[^/]*' "$w/junit.xml" | head -8
run_pytest --iket-baseline "$w/caps" -k fast_enough 2>&1 | tail -3; echo "baseline, same kernel: exit ${PIPESTATUS[0]}"
IKET_EXAMPLE_SLOW=1 run_pytest --iket-baseline "$w/caps" -k fast_enough 2>&1 | tail -25; echo "baseline, slowed kernel: exit ${PIPESTATUS[0]}"
for n in ${NB_RUNS:-1 2 3}; do  # the notebook's two windows (every kernel loaded first), each run a fresh process
  start=$SECONDS
  timeout 300 python3 scripts/gpu_notebook.py examples/notebook.ipynb "$w/nb$n" > "$w/nb$n.log" 2>&1
  echo "notebook run $n: exit $? in $((SECONDS - start)) s"; grep -E "^CELL|Error|error|Segfault" "$w/nb$n.log" | cut -c1-600
done
echo "GPU compute apps left: [$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | tr '\n' ' ')]"
tar cJf "$out/gpu-issue53.tar.xz" -C "$w" --exclude='*.pftrace*' --exclude='*.html' . 2>/dev/null
true
