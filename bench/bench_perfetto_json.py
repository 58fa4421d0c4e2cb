"""The Perfetto trace from the JSON (issue 52, ``render/perfetto.py``) against NVIDIA's export
of the same raw capture (``RawCaptureDecoder.export_perfetto_trace``), one process each, on
the CPU, interleaved ``--runs`` times:

    python3 bench/bench_perfetto_json.py --raw tests/fixtures/keep256_raw.tar.xz --runs 3

* ``nvidia``: the decoder's Perfetto export of the raw capture (what run-iket writes; iket's
  postprocess splits it over workers, this is one process: the anchor);
* ``iket-json``: load the decoded trace JSON (iket's trace model) and write the Perfetto trace
  from it, what a window gets.

Prints a markdown table: median seconds, ratio to the anchor, and whether the two traces are
the same (Perfetto's own schema reads both: tests/conftest.py's ``perfetto_view``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

NVIDIA = """
import sys, time
from pathlib import Path
from iket_cli.decode import decoder
start = time.perf_counter()
raw = decoder.decoder_class()(sys.argv[1])
Path(sys.argv[2]).write_bytes(raw.export_perfetto_trace())
raw.close()
print(time.perf_counter() - start)
"""
IKET = """
import sys, time
from pathlib import Path
from iket_cli.model import trace
from iket_cli.render import perfetto
start = time.perf_counter()
Path(sys.argv[2]).write_bytes(perfetto.encode(trace.load(Path(sys.argv[1]))))
print(time.perf_counter() - start)
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--raw", type=Path, default=ROOT / "tests/fixtures/keep256_raw.tar.xz")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-pfjson-"))
    with tarfile.open(args.raw) as archive:
        archive.extractall(work, filter="data")
    folder = next(work.rglob("iket")).parent
    subprocess.run([sys.executable, "-m", "iket_cli", "postprocess", str(folder), "--format", "json", "-q"],
                   check=True)  # fmt: skip
    trace = next(folder.glob("iket_pid_*.trace.json"))
    raw = next(folder.glob("iket/pid_*/iket.data.json"))
    times: dict[str, list[float]] = {"nvidia": [], "iket-json": []}
    for _ in range(args.runs):
        for name, code, source in (("nvidia", NVIDIA, raw), ("iket-json", IKET, trace)):
            done = subprocess.run([sys.executable, "-c", code, str(source), str(work / f"{name}.pftrace")],
                                  capture_output=True, text=True, check=True, cwd=ROOT)  # fmt: skip
            times[name].append(float(done.stdout.split()[-1]))
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import perfetto_view

    theirs, ours = ((work / f"{name}.pftrace").read_bytes() for name in times)
    same = perfetto_view(theirs) == perfetto_view(ours)
    base = statistics.median(times["nvidia"])
    size = trace.stat().st_size / 1e6
    print(f"| {size:.0f} MB trace JSON | median s | ratio to nvidia | runs |\n|---|---|---|---|")
    for name, found in times.items():
        median = statistics.median(found)
        print(f"| {name} | {median:.2f} | {median / base:.2f} | {len(found)} |")
    print(f"\nthe same trace (Perfetto's schema): {same}")


if __name__ == "__main__":
    main()
