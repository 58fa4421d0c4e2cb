"""``iket report``: one self-contained HTML file per capture, readable offline.

run-iket's ``.html`` loads the Perfetto UI from the internet and needs an HTTP server; on an
air-gapped cluster, or opened from a CI artifact, it shows nothing. This report carries
everything inline (CSS, JS, data; no CDN, no fetch), so it opens from ``file://``:

* the manifest's metadata (command, GPU, versions, phase times);
* the statistics of ``iket show --format json``, the same numbers, as sortable tables;
* a canvas timeline per launch: a row per warp grouped by SM and CTA (and labelled with
  its role where the capture has CuTe DSL's ``kernel_symbols.json``), push/pop ranges as
  bars by depth, token ranges on a lane of their own per name, marks as ticks, the arrows
  of the capture's DAGs, payloads on hover, zoom and pan.

The statistics always cover every event; what the timeline embeds, and how, is
:mod:`.report_data`'s.
"""

from __future__ import annotations

import base64
import html
import json
from collections import Counter
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..analysis import flows as flows_mod
from ..analysis import spread
from ..analysis import summary as summary_mod
from ..analysis.flows import Flow
from ..analysis.lint import Finding
from ..model import atomic, outputs
from ..model import trace as trace_mod
from ..model.annotations import Dag, Roles, dags_for, roles_for
from ..model.completeness import of_process
from ..model.folder import Beside, mode_of, process_label
from ..model.manifest import replay_line, window_line
from ..model.names import Namer, short
from ..model.reading import Opened, open_capture
from ..model.vocab import ARTIFACTS, PAYLOAD_TYPES, stem
from . import report_data

TEMPLATE = "report_template.html"  # package data beside this module
EMBED_PERFETTO_MAX = 4 << 20  # gzip'd Perfetto traces up to this size ride along for the button
_DATA_MARK = "/*IKET-DATA*/null"
_DATA_OPEN = '<script id="iket-data" type="application/json">'


def build(opened: Opened, *, title: str | None = None, roles_file: Path | None = None) -> str:
    """The report of an opened capture, as HTML text."""
    location, record = opened.location, opened.manifest
    found = [(seen.label, seen.path) for seen in opened.found]
    processes = [(seen.label, seen.path, trace) for seen, trace in opened.unfiltered()]
    roles = roles_for(location, explicit=roles_file)
    dags = dags_for(location)
    arrows = flows_mod.flows(processes[0][2], dags) if dags and len(processes) == 1 else []
    data = {
        "kind": "capture",
        "title": title or _title(location, record),
        "meta": _meta(record),
        "stats": _stats(processes) if not spread.repeated(record) else _pooled(opened),
        "timelines": report_data.timelines(processes, roles=roles, flows=arrows),
        "pipeline": _pipeline(processes, dags, roles),
        "perfetto": _perfetto(found),
        **_annotations(dags),
    }
    return render(data)


def build_diff(base: Opened, new: Opened, changes: list[dict[str, Any]], stat: str) -> str:
    """A side-by-side comparison: the diff table, and each capture's timelines."""
    sides = []
    for side in (base, new):
        processes = [(seen.label, seen.path, trace) for seen, trace in side.unfiltered()]
        sides.append(
            {
                "title": str(side.location),
                "meta": _meta(side.manifest),
                "timelines": report_data.timelines(processes, budget=report_data.EVENT_BUDGET // 2),
            }
        )
    data = {
        "kind": "diff",
        "title": f"iket diff {base.location} {new.location}",
        "stat": stat,
        "changes": changes,
        "sides": sides,
        **_annotations([]),
    }
    return render(data)


#: Characters a JSON text inside a ``<script>`` must not hold raw (JSON reads them back).
_SCRIPT_UNSAFE = "<>&\u2028\u2029"


def render(data: dict[str, Any]) -> str:
    """Put ``data`` into the page template. ``<``, ``>`` and ``&`` are written as JSON escapes,
    so no name can end the script (``</script>``) or turn its rest into a comment (``<!--``),
    and U+2028/9 too, which older engines read as line ends inside a string."""
    template = resources.files(__package__).joinpath(TEMPLATE).read_text(encoding="utf-8")
    payload = _script_safe(json.dumps(data, separators=(",", ":")))
    page = template.replace(_DATA_MARK, payload, 1)
    return page.replace("{{TITLE}}", html.escape(data["title"]), 1)


def _script_safe(text: str) -> str:
    """``text`` with each of :data:`_SCRIPT_UNSAFE` written as its JSON escape. One
    ``str.replace`` a character, not ``str.translate``: once a string has one character to
    map, translate goes through the rest of it a character at a time (docs/history/benchmarks.md,
    "The report's data escaped")."""
    for char in _SCRIPT_UNSAFE:
        text = text.replace(char, f"\\u{ord(char):04x}")
    return text


def embedded(page: Path) -> dict[str, Any]:
    """The data a report carries (for scripts and tests): the inverse of :func:`render`."""
    text = Path(page).read_text(encoding="utf-8")
    start = text.index(_DATA_OPEN) + len(_DATA_OPEN)
    return json.loads(text[start : text.index("</script>", start)])


def write(location: Path, out: Path, *, title: str | None = None, roles_file: Path | None = None) -> Path:
    """Write the report of the capture at ``location`` (a directory, its manifest or one
    trace) to ``out`` atomically (``out`` checked before the work)."""
    outputs.check_file(out, [location], what="report")
    return atomic.write(out, build(open_capture(location), title=title, roles_file=roles_file))


def process_page(
    capture_dir: Path,
    record: dict[str, Any],
    process: dict[str, Any],
    loaded: trace_mod.Trace,
    findings: list[Finding],
    *,
    roles: Roles | None = None,
    dags: list[Dag] | None = None,
    flows: list[Flow] | None = None,
    parts: TraceParts | None = None,
) -> Path:
    """Write ``iket_pid_<hex>.html`` for one process of a capture (``--postprocess html``).

    ``record`` is the manifest as it stands (it may not be on disk yet); ``loaded`` and
    ``findings`` are the process's trace and its lint findings, loaded and linted once by
    the caller; ``roles``, ``dags`` and ``flows`` (CuTe DSL's warp roles and the arrows of
    its DAGs) label the rows and draw the arrows; ``parts``: :func:`trace_parts` of the
    same, where already worked out. The page shows the capture's metadata and that one
    process.
    """
    name = stem(process["pid_hex"])
    shown = Path(process["artifacts"]["trace_json"]["path"])  # relative: the capture may still be staged
    label = process_label(process)
    parts = parts or trace_parts(loaded, roles=roles, dags=dags, flows=flows)
    data = {
        "kind": "capture",
        "title": f"{name} · {record['target'].get('display', '')}".strip(" ·"),
        "meta": _meta(record),
        "stats": _stats(
            [(label, shown, loaded)],
            findings,
            Beside(process, [], None, mode_of(record), of_process(record, process["pid_hex"])),
            parts.summed,
        ),
        "timelines": _labelled(parts.timelines, label),
        "pipeline": _labelled(parts.pipeline, label),
        "perfetto": _perfetto_file(capture_dir / (name + ARTIFACTS["pftrace_gz"])),
        **_annotations(dags),
    }
    return atomic.write(capture_dir / (name + ARTIFACTS["html"]), render(data))


@dataclass
class TraceParts:
    """The costly parts of a process's page, its trace's alone (its process not named yet):
    a capture works them out while its decode's other exports still run
    (:class:`iket_cli.pipeline.finish.Ahead`)."""

    summed: summary_mod.Summed
    timelines: list[dict[str, Any]]
    pipeline: list[dict[str, Any]]


def trace_parts(
    loaded: trace_mod.Trace,
    *,
    roles: Roles | None = None,
    dags: list[Dag] | None = None,
    flows: list[Flow] | None = None,
) -> TraceParts:
    """:class:`TraceParts` of one process's trace (the arguments as :func:`process_page`'s)."""
    return TraceParts(
        summary_mod.summarize_groups(loaded), *drawn_parts(loaded, roles=roles, dags=dags, flows=flows)
    )


def drawn_parts(
    loaded: trace_mod.Trace,
    *,
    roles: Roles | None = None,
    dags: list[Dag] | None = None,
    flows: list[Flow] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The timelines and the pipeline panel of :class:`TraceParts` (its statistics apart)."""
    one = [("", Path(), loaded)]
    return report_data.timelines(one, roles=roles, flows=flows), _pipeline(one, dags or [], roles)


def _labelled(rows: list[dict[str, Any]], label: str) -> list[dict[str, Any]]:
    return [{**row, "process": label} for row in rows]


def _pipeline(processes: list, dags: list[Dag], roles: Roles | None) -> list[dict[str, Any]]:
    """What ``iket show --pipeline`` says, per process and kernel with stages: the panel."""
    from dataclasses import asdict

    from ..analysis import stages

    found = []
    for label, _path, loaded in processes:
        for pipe in stages.pipelines(loaded, dags, roles):
            found.append({"process": label, "short": short(pipe.kernel), **asdict(pipe)})
    return found


def _annotations(dags: list[Dag] | None) -> dict[str, Any]:
    """What every page carries to name payload types and label arrows."""
    edges = [edge for dag in dags or [] for edge in dag.edges]
    return {
        "payload_types": {str(code): name for code, name in PAYLOAD_TYPES.items() if name},
        "edges": [{"source": e.source, "target": e.target, "label": e.label, "via": e.via} for e in edges],
    }


# -- the parts of the payload ------------------------------------------------------------


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
        **({"repeats": _repeats(record)} if spread.repeated(record) else {}),
        "extract": replay_line(record) if isinstance(record.get("extract"), dict) else None,
        "window": window_line(record),
        "health": record.get("completeness"),
    }


def _repeats(record: dict[str, Any]) -> str:
    """``5 (ok 4, drifted 1)``: the repeats of a repeated capture, by status."""
    counts = Counter(repeat["status"] for repeat in record["repeats"])
    return f"{len(record['repeats'])} ({', '.join(f'{status} {n}' for status, n in counts.items())})"


def _stats(
    processes: list[tuple[str, Path, trace_mod.Trace]],
    findings: list[Finding] | None = None,
    context: Beside | None = None,
    summed: summary_mod.Summed | None = None,
) -> list[dict[str, Any]]:
    """Exactly ``iket show --format json``'s ``processes``, from the already loaded traces
    (``findings``, ``context`` and ``summed``: the one trace's lint findings, what its
    capture says of it and its summaries, where the caller has them already)."""
    summaries = []
    namer = Namer(launch.kernel for _, _, loaded in processes for launch in loaded.launches)
    for label, path, loaded in processes:
        summaries += summary_mod.summarize_loaded(
            label, path, loaded, findings=findings, namer=namer, context=context, summed=summed
        )
    return summary_mod.to_json(summaries)["processes"]


def _pooled(opened: Opened) -> list[dict[str, Any]]:
    """A repeated capture's statistics as ``iket show`` gives them: each process pooled over
    its repeats, each range with its per-repeat medians' spread."""
    return summary_mod.to_json(summary_mod.summarize_capture(opened))["processes"]


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
