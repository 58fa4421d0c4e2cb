#!/usr/bin/env bash
# The IKET GPU stack for a GPU machine that reaches no package registry: run-iket 4.8.1 (CuTe DSL's
# libs), TIRx and TVM-FFI as CPython 3.12 manylinux x86-64 wheels, unpacked into one tarball (47 MiB).
#   bash scripts/gpu_stack/make_bundle.sh [EXTRA_PIP_SPEC...]      (where pip reaches PyPI)
# makes .gpu/ (git ignores it) with the tarball and gpu-env.sh; on the GPU machine, from the
# checkout's root: `source .gpu/gpu-env.sh`, then scripts/gpu_run.sh and the scripts/gpu_*.sh checks.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .gpu
cp scripts/gpu_stack/gpu-env.sh .gpu/
out=${OUT_BUNDLE:-.gpu/iket-gpu-stack-cp312.tar.xz}
tmp=$(mktemp -d)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$tmp/whl" \
  nvidia-cutlass-dsl==4.8.1 nvidia-cutlass-dsl-libs-base==4.8.1 nvidia-cutlass-dsl-libs-core==4.8.1 \
  apache-tvm-tirx==0.1.0a4 apache-tvm-ffi apache-tvm-ffi-orcjit "$@"
python3 -m pip install -q --no-deps --no-compile --target "$tmp/site" --python-version 3.12 --implementation cp \
  --only-binary=:all: --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 "$tmp"/whl/*.whl
tar -C "$tmp/site" -cf - . | xz -T0 -6 > "$out"
rm -rf "$tmp"
ls -la "$out"
