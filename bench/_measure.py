"""Wall time and peak memory of a command: the summed RSS of its whole process tree."""

from __future__ import annotations

import statistics
import subprocess
import threading
import time

from iket_cli.system import tree


def tree_rss(pid: int) -> int:
    """VmRSS summed over a process and all its descendants, from /proc."""
    total = 0
    for member in [pid, *tree.descendants(pid)]:
        try:
            with open(f"/proc/{member}/status") as handle:
                for line in handle:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def measure(cmd: list[str], env: dict, capture: bool = False) -> tuple[float, int, str]:
    """(wall seconds, peak summed RSS in bytes, stdout if ``capture``) of one run of ``cmd``."""
    start = time.perf_counter()
    out = subprocess.PIPE if capture else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.PIPE)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss(proc.pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    stdout, err = proc.communicate()
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{cmd} failed: {err.decode()[-2000:]}")
    return seconds, peak, (stdout or b"").decode()


def ratio_table(results: dict[str, list[tuple[float, int]]], base: str, label: str) -> None:
    """Print each command's runs, median wall time and peak RSS, and both as ratios to ``base``."""
    base_s = statistics.median(s for s, _ in results[base])
    base_m = statistics.median(m for _, m in results[base])
    print(f"| {label} | runs (s) | median (s) | vs {base} | peak RSS (MB) | vs {base} |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, values in results.items():
        s = statistics.median(v for v, _ in values)
        m = statistics.median(v for _, v in values)
        runs = ", ".join(f"{v:.2f}" for v, _ in values)
        print(f"| {name} | {runs} | {s:.2f} | {s / base_s:.2f}x | {m / 1e6:.0f} | {m / base_m:.2f}x |")
