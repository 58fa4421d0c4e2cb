"""The words of iket, defined once: file names, formats, choice lists, the raw-capture
layout and the GPU timer's step.

Every module and every click option takes these from here, so a name that changes
(a format, a file stem) changes in one place.
"""

from __future__ import annotations

from ..errors import Status

# -- files of a capture directory ------------------------------------------------------
MANIFEST_NAME = "manifest.json"
LOG_NAME = "iket.log"
#: The warm standby's log (capture/two_pass/warm.py), kept beside ``iket.log``.
WARM_LOG_NAME = "warm.log"
#: ``--extract``: the saved calls of FUNC, inside a capture (capture/saved_calls/extract.py), and
#: ``--max-extract``'s default.
EXTRACT_DIR = "extract"
#: ``--window``/``--one-pass``: the windows' traces as the hook saved them (capture/in_process/child.py).
WINDOW_DIR = "window"
MAX_EXTRACT = "4G"
#: ``iket show --pipeline --wait-pattern``'s default: ranges named so are waiting, not work.
WAIT_PATTERN = "wait*"
#: One JSON line per Python process of the passes, written by the start-up hook.
PROCS_NAME = "processes.jsonl"
#: run-iket's ``--enable-stats`` report.
STATS_NAME = "run-iket.stats.json"
#: A failed attempt's evidence goes to ``DIR.failed/``.
FAILED_SUFFIX = ".failed"
#: Where ``--overhead``'s warp-trace run goes (kept inside DIR with ``--keep``).
OVERHEAD_DIR = "overhead"
#: ``iket merge --timeline``'s one Perfetto trace of every process.
TIMELINE_NAME = "timeline.pftrace"
#: ``iket run``'s record of its jobs, in the output root.
RUN_MANIFEST_NAME = "run-manifest.json"

# -- artifacts: run-iket's names, ``iket_pid_<hex>`` + a suffix per kind ---------------
ARTIFACT_STEM = "iket_pid_"
#: Artifact kind (as the manifest names it) -> file-name suffix.
ARTIFACTS = {
    "trace_json": ".trace.json",
    "perfetto": ".pftrace",
    "html": ".html",
    "pftrace_gz": ".pftrace.gz",
    # the Perfetto trace with the DAG's arrows (flows) added; the .pftrace stays run-iket's
    "flows": ".flows.pftrace",
}


def stem(pid_hex: str) -> str:
    """``iket_pid_0x2b5``: the name every artifact of one process starts with."""
    return f"{ARTIFACT_STEM}{pid_hex}"


def artifact_name(pid_hex: str, kind: str) -> str:
    """``iket_pid_0x2b5.trace.json`` for ``kind`` ``trace_json``."""
    return stem(pid_hex) + ARTIFACTS[kind]


def pid_of(file_name: str) -> str:
    """``0x2b5`` from ``iket_pid_0x2b5.trace.json`` (or the name up to its first dot)."""
    return file_name.split(".")[0].removeprefix(ARTIFACT_STEM)


def trace_glob() -> str:
    """The glob of JSON traces in a capture directory."""
    return f"{ARTIFACT_STEM}*{ARTIFACTS['trace_json']}"


# -- formats and choices ---------------------------------------------------------------
#: What a capture can be decoded into, in a stable order.
FORMATS = ("perfetto", "json", "html")
#: The exports of NVIDIA's decoder, each a decode task of its own.
JSON_EXPORT, PERFETTO_EXPORT = "json", "perfetto"
#: The decoder's exports each format needs: the HTML report is built from the JSON trace and
#: carries the gzip'd Perfetto trace beside it (its "Open in Perfetto UI" button).
FORMAT_EXPORTS = {
    "perfetto": (PERFETTO_EXPORT,),
    "json": (JSON_EXPORT,),
    "html": (JSON_EXPORT, PERFETTO_EXPORT),
}


def exports_for(formats) -> list[str]:
    """The decoder's exports that ``formats`` need, JSON first."""
    needed = {export for f in formats for export in FORMAT_EXPORTS.get(f, ())}
    return [export for export in (JSON_EXPORT, PERFETTO_EXPORT) if export in needed]


#: Artifact kinds that must exist per process once a format is written.
FORMAT_ARTIFACTS = {"perfetto": ("perfetto",), "json": ("trace_json",), "html": ("html", "pftrace_gz")}
#: ``iket profile --postprocess`` / ``iket run --postprocess``.
POSTPROCESS_CHOICES = (*FORMATS, "all", "none")
#: ``iket postprocess --format``.
DECODE_CHOICES = (*FORMATS, "all")
#: run-iket's ``--log-level``.
LOG_LEVELS = ("error", "warn", "info")
#: ``iket show --format``.
SHOW_FORMATS = ("table", "json", "csv", "markdown")
#: ``iket diff --format``.
DIFF_FORMATS = ("table", "json", "markdown")
#: ``iket lint --format``.
LINT_FORMATS = ("text", "json")
#: ``iket show --by``.
GROUPINGS = ("kernel", "launch", "cta", "warp", "sm", "role")
#: ``iket export`` / ``iket sql``: the tables of a capture (docs/schema.md), the file formats
#: ``iket export`` writes, and the outputs of ``iket sql``.
TABLE_NAMES = ("processes", "kernels", "launches", "warps", "ranges", "markers", "flows", "stages")
#: Tables added after the first exports: a folder exported without them is still read (empty).
LATER_TABLES = ("flows", "stages")
EXPORT_FORMATS = ("parquet", "csv")
SQL_FORMATS = ("table", "csv", "json", "markdown")
#: ``iket diff --stat``.
DIFF_STATS = ("median", "mean", "p90", "total")
#: Manifest ``mode``: what the capture pass recorded. ``instrumented``: the kernels' events
#: (ranges, marks) and warp lifetimes; ``warp-trace`` (``--warp-trace``): every launch of the
#: process, with warp lifetimes only.
INSTRUMENTED = "instrumented"
WARP_TRACE = "warp-trace"
MODES = (INSTRUMENTED, WARP_TRACE)
#: Manifest ``tracker.mode``: how a capture got its tracker output. ``fresh``: the tracker
#: pass ran; ``reused``: from iket's cache; ``given``: ``--tracker DIR``; ``none``:
#: ``--warp-trace`` (no tracker pass at all).
TRACKER_FRESH, TRACKER_REUSED, TRACKER_GIVEN, TRACKER_NONE = "fresh", "reused", "given", "none"
#: ``--tracker``: run the tracker pass unless a cached one fits (auto), always (fresh), or a DIR.
TRACKER_AUTO = "auto"
#: Manifest ``status`` values (:class:`iket_cli.errors.Status`, beside the exit codes).
STATUSES = (Status.OK, Status.SUSPECT, Status.PARTIAL, Status.FAILED, Status.TIMEOUT, Status.INTERRUPTED)
#: The statuses of a failed attempt's evidence (``DIR.failed/``): the next failure may replace it.
EVIDENCE_STATUSES = (Status.FAILED, Status.TIMEOUT, Status.INTERRUPTED)
#: What each command reads; they differ on purpose. ``iket show`` reads a capture whose
#: traces are whole: ``suspect`` too (the passes drifted: the trace is whole, its sizing by
#: the tracker pass is in doubt), not ``partial`` (some repeats are missing: its tables would
#: pool fewer repeats than asked without saying so).
SHOW_STATUSES = (Status.OK, Status.SUSPECT)
#: ``iket run``'s gate judges ``partial`` captures on the repeats they have (the gate says
#: when they are too few), not ``suspect`` ones (their numbers are in doubt).
GATE_STATUSES = (Status.OK, Status.PARTIAL)
#: ``iket merge`` takes only whole captures: a merged capture claims each of its parts whole.
MERGE_STATUSES = (Status.OK,)
#: ``--repeat N``: repeat k (2..N) of a capture lives in ``repeat-<k>/`` inside it; repeat 1
#: is the capture's own top level, so a reader that knows nothing of repeats reads repeat 1.
REPEAT_PREFIX = "repeat-"


def repeat_dir(index: int) -> str:
    """The folder of repeat ``index`` inside its capture ("" for repeat 1: the top level)."""
    return "" if index == 1 else f"{REPEAT_PREFIX}{index}"


def formats_for(choice: str) -> list[str]:
    """The formats a ``--postprocess`` choice produces, in a stable order."""
    if choice == "all":
        return list(FORMATS)
    return [] if choice == "none" else [choice]


def artifacts_for(formats: list[str]) -> list[str]:
    """Artifact kinds that must exist for each process after decoding ``formats``."""
    return [kind for fmt in formats for kind in FORMAT_ARTIFACTS[fmt]]


# -- how big the artifacts are -------------------------------------------------------------
#: Bytes of JSON trace per byte of raw capture (measured: docs/history/benchmarks.md, "Figures behind
#: the constants").
JSON_PER_RAW_BYTE = 25
#: Bytes of Perfetto trace per byte of raw capture (measured: the same section).
PERFETTO_PER_RAW_BYTE = 6

# -- the GPU timer ---------------------------------------------------------------------
#: The H200's global timer advances in steps of 32 ns: shorter durations read 0 or 32.
TIMER_STEP_NS = 32

# -- what run-iket leaves in its output directory with --keep --------------------------
RAW_DIR = "iket"  # the capture pass: RAW_DIR/pid_<hex>/iket.data.{json,bin}
TRACKER_DIR = "tracker"  # the tracker pass: TRACKER_DIR/pid_<hex>/tracker.json
GEN_CONFIG_DIR = "gen-config"
INTERMEDIATES = (TRACKER_DIR, GEN_CONFIG_DIR, RAW_DIR)
RAW_PROCESS_PREFIX = "pid_"
RAW_MANIFEST = "iket.data.json"
RAW_DATA = "iket.data.bin"
TRACKER_JSON = "tracker.json"
#: The config generation's output: the kernels to instrument (none in warp-trace mode).
INSTRUMENT_CONFIG = "instrument.config.json"


def raw_pid(folder_name: str) -> str | None:
    """``0x23f`` from a raw capture's process folder ``pid_0x23f``; None for any other name
    (``pid_0x23f<x``, ``pid_zz``: not run-iket's, and no pid)."""
    pid_hex = folder_name.removeprefix(RAW_PROCESS_PREFIX).lower()
    digits = pid_hex.removeprefix("0x")
    if not folder_name.startswith(RAW_PROCESS_PREFIX + "0x") or not digits or len(digits) > 8:
        return None
    return pid_hex if all(c in "0123456789abcdef" for c in digits) else None


def raw_manifest(pid_hex: str) -> str:
    """``iket/pid_0x2b5/iket.data.json``, relative to the capture directory."""
    return f"{RAW_DIR}/{RAW_PROCESS_PREFIX}{pid_hex}/{RAW_MANIFEST}"


# -- iket run ----------------------------------------------------------------------------
#: Job statuses that fail an ``iket run`` (exit 1); the others are ``ok`` and ``suspect``.
#: ``incomplete``: the capture was published, but IKET lost some of its data (its manifest's
#: completeness record): numbers a gate must not pass.
INCOMPLETE = "incomplete"
JOB_FAILING = ("failed", "timeout", "interrupted", "regressed", "error", "cancelled", INCOMPLETE)
#: Where ``iket run``'s jobs run (``--executor``, ``executor`` in iket.toml).
EXECUTORS = ("local", "slurm")
#: ``--executor slurm``'s folder in the output root: batch scripts, Slurm logs, job results.
SLURM_DIR = ".iket-slurm"

# -- IKET events ---------------------------------------------------------------------------
#: ``rangeType`` of a range: a token range (``range_start``/``range_end``, CuTe DSL: it may
#: overlap others and span loop iterations) or a stack range (``range_push``/``range_pop``).
START_END = 1
PUSH_POP = 2
#: How ``iket show`` and the report name the two range types (SQL's ``ranges.kind`` is the code).
RANGE_TYPES = {START_END: "start/end", PUSH_POP: "push/pop"}
#: ``payloadType`` codes (the decoder's ``IketEvtPayloadType``) and how iket names them.
PAYLOAD_TYPES = {
    0: None,
    1: "i8",
    2: "u8",
    3: "i16",
    4: "u16",
    5: "i32",
    6: "u32",
    7: "i64",
    9: "fp4",
    10: "fp8",
    11: "fp16",
    12: "bf16",
    13: "f32",
    14: "f64",
    15: "pointer",
    16: "u64",
}
#: Payloads of 64 bits: two words in the raw capture, one for the others.
PAYLOAD_WIDE = {7, 14, 15, 16}

# -- what CuTe DSL workloads write beside the trace -----------------------------------------
#: ``cutlass.pipeline.profiling.dump_profiling_metadata``: warp roles and pipeline barriers.
ROLES_NAME = "kernel_symbols.json"
#: ``iket.dag(name).save()``: dataflow edges between named regions (ranges).
DAG_SUFFIX = ".iket_dag.json"
#: Where CuTe DSL writes them when set (else the working directory).
DUMP_DIR_ENV = "CUTE_DSL_DUMP_DIR"
