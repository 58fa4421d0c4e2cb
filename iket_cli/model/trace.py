"""A compact, columnar model of ``*.trace.json``, loaded without ``json.load``.

``json.load`` makes one Python dict per range, marker and warp: seconds and gigabytes for a
big trace (docs/history/benchmarks.md, "Loading a trace and summarising it"). The decoder writes
compact JSON with sorted keys, so each record kind has one shape: each launch's header is
matched by a pattern, its records are read by numpy in chunks
(:mod:`iket_cli.model.numscan`) into typed arrays (``array('q')`` for timestamps,
``array('i')`` for indices), several times faster and in a small part of the memory. The
string and location tables sit at the end of the file and are parsed on their own. A file in
any other layout (pretty-printed, reordered, floating-point values) falls back to
``json.load`` and gives the same model or names the problem.
"""

from __future__ import annotations

import bisect
import mmap
import re
from array import array
from dataclasses import dataclass, field, fields
from pathlib import Path

from ..errors import ManifestError
from . import jsonio, payloads
from .tracecheck import checked
from .vocab import PUSH_POP

_LAUNCH = re.compile(
    rb'\{"blockDimX":(\d+),"blockDimY":(\d+),"blockDimZ":(\d+),"contextId":\d+,'
    rb'"enabledCluster":(\{[^}]*\}),"gridDimX":(\d+),"gridDimY":(\d+),"gridDimZ":(\d+),'
    rb'"gridId":(\d+),"kernelName":("(?:[^"\\]|\\.)*")'
)
_TABLES = b'],"locationTable":'
#: Where the launches of their own begin, after the CUDA graphs' (``graphLaunches``), and
#: each graph replay's key before its launches.
_LAUNCHES = b',"launches":['
_SINGLE_CLUSTER = b'"singleClusterActive":'
_GRAPH_KEY = re.compile(rb'"((?:[^"\\]|\\.)*)":\[\{"blockDimX":')
#: How the decoder's own layout begins (keys sorted, no spaces).
DECODER_HEAD = b'{"graphLaunches":{'
SCHEMA_VERSION = 1


@dataclass
class Columns:
    """Parallel arrays of one record kind within one launch.

    ``kind`` (ranges) is the range type: :data:`~iket_cli.model.vocab.PUSH_POP` for
    ``range_push``/``range_pop`` (stack-nested within a warp) or
    :data:`~iket_cli.model.vocab.START_END` for token ranges (``range_start``/``range_end``:
    they may overlap and span loop iterations). The payload columns hold the payload type
    (0: none, see :data:`~iket_cli.model.vocab.PAYLOAD_TYPES`) and value of a mark, or of a
    range's start and end events; they are empty when the trace carries no payload at all.
    Values are doubles: exact for integers up to 2**53.
    """

    name: array = field(default_factory=lambda: array("i"))
    loc: array = field(default_factory=lambda: array("i"))
    start: array = field(default_factory=lambda: array("q"))
    end: array = field(default_factory=lambda: array("q"))
    kind: array = field(default_factory=lambda: array("i"))
    ptype: array = field(default_factory=lambda: array("i"))
    pval: array = field(default_factory=lambda: array("d"))
    ptype_end: array = field(default_factory=lambda: array("i"))
    pval_end: array = field(default_factory=lambda: array("d"))

    def __len__(self) -> int:
        return len(self.start)

    @property
    def has_payloads(self) -> bool:
        return len(self.ptype) == len(self.start) and any(self.ptype)


@dataclass
class Launch:
    """One kernel launch: its configuration and its ranges, markers and warp lifetimes.

    For markers ``start`` holds the timestamp and ``end`` is unused; for warp lifetimes
    ``name`` is unused.
    """

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    grid_id: int
    ranges: Columns = field(default_factory=Columns)
    markers: Columns = field(default_factory=Columns)
    warps: Columns = field(default_factory=Columns)
    #: the launch's ``enabledCluster`` (x, y, z): the cluster IKET recorded; None where unknown
    cluster: tuple[int, int, int] | None = None
    #: the CUDA graph replay it ran in (the trace's ``graphLaunches`` key, ``graph_exec_2:0``);
    #: None for a launch of its own. A trace lists graph launches after the others.
    graph: str | None = None
    #: ``singleClusterActive``: only one cluster's CTAs were traced (``--enabled-cluster``)
    single_cluster: bool = False


@dataclass
class Trace:
    """A whole ``*.trace.json``: launches plus the string and location tables."""

    path: Path
    launches: list[Launch]
    strings: list[str]
    locations: list[dict]

    def name(self, index: int) -> str:
        return self.strings[index] if 0 <= index < len(self.strings) else f"#{index}"


#: The record kinds of a launch (:class:`Launch`'s columns).
KINDS = ("markers", "ranges", "warps")


def load(path: Path, kinds: tuple[str, ...] = KINDS) -> Trace:
    """Load a trace file into the columnar model. Raises ManifestError if it is not one.

    ``kinds``: the record kinds to read (the others stay empty; a reader of ranges alone
    skips the markers' scan). The general ``json.load`` path reads them all."""
    path = Path(path)
    if not path.is_file():
        what = (
            "is not a regular file (a FIFO, a device or a link to one)" if path.exists() else "does not exist"
        )
        raise ManifestError(f"trace {path} {what}", hint="give a capture or a *.trace.json")
    if path.stat().st_size == 0:
        raise ManifestError(f"trace {path} is empty", hint="decode it again: iket postprocess DIR")
    with open(path, "rb") as handle:
        decoders = (
            handle.read(len(DECODER_HEAD)) == DECODER_HEAD
        )  # only the decoder's layout is mapped and scanned
    if decoders:
        with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            if data.rfind(_TABLES) > 0:
                try:
                    return checked(_scan(path, data, kinds))
                except (ValueError, KeyError, TypeError, AttributeError):
                    pass  # another layout or a damaged tail: the general path reads it or names the problem
    return checked(_from_json(path))


def _scan(path: Path, data, kinds: tuple[str, ...] = KINDS) -> Trace:
    tables_at = data.rfind(_TABLES)
    tail = jsonio.parse(b"{" + data[tables_at + 2 :])
    _check_version(path, tail.get("meta"))
    launches_at = data.find(_LAUNCHES, 0, tables_at)  # graph launches come before it
    if launches_at < 0:
        raise ValueError("no launches list")
    heads = _launch_heads(data, tables_at)
    found = _GRAPH_KEY.finditer(data, len(DECODER_HEAD) - 1, launches_at)
    keys = [(k.start(), jsonio.parse(b'"' + k[1] + b'"')) for k in found]
    starts = [at for at, _ in keys]  # in file order: each head's replay found by bisection
    launches, graphs = [], []
    for number, head in enumerate(heads):
        end = heads[number + 1].start() if number + 1 < len(heads) else tables_at
        after = bisect.bisect_left(starts, head.start())  # the first replay key after this head
        in_graph = head.start() < launches_at
        graph = keys[after - 1][1] if in_graph and after else None
        if in_graph and graph is None:
            raise ValueError("a graph launch outside a graph")
        launch = Launch(
            kernel=jsonio.parse(head[9]),
            block=(int(head[1]), int(head[2]), int(head[3])),
            grid=(int(head[5]), int(head[6]), int(head[7])),
            grid_id=int(head[8]),
            cluster=_cluster(jsonio.parse(head[4])),
            graph=graph,
        )
        stop = starts[after] if after < len(starts) else launches_at
        if launch.graph and stop < end:  # the last of its replay: its bytes end before ``]}`` or ``],``
            end = data.rfind(b"}]", head.end(), stop)
        _fill(launch, data, head.end(), end, kinds)
        flag = data.rfind(_SINGLE_CLUSTER, head.end(), end)  # just before its warps: found from the end
        value = flag + len(_SINGLE_CLUSTER)
        # 1 (or true) alone: a damaged flag never hides a launch's missing warps
        launch.single_cluster = flag >= 0 and data[value : value + 2] in (b"1,", b"1}", b"tr")
        (graphs if launch.graph else launches).append(launch)
    return Trace(path, launches + graphs, tail["stringTable"], tail["locationTable"])


def _cluster(value: object) -> tuple[int, int, int] | None:
    """``{"x": 1, "y": 1, "z": 1}`` as (1, 1, 1); None for anything else."""
    if isinstance(value, dict) and all(isinstance(value.get(k), int) for k in "xyz"):
        return (value["x"], value["y"], value["z"])
    return None


def _launch_heads(data, end: int) -> list[re.Match]:
    """Each launch's header, found by its first key (a windowed search, see numscan.find)."""
    from .numscan import find

    heads = []
    at = find(data, b'{"blockDimX":', 0, end)
    while at >= 0:
        head = _LAUNCH.match(data, at, end)
        if head is None:
            raise ValueError(f"a launch record at byte {at} has another layout")
        heads.append(head)
        at = find(data, b'{"blockDimX":', head.end(), end)
    return heads


def _fill(launch: Launch, data, start: int, end: int, kinds: tuple[str, ...] = KINDS) -> None:
    """Fill the launch's columns with numpy's vectorised scan (:mod:`iket_cli.model.numscan`).

    Raises ValueError where the bytes are not in the decoder's layout: :func:`load` then
    reads the file with ``json.load``.
    """
    from . import numscan

    columns = numscan.launch_columns(data, start, end, kinds)
    if columns is None:
        raise ValueError("a launch in another layout")
    for kind, named in columns.items():
        for name, values in named.items():
            setattr(getattr(launch, kind), name, values)


#: What a JSON document is, by its first byte (a trace is an object).
_STARTS = {b"[": "array", b'"': "string", b"n": "null", b"t": "boolean", b"f": "boolean"}
_STARTS.update({digit.encode(): "number" for digit in "-0123456789"})
_JSON_NAMES = {
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


#: The largest trace read by the general path (any JSON layout): the decoder's own layout,
#: whatever its size, goes through the scanner; only a trace rewritten by another tool
#: comes here, and ``json.load`` takes many times the file's size in memory.
MAX_GENERAL_BYTES = 256 << 20


def _from_json(path: Path) -> Trace:
    """The slow, general path: any JSON layout of the same schema."""
    hint = "give a *.trace.json that run-iket or iket wrote, or decode it again: iket postprocess DIR"
    with open(path, "rb") as handle:
        head = handle.read(4096).lstrip()
    if not head.startswith(b"{"):
        kind = _STARTS.get(head[:1], "")
        what = (
            f"the document is a JSON {kind}, not an object"
            if kind
            else "it does not start with a JSON object"
        )
        raise ManifestError(f"trace {path} is not an IKET trace ({what})", hint=hint)
    size = path.stat().st_size
    if size > MAX_GENERAL_BYTES:
        raise ManifestError(
            f"trace {path} ({size >> 20} MB) is not in the layout run-iket writes; iket reads other "
            f"layouts up to {MAX_GENERAL_BYTES >> 20} MB",
            hint=hint,
        )
    try:
        doc = jsonio.parse(path.read_bytes())
        if not isinstance(doc, dict):
            raise TypeError(f"the document is a JSON {_JSON_NAMES.get(type(doc), 'value')}, not an object")
        _check_version(path, doc.get("meta"))
        graphs = doc.get("graphLaunches") or {}
        if not isinstance(graphs, dict) or not all(isinstance(g, list) for g in graphs.values()):
            raise TypeError("graphLaunches must map each graph replay to a list of launches")
        launches = []
        listed = [(raw, None) for raw in doc["launches"]]
        for raw, graph in listed + [(raw, key) for key, replay in graphs.items() for raw in replay]:
            launch = Launch(
                kernel=raw["kernelName"],
                block=(raw["blockDimX"], raw["blockDimY"], raw["blockDimZ"]),
                grid=(raw["gridDimX"], raw["gridDimY"], raw["gridDimZ"]),
                grid_id=raw["gridId"],
                cluster=_cluster(raw.get("enabledCluster")),
                graph=graph,
                single_cluster=raw.get("singleClusterActive") in (1, True),
            )
            for r in raw["ranges"]:
                launch.ranges.end.append(r["endTs"])
                launch.ranges.name.append(r["rangeNameIdx"])
                launch.ranges.start.append(r["startTs"])
                launch.ranges.loc.append((r["warpLocIdxs"] or [-1])[0])
                launch.ranges.kind.append(r.get("rangeType", PUSH_POP))
                events = r.get("internalEvents") or [{}]
                payloads.append(launch.ranges, events[0])
                payloads.append(launch.ranges, events[-1], end=True)
            for m in raw["markers"]:
                launch.markers.loc.append(m["locIdx"])
                launch.markers.name.append(m["markerNameIdx"])
                launch.markers.start.append(m["timestamp"])
                payloads.append(launch.markers, m)
            for w in raw["warpLifetimes"]:
                launch.warps.end.append(w["endTs"])
                launch.warps.loc.append(w["locIdx"])
                launch.warps.start.append(w["startTs"])
            launches.append(launch)
        payloads.drop_if_empty([c for launch in launches for c in (launch.ranges, launch.markers)])
        strings, locations = doc["stringTable"], doc["locationTable"]
        if not isinstance(strings, list) or not isinstance(locations, list):
            raise TypeError("stringTable and locationTable must be lists")
        return Trace(path, launches, strings, locations)
    except (ValueError, KeyError, TypeError, OverflowError, AttributeError, IndexError) as error:
        raise ManifestError(
            f"trace {path} is not an IKET trace ({error.__class__.__name__}: {error})",
            hint="give a *.trace.json that run-iket or iket wrote",
        ) from None


def _check_version(path: Path, meta: object) -> None:
    version = meta.get("version") if isinstance(meta, dict) else None
    if version != SCHEMA_VERSION:
        raise ManifestError(
            f"trace {path} has schema version {version}; iket reads version {SCHEMA_VERSION}",
            hint="upgrade iket-cli, or decode the raw capture again with this run-iket",
        )


def select(
    trace: Trace,
    *,
    kernel: str | None = None,
    range_name: str | None = None,
    launch: int | None = None,
    cta: tuple[int, int, int] | None = None,
    warp: int | None = None,
    sm: int | None = None,
    warps: set[int] | None = None,
) -> Trace:
    """A trace holding only what matches every given filter.

    ``kernel`` is a glob (or substring) on the kernel's raw, demangled or short name,
    ``launch`` the launch's index in the file (0-based), ``range_name`` keeps only ranges of
    that name (marks stay, so their offsets can still find their range), ``cta``/``warp``/``sm`` keep records
    located there, ``warps`` records of warps with those indices (a role's warps).
    """
    from . import names

    located = cta is not None or warp is not None or sm is not None or warps is not None

    def wanted_loc(index: int) -> bool:
        if index < 0 or index >= len(trace.locations):
            return not located
        where = trace.locations[index]
        return (
            (cta is None or tuple(where["ctaId"]) == cta)
            and (warp is None or where["warpId"] == warp)
            and (sm is None or where["smId"] == sm)
            and (warps is None or where["warpId"] in warps)
        )

    name_index = None
    if range_name is not None:
        name_index = trace.strings.index(range_name) if range_name in trace.strings else -2
    launches = []
    for number, item in enumerate(trace.launches):
        if launch is not None and number != launch:
            continue
        if kernel is not None and not names.matches(kernel, item.kernel):
            continue
        locs = _wanted(item, wanted_loc) if located else None
        chosen = Launch(item.kernel, item.grid, item.block, item.grid_id, cluster=item.cluster)
        chosen.ranges = _keep(item.ranges, locs, name_index)
        chosen.markers = _keep(item.markers, locs)
        chosen.warps = _keep(item.warps, locs)
        launches.append(chosen)
    return Trace(trace.path, launches, trace.strings, trace.locations)


def _wanted(launch: Launch, wanted_loc) -> set[int]:
    """The locations of ``launch``'s records that ``wanted_loc`` keeps."""
    import numpy as np

    every = np.unique(
        np.concatenate([np.asarray(c.loc, np.int64) for c in (launch.warps, launch.ranges, launch.markers)])
    )
    return {index for index in every.tolist() if wanted_loc(index)}


def _keep(columns: Columns, locs: set[int] | None, name: int | None = None) -> Columns:
    """The rows located in ``locs`` (None: anywhere) and, if given, of that name index;
    chosen by numpy, as a Python loop over a million-record launch is felt."""
    if locs is None and name is None:
        return columns
    import numpy as np

    mask = np.ones(len(columns), bool)
    if locs is not None:
        mask &= np.isin(np.asarray(columns.loc, np.int64), np.asarray(sorted(locs), np.int64))
    if name is not None:
        mask &= np.asarray(columns.name, np.int64) == name
    if mask.all():
        return columns
    rows = np.flatnonzero(mask)
    out = Columns()
    for column in fields(Columns):
        source = getattr(columns, column.name)
        if len(source):
            setattr(out, column.name, array(source.typecode, np.asarray(source)[rows].tobytes()))
    return out
