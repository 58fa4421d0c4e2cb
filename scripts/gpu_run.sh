#!/usr/bin/env bash
# Every GPU check and benchmark of iket, on the GPU machine (device tool, carry .gpu):
#   source .gpu/gpu-env.sh; bash scripts/gpu_run.sh [checks|hardening|injection|extract|pipeline|faults|warp|reuse|repeat|repeatbench|sql|big|pftrace|post|edges|scaling|bench|all|x2]
#   source .cute/cute-env.sh b; bash scripts/gpu_run.sh cute     (CuTe DSL: the two-call recipe, docs/cute.md;
#                                                                  CUTE_K=expr runs only those checks)
# Each part fits in one 10-minute call; what comes back lands in $OUT (one tarball of kept files).
set -uo pipefail
cd "$(dirname "$0")/.."
part=${1:-all}
out=${OUT:-/tmp/iket-gpu-out}
keep=/tmp/iket-gpu-keep
mkdir -p "$out" "$keep"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
help_time() {
  echo "== iket --help start-up against python -c 'import click' (bench/bench_startup.py)"
  python3 bench/bench_startup.py --runs 10
}
echo "== versions"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -m iket_cli --version
if ls .pfwhl/*.whl >/dev/null 2>&1; then  # Perfetto's schema for the trace checks (no registry here)
  python3 -m pip install -q --no-deps --target /tmp/pfwhl .pfwhl/*.whl && export PYTHONPATH=$PYTHONPATH:/tmp/pfwhl
fi
if [[ $part == checks || $part == all ]]; then
  help_time
  echo "== parent never imports torch or TIRx"
  python3 -c "import sys, runpy; sys.argv=['iket','--help']
try: runpy.run_module('iket_cli', run_name='__main__')
except SystemExit: pass
print('heavy modules in parent:', sorted(m for m in sys.modules if m.split('.')[0] in ('torch','tvm_tirx','cuda','iket')))"
  echo "== iket doctor"; python3 -m iket_cli doctor | tee "$keep/doctor.txt"
  echo "== GPU checks"
  IKET_GPU_KEEP=$keep python3 -m pytest -m gpu scripts/gpu_check.py -v -s -p no:cacheprovider -o addopts="" ${CHECKS_K:+-k "$CHECKS_K"} \
    > "$keep/gpu_check.log" 2>&1
  grep -E "PASSED|FAILED|ERROR|postprocess phase|passed|failed" "$keep/gpu_check.log" | tail -30
fi
if [[ $part == hardening || $part == all ]]; then  # issue 31: its faults on the real stack
  echo "== hardening (issue 31) on the real stack"
  IKET_GPU_KEEP=$keep python3 -m pytest -m gpu scripts/gpu_hardening.py -v -s -p no:cacheprovider -o addopts="" \
    > "$keep/gpu_hardening.log" 2>&1
  grep -E "PASSED|FAILED|ERROR|passed|failed" "$keep/gpu_hardening.log" | tail -12
  echo "GPU compute apps left: [$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | tr '\n' ' ')]"
fi
if [[ $part == injection || $part == all ]]; then  # issue 32, item 2: run-iket's injection kills a bf16 GEMM
  echo "== run-iket's injection crash, said"
  IKET_GPU_KEEP=$keep python3 -m pytest -m gpu scripts/gpu_injection.py -v -s -p no:cacheprovider -o addopts="" \
    > "$keep/gpu_injection.log" 2>&1
  grep -E "PASSED|FAILED|ERROR|passed|failed" "$keep/gpu_injection.log" | tail -8
  for f in "$keep"/injection_*.err; do echo "== $(basename "$f")"; grep -E "iket: (error|hint)|injection log" "$f" | cut -c1-400; done
fi
if [[ $part == extract || $part == all ]]; then  # issue 32, item 1: a kernel out of a bf16 model (KERNEL=tirx|cute)
  echo "== --extract on a bf16 Transformer step (KERNEL=${KERNEL:-tirx})"
  IKET_GPU_KEEP=$keep python3 -m pytest -m gpu scripts/gpu_extract.py -v -s -p no:cacheprovider -o addopts="" \
    ${EXTRACT_K:+-k "$EXTRACT_K"} > "$keep/gpu_extract_${KERNEL:-tirx}.log" 2>&1
  grep -E "PASSED|FAILED|SKIPPED|ERROR|passed|failed|extract timings|^E " "$keep/gpu_extract_${KERNEL:-tirx}.log" | tail -20
  echo "GPU compute apps left: [$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | tr '\n' ' ')]"
fi
if [[ $part == pipeline ]]; then  # issue 33 (CuTe DSL bundle): arrows per shape, the bound stage
  echo "== pipeline shapes: arrows against an independent pairing, the bound"
  IKET_GPU_KEEP=$keep python3 -m pytest -m gpu scripts/gpu_pipeline.py -v -s -p no:cacheprovider -o addopts="" ${PIPELINE_K:+-k "$PIPELINE_K"} \
    > "$keep/gpu_pipeline.log" 2>&1
  grep -E "PASSED|FAILED|ERROR|passed|failed|arrows|bound|balanced|period|agree|alone|different payloads|^E " "$keep/gpu_pipeline.log" | tail -40
fi
if [[ $part == faults || $part == all || $part == hardening ]]; then  # issue 15: signals, timeout, kill -9 mid capture pass
  echo "== faults in the middle of a real capture pass"
  IKET_GPU_KEEP=$keep python3 -m pytest -m gpu scripts/gpu_faults.py -v -s -p no:cacheprovider -o addopts="" \
    > "$keep/gpu_faults.log" 2>&1
  grep -E "PASSED|FAILED|ERROR|passed|failed" "$keep/gpu_faults.log" | tail -12
  echo "GPU compute apps left: [$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | tr '\n' ' ')]"
fi
if [[ $part == cute ]]; then  # issue 16: the CuTe DSL examples captured and checked; captures kept
  help_time
  echo "== iket doctor"; python3 -m iket_cli doctor | tee "$keep/doctor_cute.txt" | grep -i -A3 "cute"
  echo "== CuTe DSL checks"
  IKET_GPU_KEEP=$keep python3 -m pytest -m gpu scripts/gpu_cute.py -v -s -p no:cacheprovider -o addopts="" \
    ${CUTE_K:+-k "$CUTE_K"} > "$keep/gpu_cute.log" 2>&1
  grep -E "PASSED|FAILED|ERROR|passed|failed" "$keep/gpu_cute.log" | tail -14
  echo "GPU compute apps left: [$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | tr '\n' ' ')]"
fi
if [[ $part == warp ]]; then  # issue 17: --warp-trace of PyTorch and multi_kernel.py, show, lint, diff, report
  help_time
  echo "== warp-trace and readable-name checks"
  IKET_GPU_KEEP=$keep python3 -m pytest -m gpu scripts/gpu_warp.py -v -s -p no:cacheprovider -o addopts="" \
    > "$keep/gpu_warp.log" 2>&1
  grep -E "PASSED|FAILED|ERROR|passed|failed" "$keep/gpu_warp.log" | tail -8
  for f in torch_warp.show multi_warp.show multi_mixed.show; do echo "== $f"; head -30 "$keep/$f.out" | cut -c1-170; done
  echo "== console of the instrumented capture"; cat "$keep/multi_mixed.profile.err" | cut -c1-170
  echo "GPU compute apps left: [$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | tr '\n' ' ')]"
  # what comes back: small text and the reports, not the traces (8 files, 16 MiB each at most)
  tar cJf "$out/gpu-warp.tar.xz" -C "$keep" --exclude='*.trace.json' --exclude='*.pftrace*' --exclude='iket_pid_*.html' \
    --exclude='*/iket' --exclude='*/tracker' --exclude='*.cubin' .
  exit 0
fi
if [[ $part == reuse ]]; then  # issue 18: tracker reuse, an edited kernel, and its benchmark
  help_time
  echo "== tracker reuse checks"
  IKET_GPU_KEEP=$keep python3 -m pytest -m gpu scripts/gpu_reuse.py -v -s -p no:cacheprovider -o addopts="" \
    > "$keep/gpu_reuse.log" 2>&1
  grep -E "PASSED|FAILED|ERROR|passed|failed|does not fit|reusing" "$keep/gpu_reuse.log" | tail -12
  echo "== second capture with tracker reuse against raw run-iket"
  python3 bench/bench_profile.py --runs "${BENCH_RUNS:-3}" --variants iket,iket-reuse,iket-script,raw --json "$keep/bench_reuse.json" 2>&1 | tee "$keep/bench_reuse.md"
  echo "GPU compute apps left: [$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | tr '\n' ' ')]"
  tar cJf "$out/gpu-reuse.tar.xz" -C "$keep" --exclude='*.trace.json' --exclude='*.pftrace*' --exclude='*.html' \
    --exclude='*/iket' --exclude='*/tracker' --exclude='*.cubin' .
  exit 0
fi
if [[ $part == repeat ]]; then  # issue 18: --repeat 5 captures, the rank-test gate, a partial capture
  echo "== repeated captures and the gate"
  IKET_GPU_KEEP=$keep python3 -m pytest -m gpu scripts/gpu_repeat.py -v -s -p no:cacheprovider -o addopts="" \
    > "$keep/gpu_repeat.log" 2>&1
  grep -E "PASSED|FAILED|ERROR|passed|failed" "$keep/gpu_repeat.log" | tail -8
  grep -A12 "unchanged repeats" "$keep/gpu_repeat.log" | head -14
  echo "GPU compute apps left: [$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | tr '\n' ' ')]"
  tar cJf "$out/gpu-repeat.tar.xz" -C "$keep" --exclude='*.pftrace*' --exclude='*.html' \
    --exclude='*/iket' --exclude='*/tracker' --exclude='*.cubin' .
  exit 0
fi
if [[ $part == big ]]; then  # issue 22: big_kernel.py at ITERS=512 LAUNCHES=3, all then json, against run-iket
  for fmt in ${BIG_FORMATS:-all json}; do
    echo "== --postprocess $fmt, ITERS=${BIG_ITERS:-512}"
    python3 bench/bench_scaling.py --iters "${BIG_ITERS:-512}" --launches 3 --postprocess "$fmt" --logs "$keep" \
      --json "$keep/big_$fmt.json" 2>&1 | tail -3
    grep -h "decoded\|merged" "$keep"/scaling_*_"$fmt".log 2>/dev/null | tail -8
  done
  tar czf "$out/gpu-big.tgz" -C "$keep" .
  exit 0
fi
if [[ $part == pftrace ]]; then  # issue 35: the Perfetto export split and joined, against run-iket
  echo "== iket postprocess --format perfetto against run-iket's, ITERS=${BIG_ITERS:-512} LAUNCHES=3"
  raw=$out/big${BIG_ITERS:-512}_raw.tar.xz  # the raw capture comes back: CPU machines time the same data
  python3 bench/bench_pftrace.py --iters "${BIG_ITERS:-512}" --launches 3 --runs "${BENCH_RUNS:-3}" --check \
    --save-raw "$raw" --json "$keep/pftrace_${BIG_ITERS:-512}.json" 2>&1 | tail -4
  for fmt in perfetto json all; do  # where the time goes, step by step (bench/decode_timeline.py)
    echo "== timeline --format $fmt"
    python3 bench/decode_timeline.py "$raw" --format "$fmt" --rows > "$keep/timeline_$fmt.txt" 2>&1
    tail -9 "$keep/timeline_$fmt.txt"
  done
  echo "== the same on keep256"
  python3 bench/bench_pftrace.py --raw tests/fixtures/keep256_raw.tar.xz --runs "${BENCH_RUNS:-3}" --check \
    --json "$keep/pftrace_keep256.json" 2>&1 | tail -4
  if [[ -n ${CHECKS_K:-} ]]; then
    IKET_GPU_KEEP=$keep python3 -m pytest -m gpu scripts/gpu_check.py -v -s -p no:cacheprovider -o addopts="" \
      -k "$CHECKS_K" > "$keep/gpu_check.log" 2>&1
    grep -E "PASSED|FAILED|ERROR|postprocess phase|joined|passed|failed" "$keep/gpu_check.log" | tail -12
  fi
  tar czf "$out/gpu-pftrace.tgz" -C "$keep" --exclude='*.trace.json' --exclude='*.pftrace*' --exclude='*.html' \
    --exclude='*/iket' --exclude='*/tracker' --exclude='*.cubin' .
  exit 0
fi
if [[ $part == post ]]; then  # issue 35: where --postprocess all's time goes, on the kept ITERS=512 capture; the profile
  # (POST_OLD=DIR: an older tree's decode of it too, interleaved, POST_RUNS times)
  for fmt in all perfetto; do
    echo "== timeline --format $fmt (docs/gpu/pftrace/big512_raw.tar.xz)"
    python3 bench/decode_timeline.py docs/gpu/pftrace/big512_raw.tar.xz --format "$fmt" --rows > "$keep/timeline_$fmt.txt" 2>&1
    tail -14 "$keep/timeline_$fmt.txt"
  done
  if [[ -n ${POST_OLD:-} ]]; then  # an older tree (git archive REV iket_cli bench, carried): its decode interleaved with this one's
    for run in $(seq "${POST_RUNS:-3}"); do
      for tree in "$POST_OLD" .; do
        (cd "$tree" && python3 bench/decode_timeline.py "$OLDPWD/docs/gpu/pftrace/big512_raw.tar.xz" --format all --rows) \
          > "$keep/timeline_all_$(basename "$(realpath "$tree")")_$run.txt" 2>&1
        echo "$tree run $run: $(grep '^postprocess all' "$keep/timeline_all_$(basename "$(realpath "$tree")")_$run.txt")"
      done
    done
  fi
  python3 bench/bench_scaling.py --iters "${BIG_ITERS:-512}" --launches 3 --postprocess all --logs "$keep" \
    --json "$keep/bench_scaling.json" 2>&1 | tail -3
  tar czf "$out/gpu-post.tgz" -C "$keep" .
  exit 0
fi
if [[ $part == edges ]]; then  # issue 35: iket profile's seconds beside the passes and the decode, and a cProfile of it
  python3 bench/profile_edges.py --iters "${BIG_ITERS:-512}" --runs "${EDGES_RUNS:-2}" --cprofile "$keep/profile_edges.txt" 2>&1 | tail -6
  grep -E "cumtime|iket_cli|threading|subprocess|shutil|os\.|posix|exit" "$keep/profile_edges.txt" | head -50 | cut -c1-160
  tar czf "$out/gpu-edges.tgz" -C "$keep" .
  exit 0
fi
if [[ $part == scaling ]]; then  # issue 35: profile --postprocess all at three sizes, for docs/scaling.png
  python3 bench/bench_scaling.py --iters "${SCALING_ITERS:-64,256,512}" --launches 3 --postprocess all \
    --logs "$keep" --json "$out/bench_scaling.json" 2>&1 | tail -5
  tar czf "$out/gpu-scaling-logs.tgz" -C "$keep" .
  exit 0
fi
if [[ $part == sql ]]; then  # issue 19, two calls: with .gpu (capture + export), then with .sqlwhl (DuckDB)
  echo "== capture, export and SQL checks"
  IKET_GPU_KEEP=$keep python3 -m pytest -m gpu scripts/gpu_sql.py -v -s -p no:cacheprovider -o addopts="" \
    > "$keep/gpu_sql.log" 2>&1
  grep -E "PASSED|FAILED|SKIPPED|ERROR|passed|failed|skipped|export rows" "$keep/gpu_sql.log" | tail -8
  cp "$keep/gpu_sql.log" "$out/gpu_sql.log"
  exit 0
fi
if [[ $part == repeatbench ]]; then  # issue 18: --repeat 5 against 5 captures; a reused tracker again
  echo "== --repeat 5 against five captures"
  python3 bench/bench_repeat.py --runs "${BENCH_RUNS:-1}" --json "$keep/bench_repeat.json" 2>&1 | tee "$keep/bench_repeat.md"
  echo "== second capture with tracker reuse against raw run-iket"
  python3 bench/bench_profile.py --runs "${REUSE_RUNS:-2}" --variants iket-reuse,raw --json "$keep/bench_reuse.json" 2>&1 | tee "$keep/bench_reuse.md"
  tar cJf "$out/gpu-repeatbench.tar.xz" -C "$keep" bench_repeat.json bench_repeat.md bench_reuse.json bench_reuse.md
  exit 0
fi
if [[ $part == bench || $part == all ]]; then
  echo "== capture benchmark (issue 2)"
  python3 bench/bench_profile.py --runs "${BENCH_RUNS:-3}" --variants iket,iket-reuse,raw,iket.run --json "$keep/bench_profile.json" 2>&1 | tee "$keep/bench_profile.md"
  echo "== postprocess benchmark on this host's cores (issue 3)"
  python3 bench/bench_postprocess.py --raw tests/fixtures/keep256_raw.tar.xz --runs 1 --formats all,perfetto,html \
    --json "$keep/bench_postprocess.json" 2>&1 | tee "$keep/bench_postprocess.md"
fi
if [[ $part == x2 ]]; then  # issue 9, on nvidia-h200-x2: the two-GPU checks and --jobs auto vs 1
  echo "== two-GPU checks"
  IKET_GPU_KEEP=$keep python3 -m pytest -m gpu scripts/gpu_check.py -v -s -p no:cacheprovider -o addopts="" \
    -k "both_gpus or own_gpus or spreads" > "$keep/gpu_check_x2.log" 2>&1
  grep -E "PASSED|FAILED|SKIPPED|passed|failed" "$keep/gpu_check_x2.log" | tail -10
  echo "== iket run --jobs auto against --jobs 1"
  python3 bench/bench_jobs.py --runs "${BENCH_RUNS:-2}" --json "$keep/bench_jobs.json" 2>&1 | tee "$keep/bench_jobs.md"
fi
tar czf "$out/gpu-keep-$part.tgz" -C "$keep" .
