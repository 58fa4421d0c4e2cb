"""Which warps of each launch a raw capture holds a record of: the decode's view of a loss.

A decodable launch of the raw capture (``iket.data.json``) owns one slot of
``warpBufferSize`` bytes per warp of its grid (:mod:`.rawevents` reads the layout), and a
warp's slot starts with the bytes it used. Seen on the H100
(docs/gpu/issue51_h100/): a warp that emits more than the launch's budget
(``maxTsCntPerWarp``) writes the bytes it *would* have used, more than its slot holds, and
the decoder drops that warp whole (no range, no mark, no lifetime); a warp that wrote nothing
leaves 0. Every warp of an instrumented launch writes at least its start and its exit, so
both are records lost. The largest count also says what the kernel needs: its words past the
4-word header (events, payload words and the exit). Only the first word of each slot is read:
cheap on a capture of millions of events. A launch whose layout does not read as this (a slot
count that is not its warps) is left out, never guessed at.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from . import jsonio
from .rawevents import HEADER_WORDS

WARP_SIZE = 32


@dataclass(frozen=True)
class LaunchWarps:
    """One decodable launch: its kernel, its place among the process's launches, its warps
    and those with a record, its budget."""

    kernel: str
    index: int  # among the raw capture's launches in its order, its CUDA graphs' after them
    warps: int
    recorded: int  # warps whose record fits their slot: what the decoder reads
    budget: int | None  # maxTsCntPerWarp the launch ran with
    full: int  # warps whose slot is full to the last byte
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    overflowed: int = 0  # warps that emitted more than their slot holds (dropped whole)
    emitted: int = 0  # the most words a warp of this launch emitted past its header

    @property
    def dropped(self) -> int:
        return self.warps - self.recorded


def warps_of(grid: tuple[int, ...], block: tuple[int, ...]) -> int:
    """The warps a launch runs: its CTAs times the warps of one (a partial warp counts)."""
    return grid[0] * grid[1] * grid[2] * -(-(block[0] * block[1] * block[2]) // WARP_SIZE)


def read(raw_manifest: Path) -> list[LaunchWarps] | None:
    """Every decodable launch's warps of one process's raw capture; None where the manifest
    is missing or unreadable."""
    try:
        manifest = jsonio.read(raw_manifest)
        launches = manifest["launches"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    graphs = manifest.get("graphLaunches")
    every = list(launches) if isinstance(launches, list) else []
    for replay in graphs.values() if isinstance(graphs, dict) else []:  # CUDA graph replays, after
        every += replay if isinstance(replay, list) else []
    found: list[LaunchWarps] = []
    files: dict[str, object] = {}
    for index, launch in enumerate(every):
        if isinstance(launch, dict) and launch.get("canDecode"):
            counted = _launch(raw_manifest.parent, index, launch, files)
            if counted is not None:
                found.append(counted)
    return found


def _launch(folder: Path, index: int, launch: dict, files: dict) -> LaunchWarps | None:
    try:
        grid = tuple(int(launch[f"gridDim{a}"]) for a in "XYZ")
        block = tuple(int(launch[f"blockDim{a}"]) for a in "XYZ")
        size, ref = int(launch["warpBufferSize"]), launch["dataRef"]
        name, offset, length = str(ref["filename"]), int(ref["offset"]), int(ref["size"])
    except (KeyError, TypeError, ValueError):
        return None
    warps = warps_of(grid, block)
    if size <= 0 or size % 4 or length != warps * size or "/" in name or name in ("", ".", ".."):
        return None  # one slot per warp, or not the layout read here (a single cluster traced)
    if name not in files:
        files[name] = _mapped(folder / name)
    data = files[name]
    if data is None or offset < 0 or offset % 4 or offset + length > len(data):
        return None
    # the first word of each slot: a strided view of the file, no copy and no numpy (the CLI
    # reads this beside decode workers that hold numpy; it need not import it). Native order
    # and 4-byte unsigned ints: little-endian Linux, as every CUDA host runs.
    used = data[offset : offset + length].cast("I")[:: size // 4].tolist()
    budget = launch.get("maxTsCntPerWarp")
    return LaunchWarps(
        str(launch.get("kernelName", "?")),
        index,
        warps,
        sum(1 for word in used if 0 < word <= size),
        budget if isinstance(budget, int) and not isinstance(budget, bool) else None,
        sum(1 for word in used if word == size),
        grid,  # type: ignore[arg-type]
        block,  # type: ignore[arg-type]
        overflowed=sum(1 for word in used if word > size),
        emitted=max(0, max(used, default=0) // 4 - HEADER_WORDS),
    )


def _mapped(path: Path) -> memoryview | None:
    """The file's bytes, mapped (never read whole: a raw capture may be GBs)."""
    import mmap

    try:
        with jsonio.open_regular(path) as handle:
            if os.fstat(handle.fileno()).st_size == 0:
                return memoryview(b"")
            return memoryview(mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ))
    except (OSError, ValueError):
        return None
