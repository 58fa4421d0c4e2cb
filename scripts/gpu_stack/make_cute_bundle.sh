#!/usr/bin/env bash
# Builds the CuTe DSL stack for the GPU machine in two parts, because together they exceed what one
# run on the GPU machine may carry (64 MiB): CuTe DSL needs a CUDA-toolkit flavour wheel
# (nvidia-cutlass-dsl-libs-cu13, 92 MB) besides libs-base/libs-core; without it `import cutlass`
# fails with "No CTK flavor installed".
#   part A: the MLIR extension `_cutlass_ir.cu13...so` alone  (~50 MB xz)
#   part B: everything else: cutlass + iket Python, libcute_dsl_runtime.so, the .pth (~16 MB xz)
# Usage (where the package registry is reachable):  bash scripts/gpu_stack/make_cute_bundle.sh .cute
# (then copy scripts/gpu_stack/cute-env.sh into .cute/; git ignores .cute/)
# On the GPU machine, call 1 carries part A and unpacks it; call 2, made while the machine is still
# warm (30 s), carries part B (and the checkout) and unpacks it next to it — see cute-env.sh.
set -euo pipefail
out=${1:?output folder}
mkdir -p "$out"
tmp=$(mktemp -d)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$tmp/whl" \
  nvidia-cutlass-dsl==4.8.1 nvidia-cutlass-dsl-libs-base==4.8.1 nvidia-cutlass-dsl-libs-core==4.8.1 \
  nvidia-cutlass-dsl-libs-cu13==4.8.1
python3 -m pip install -q --no-deps --no-compile --target "$tmp/site" --python-version 3.12 --implementation cp \
  --only-binary=:all: --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 "$tmp"/whl/*.whl
rm -rf "$tmp/site/nvidia_cutlass_dsl/cu13/lib/stubs" "$tmp/site/bin"
cd "$tmp/site"
ir=$(find . -name '_cutlass_ir.cu13*.so')
tar -cf - "$ir" | xz -T0 -9e > "$out/cute-part-a.tar.xz"
tar -cf - --exclude="$ir" . | xz -T0 -9e > "$out/cute-part-b.tar.xz"
rm -rf "$tmp"
ls -la "$out"
