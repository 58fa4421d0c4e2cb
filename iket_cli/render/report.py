"""``iket report``: one self-contained HTML file per capture, readable offline.

run-iket's ``.html`` loads the Perfetto UI from the internet and needs an HTTP server; on an
air-gapped cluster, or opened from a CI artifact, it shows nothing. This report carries
everything inline (CSS, JS, data; no CDN, no fetch), so it opens from ``file://``:

* the manifest's metadata (command, GPU, versions, phase times);
* the statistics of ``iket show --format json``, the same numbers, as sortable tables;
* a canvas timeline per launch: a row per warp grouped by SM and CTA, ranges as bars,
  marks as ticks, zoom, pan and hover.

Scale: a million-event capture cannot be drawn whole, nor embedded whole in a file people
mail around. The statistics always cover every event; the timeline embeds at most
:data:`EVENT_BUDGET` ranges and marks, shared between the launches, each launch keeping
whole warps in SM/CTA/warp order until its share is used (the page says how many of how
many it shows). Timestamps are stored relative to the launch start as base64 int32
arrays: about 21 bytes per range.
"""

from __future__ import annotations

import base64
import html
import json
import sys
from array import array
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

from ..analysis import summary as summary_mod
from ..analysis.lint import Finding
from ..errors import UsageError
from ..model import trace as trace_mod
from ..model.folder import find_traces, manifest_of, process_label
from ..model.vocab import ARTIFACTS, stem

INT32_MAX = 2**31 - 1
TEMPLATE = "report_template.html"  # package data beside this module
EVENT_BUDGET = 300_000  # ranges + marks embedded in the timeline of one report
EMBED_PERFETTO_MAX = 4 << 20  # gzip'd Perfetto traces up to this size ride along for the button
_DATA_MARK = "/*IKET-DATA*/null"
_DATA_OPEN = '<script id="iket-data" type="application/json">'


def build(location: Path, *, title: str | None = None) -> str:
    """The report of a capture directory, a manifest or one trace, as HTML text."""
    location = Path(location)
    record = manifest_of(location)
    found = find_traces(location)
    processes = _load(found)
    data = {
        "kind": "capture",
        "title": title or _title(location, record),
        "meta": _meta(record),
        "stats": _stats(processes),
        "timelines": _timelines(processes),
        "perfetto": _perfetto(found),
    }
    return render(data)


def build_diff(base: Path, new: Path, changes: list[dict[str, Any]], stat: str) -> str:
    """A side-by-side comparison: the diff table, and each capture's timelines."""
    sides = []
    for location in (Path(base), Path(new)):
        processes = _load(find_traces(location))
        sides.append(
            {
                "title": str(location),
                "meta": _meta(manifest_of(location)),
                "timelines": _timelines(processes, budget=EVENT_BUDGET // 2),
            }
        )
    data = {
        "kind": "diff",
        "title": f"iket diff {base} {new}",
        "stat": stat,
        "changes": changes,
        "sides": sides,
    }
    return render(data)


def render(data: dict[str, Any]) -> str:
    """Put ``data`` into the page template; ``</`` is escaped so no string ends the script."""
    template = resources.files(__package__).joinpath(TEMPLATE).read_text(encoding="utf-8")
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    page = template.replace(_DATA_MARK, payload, 1)
    return page.replace("{{TITLE}}", html.escape(data["title"]), 1)


def embedded(page: Path) -> dict[str, Any]:
    """The data a report carries (for scripts and tests): the inverse of :func:`render`."""
    text = Path(page).read_text(encoding="utf-8")
    start = text.index(_DATA_OPEN) + len(_DATA_OPEN)
    return json.loads(text[start : text.index("</script>", start)].replace("<\\/", "</"))


def write(location: Path, out: Path, *, title: str | None = None) -> Path:
    """Write the report of ``location`` to ``out`` atomically."""
    check_output(out)  # before the work, not after it
    return write_text(out, build(location, title=title))


def check_output(out: Path) -> Path:
    """Refuse, in one line, a report path whose folder does not exist."""
    out = Path(out)
    if not out.parent.is_dir():
        raise UsageError(f"cannot write {out}: {out.parent} is not a directory", hint="create it first")
    return out


def write_text(out: Path, text: str) -> Path:
    """Write a page atomically (a temporary file beside it, then a rename)."""
    out = check_output(out)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)
    return out


def process_page(
    capture_dir: Path,
    record: dict[str, Any],
    process: dict[str, Any],
    loaded: trace_mod.Trace,
    findings: list[Finding],
) -> Path:
    """Write ``iket_pid_<hex>.html`` for one process of a capture (``--postprocess html``).

    ``record`` is the manifest as it stands (it may not be on disk yet); ``loaded`` and
    ``findings`` are the process's trace and its lint findings, loaded and linted once by
    the caller. The page shows the capture's metadata and that one process.
    """
    name = stem(process["pid_hex"])
    shown = Path(process["artifacts"]["trace_json"]["path"])  # relative: the capture may still be staged
    one = [(process_label(process), shown, loaded)]
    data = {
        "kind": "capture",
        "title": f"{name} · {record['target'].get('display', '')}".strip(" ·"),
        "meta": _meta(record),
        "stats": _stats(one, findings),
        "timelines": _timelines(one),
        "perfetto": _perfetto_file(capture_dir / (name + ARTIFACTS["pftrace_gz"])),
    }
    return write_text(capture_dir / (name + ARTIFACTS["html"]), render(data))


# -- the parts of the payload ------------------------------------------------------------


def _load(found: list[tuple[str, Path]]) -> list[tuple[str, Path, trace_mod.Trace]]:
    return [(label, path, trace_mod.load(path)) for label, path in found]


def _title(location: Path, record: dict[str, Any] | None) -> str:
    display = (record or {}).get("target", {}).get("display")
    return f"iket report · {display}" if display else f"iket report · {location.name}"


def _meta(record: dict[str, Any] | None) -> dict[str, Any]:
    """What the header shows; everything optional, so a bare trace gets a report too."""
    if not record:
        return {}
    versions = record.get("versions", {})
    gpus = versions.get("gpus") or []
    return {
        "status": record.get("status"),
        "command": " ".join(record.get("command") or record.get("argv") or []),
        "cwd": record.get("cwd"),
        "started_at": record.get("started_at"),
        "duration_s": record.get("duration_s"),
        "phases": {k: v for k, v in (record.get("phases") or {}).items() if v is not None},
        "gpu": "; ".join(f"{g.get('name')} (driver {g.get('driver')})" for g in gpus),
        "versions": {k: v for k, v in versions.items() if k != "gpus"},
        "processes": len(record.get("processes", [])),
    }


def _stats(
    processes: list[tuple[str, Path, trace_mod.Trace]], findings: list[Finding] | None = None
) -> list[dict[str, Any]]:
    """Exactly ``iket show --format json``'s ``processes``, from the already loaded traces
    (``findings``: the one trace's lint findings, where the caller has them already)."""
    summaries = []
    for label, path, loaded in processes:
        summaries += summary_mod.summarize_loaded(label, path, loaded, findings=findings)
    return summary_mod.to_json(summaries)["processes"]


def _timelines(
    processes: list[tuple[str, Path, trace_mod.Trace]], *, budget: int | None = None
) -> list[dict[str, Any]]:
    budget = budget or EVENT_BUDGET
    launches = sum(len(t.launches) for _, _, t in processes) or 1
    share = max(budget // launches, 1)
    return [
        {
            "process": label,
            "launches": [_launch(loaded, n, launch, share) for n, launch in enumerate(loaded.launches)],
        }
        for label, _, loaded in processes
    ]


def _launch(loaded: trace_mod.Trace, number: int, launch: trace_mod.Launch, budget: int) -> dict[str, Any]:
    """One launch for the timeline: whole warps, in SM/CTA/warp order, within ``budget``."""
    locations = loaded.locations
    used = set(launch.warps.loc) | set(launch.ranges.loc) | set(launch.markers.loc)

    def where(loc: int) -> tuple:
        info = locations[loc] if 0 <= loc < len(locations) else {}
        return (info.get("smId", -1), tuple(info.get("ctaId", (-1, -1, -1))), info.get("warpId", -1))

    order = sorted(used, key=lambda loc: (where(loc), loc))
    per_row = Counter(launch.ranges.loc) + Counter(launch.markers.loc)  # events per warp
    kept, events = [], 0
    for loc in order:
        if kept and events + per_row[loc] > budget:
            break
        kept.append(loc)
        events += per_row[loc]
    row_of = {loc: row for row, loc in enumerate(kept)}
    r, m, w = launch.ranges, launch.markers, launch.warps
    starts = [min(c) for c in (w.start, r.start, m.start) if len(c)]
    origin = min(starts, default=0)
    span = max((max(c) for c in (w.end, r.end, m.start) if len(c)), default=origin) - origin
    # The page reads int32s: a launch longer than 2.1 s is stored in units of `unit` ns.
    unit = max(1, -(-span // INT32_MAX))
    names: dict[int, int] = {}

    def name(index: int) -> int:
        return names.setdefault(index, len(names))

    ranges, marks, warps = array("i"), array("i"), array("i")
    for i in range(len(r)):
        row = row_of.get(r.loc[i])
        if row is not None:
            start, end = (r.start[i] - origin) // unit, (r.end[i] - origin) // unit
            ranges.extend((row, name(r.name[i]), start, end - start))
    for i in range(len(m)):
        row = row_of.get(m.loc[i])
        if row is not None:
            marks.extend((row, name(m.name[i]), (m.start[i] - origin) // unit))
    for i in range(len(w)):
        row = row_of.get(w.loc[i])
        if row is not None:
            warps.extend((row, (w.start[i] - origin) // unit, (w.end[i] - origin) // unit))
    return {
        "index": number,
        "kernel": launch.kernel,
        "grid": list(launch.grid),
        "block": list(launch.block),
        "span": span,
        "unit": unit,
        "rows": [list(where(loc)) for loc in kept],
        "names": [loaded.name(index) for index in names],
        "ranges": _b64(ranges),
        "marks": _b64(marks),
        "warps": _b64(warps),
        "total_rows": len(order),
        "total_ranges": len(r),
        "total_marks": len(m),
        "shown_ranges": len(ranges) // 4,
        "shown_marks": len(marks) // 3,
    }


def _b64(values: array) -> str:
    """Little-endian int32s (the page reads them with an Int32Array), base64."""
    if sys.byteorder != "little":
        values = array(values.typecode, values)
        values.byteswap()
    return base64.b64encode(values.tobytes()).decode("ascii")


def _perfetto(found: list[tuple[str, Path]]) -> dict | None:
    """The gzip'd Perfetto trace of a one-process capture, if small enough to embed."""
    if len(found) != 1:
        return None
    trace_path = found[0][1]
    return _perfetto_file(trace_path.with_name(trace_path.name.split(".")[0] + ARTIFACTS["pftrace_gz"]))


def _perfetto_file(gz: Path) -> dict[str, Any] | None:
    """``{name, b64}``: embedded when small; ``b64`` null means: ask the user for the file."""
    if not gz.is_file():
        return None
    size = gz.stat().st_size
    embedded = base64.b64encode(gz.read_bytes()).decode("ascii") if size <= EMBED_PERFETTO_MAX else None
    return {"name": gz.name, "bytes": size, "b64": embedded}
