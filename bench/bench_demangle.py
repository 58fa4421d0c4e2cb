"""Demangling kernel names: the candidates side by side, on every C++ kernel name recorded
on the H200 (``tests/fixtures``), as ratios to the one iket uses (``cxxfilt``).

* ``cxxfilt``: the system's ``__cxa_demangle`` (libstdc++) through ctypes, name by name;
* ``c++filt`` and ``llvm-cxxfilt``: the binutils and LLVM tools, one process for all names;
* ``itanium``: iket's own reader (``iket_cli/model/itanium.py``), the fallback: short names only.

Each round runs every candidate once (A B C D A B C D ...); the ratio is taken round by round.
The first use of ``cxxfilt`` also pays its import (it looks the libraries up): measured apart,
in a fresh interpreter, against a bare ``python -c pass``.

    PYTHONPATH=$PWD python3 bench/bench_demangle.py --runs 20
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"


def symbols() -> list[str]:
    found = set()
    for pattern in ("*.trace.json", "tracker.json", "iket.data.json"):
        for path in FIXTURES.rglob(pattern):
            found.update(x["kernelName"] for x in json.loads(path.read_text())["launches"])
    with tarfile.open(FIXTURES / "torch_warp.tar.xz") as archive:
        raw = next(m for m in archive.getmembers() if m.name.endswith("iket.data.json"))
        found.update(x["kernelName"] for x in json.load(archive.extractfile(raw))["launches"])
    return sorted(s for s in found if s.startswith("_Z"))


def tool(path: str):
    def run(names: list[str]) -> list[str]:
        done = subprocess.run([path], input="\n".join(names), capture_output=True, text=True, check=True)
        return done.stdout.splitlines()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    import cxxfilt

    from iket_cli.model import itanium
    from iket_cli.model import names as names_mod

    names = symbols()
    candidates = {"cxxfilt": lambda ns: [cxxfilt.demangle(n) for n in ns]}
    for binary in ("c++filt", "llvm-cxxfilt"):
        if shutil.which(binary):
            candidates[binary] = tool(shutil.which(binary))
    candidates["itanium (short only)"] = lambda ns: [itanium.qualified_name(n) for n in ns]
    reference = [name.replace(" ", "") for name in candidates["cxxfilt"](names)]
    shorts = [names_mod.shorten(name) for name in candidates["cxxfilt"](names)]
    agree = {}  # the same names, up to spacing (LLVM writes ">>", and lambdas its own way)
    for name, run in candidates.items():
        got = run(names)
        if "itanium" in name:
            agree[name] = sum(a == b for a, b in zip(got, shorts, strict=True))
        else:
            agree[name] = sum(a.replace(" ", "") == b for a, b in zip(got, reference, strict=True))
    times: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(args.runs + 1):
        for name, run in candidates.items():
            start = time.perf_counter()
            run(names)
            times[name].append(time.perf_counter() - start)
    times = {name: t[1:] for name, t in times.items()}
    base = times["cxxfilt"]
    print(f"{len(names)} C++ kernel names, {args.runs} rounds")
    print(f"{'candidate':<22} {'median ms':>10} {'µs/name':>8} {'x cxxfilt':>10} {'same names':>11}")
    for name, t in times.items():
        ratio = statistics.median(a / b for a, b in zip(t, base, strict=True))
        median = statistics.median(t)
        same = f"{agree[name]}/{len(names)}"
        print(f"{name:<22} {median * 1e3:10.3f} {median / len(names) * 1e6:8.1f} {ratio:10.2f} {same:>11}")
    imports = {"python -c pass": "pass", "import cxxfilt": "import cxxfilt"}
    spent: dict[str, list[float]] = {k: [] for k in imports}
    for _ in range(args.runs):
        for label, code in imports.items():
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            spent[label].append(time.perf_counter() - start)
    extra = statistics.median(
        a - b for a, b in zip(spent["import cxxfilt"], spent["python -c pass"], strict=True)
    )
    print(f"import cxxfilt, once per process: +{extra * 1e3:.1f} ms over a bare interpreter")


if __name__ == "__main__":
    main()
