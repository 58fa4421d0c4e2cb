"""The completeness record, the manifest's ``completeness``: whether a capture holds all that
IKET should have recorded of what the workload launched, and each thing it lost.

IKET loses data without failing (docs/faults.md, "What IKET can lose, and how iket
tells"): a launch whose warps emit more timestamps than the budget records
nothing at all; a kernel launched in a CUDA graph is not traced; a module it cannot read is
left uninstrumented. Each such loss is one :class:`Loss`: the kernel, how many launches, what
was lost (``records`` of launches that are in the trace, or whole ``launches`` that are not),
its cause as far as it is known and the fix. The sources that were checked are named, and
those that could not be (a tracker pass reused without its count, an injection log not kept)
with why, so "complete" never claims more than was looked at. Built by
:mod:`iket_cli.analysis.completeness`; read by every place that shows numbers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

#: Causes of a loss, each with the fix iket names (``{needed}``: the budget the kernel needs).
BUDGET = "budget"
CUDA_GRAPH = "cuda-graph"
NESTED_GRAPH = "nested-graph"
UNREAD_MODULE = "unread-module"
NO_TRACE_DATA = "no-trace-data"
READBACK = "readback-timeout"
WINDOW_CALLS = "window-calls"
UNKNOWN = "unknown"
CAUSES = {
    BUDGET: "drop --max-ts-cnt-per-warp (the tracker pass sizes it) or pass {needed}",
    CUDA_GRAPH: "capture the kernel outside the CUDA graph (IKET did not trace its graph launches): "
    "an eager run of the same step, or --window around an eager call",
    NESTED_GRAPH: "launch the kernel outside child and conditional graph nodes (IKET does not trace them)",
    UNREAD_MODULE: "IKET could not read the module: check the log (iket.log) and report it to NVIDIA",
    NO_TRACE_DATA: "IKET could not make this kernel's data: check the log (iket.log) and report it to NVIDIA",
    READBACK: "the context ended before IKET copied the data: synchronize before the process exits",
    WINDOW_CALLS: "choose --calls among the calls the run makes",
    UNKNOWN: "",
}
#: ``iket lint``'s code for each cause: a loss is a finding of its own name.
LINT_CODES = {
    BUDGET: "budget-drop",
    CUDA_GRAPH: "graph-launch",
    NESTED_GRAPH: "nested-graph",
    UNREAD_MODULE: "unread-module",
    NO_TRACE_DATA: "no-trace-data",
    READBACK: "readback-drop",
    WINDOW_CALLS: "window-calls",
    UNKNOWN: "empty-launch",
}
#: What a loss took: records of launches that are in the trace, or launches that are not.
RECORDS, LAUNCHES = "records", "launches"
#: Where iket learnt of a loss (docs/manifest.md).
SOURCES = ("budget", "decode", "injection-log", "launches", "graph", "trace", "window")


@dataclass
class Loss:
    """One kernel's loss, of one cause."""

    kernel: str
    cause: str
    lost: str  # RECORDS or LAUNCHES
    launches: int  # launches affected: those that recorded nothing, or those missing
    message: str  # the sentence shown, the kernel's short name in it
    fix: str
    source: str  # one of SOURCES
    short: str = ""
    pid_hex: str | None = None
    records: int | None = None  # warp records dropped, where a source counts them
    needed: int | None = None  # the timestamps per warp the kernel needs, where known
    budget: int | None = None  # the budget it had

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def of(cls, recorded: dict[str, Any]) -> Loss:
        """A recorded loss (a manifest's), with the fields this iket knows (a later one may add some)."""
        return cls(**{key: value for key, value in recorded.items() if key in cls.__dataclass_fields__})


@dataclass
class Completeness:
    """A capture's losses and what was looked at to find them."""

    losses: list[Loss] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    #: Sources not checked, each with why (``{"source": ..., "why": ...}``).
    unchecked: list[dict[str, str]] = field(default_factory=list)

    @property
    def complete(self) -> bool | None:
        """No loss found; None where no source could be checked (nothing is claimed)."""
        if self.losses:
            return False
        return True if self.checked else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "complete": self.complete,
            "checked": list(self.checked),
            "unchecked": list(self.unchecked),
            "losses": [loss.to_dict() for loss in self.losses],
        }


def fix_for(cause: str, needed: int | None = None) -> str:
    """The fix of ``cause``, with the budget the kernel needs where known."""
    text = CAUSES.get(cause, "")
    return text.replace("{needed}", f"--max-ts-cnt-per-warp {needed}" if needed else "a larger value")


def losses_of(record: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The losses a manifest records (none where it has no completeness record)."""
    found = (record or {}).get("completeness")
    return list(found.get("losses") or []) if isinstance(found, dict) else []


def of_process(record: dict[str, Any] | None, pid_hex: str | None) -> list[dict[str, Any]] | None:
    """The losses of one process (and those no process is named for); None where the manifest
    has no completeness record (made before iket kept one, or by raw run-iket)."""
    found = (record or {}).get("completeness")
    if not isinstance(found, dict):
        return None
    return [loss for loss in found.get("losses") or [] if loss.get("pid_hex") in (pid_hex, None)]


def pooled(parts: list[tuple[str, dict[str, Any] | None]]) -> dict[str, Any]:
    """The completeness record of captures merged into one (``iket merge``): every part's
    losses; the sources every part checked; a part that keeps no record is said unchecked.
    ``parts``: (the part's name, its manifest's ``completeness`` or None)."""
    kept = [record for _, record in parts if isinstance(record, dict)]
    found = Completeness(
        losses=[Loss.of(loss) for record in kept for loss in record.get("losses") or []],
        checked=sorted(set.intersection(*(set(r.get("checked") or []) for r in kept))) if kept else [],
        unchecked=[u for record in kept for u in record.get("unchecked") or []],
    )
    found.unchecked += [
        {"source": "merge", "why": f"{name} keeps no completeness record"}
        for name, record in parts
        if not isinstance(record, dict)
    ]
    return found.to_dict()


def headline(record: dict[str, Any] | None) -> str | None:
    """``INCOMPLETE: 3 launches of stage_kernel recorded nothing: ...``: the capture's first
    loss and how many more; None where nothing was lost."""
    losses = losses_of(record)
    if not losses:
        return None
    first = losses[0]
    more = f" (and {len(losses) - 1} more loss(es): iket lint)" if len(losses) > 1 else ""
    fix = f"; {first['fix']}" if first.get("fix") else ""
    return f"INCOMPLETE: {first['message']}{fix}{more}"


_LOSS = {
    "kernel": (str,),
    "cause": (str,),
    "lost": (str,),
    "launches": (int,),
    "message": (str,),
    "fix": (str,),
    "source": (str,),
}
_OPTIONAL = {
    "short": (str,),
    "pid_hex": (str, type(None)),
    "records": (int, type(None)),
    "needed": (int, type(None)),
    "budget": (int, type(None)),
}


def validate(data: Any) -> list[str]:
    """How a manifest's ``completeness`` departs from its shape (empty when it conforms):
    readers print its messages, so each is typed."""
    if not isinstance(data, dict):
        return ["completeness is not an object"]
    errors = []
    if not isinstance(data.get("complete"), (bool, type(None))) or "complete" not in data:
        errors.append("completeness.complete is not true, false or null")
    if not all(isinstance(s, str) for s in _list(data, "checked")):
        errors.append("completeness.checked is not a list of sources")
    unchecked = _list(data, "unchecked")
    if not all(isinstance(u, dict) and all(isinstance(v, str) for v in u.values()) for u in unchecked):
        errors.append("completeness.unchecked is not a list of objects of text")
    losses = _list(data, "losses")
    for i, loss in enumerate(losses):
        errors += _loss(loss, f"completeness.losses[{i}]")
    if not errors and (data["complete"] is False) != bool(losses):
        errors.append("completeness.complete disagrees with its losses")
    return errors


def _list(data: dict, key: str) -> list:
    value = data.get(key, [])
    return value if isinstance(value, list) else [None]


def _loss(loss: Any, where: str) -> list[str]:
    if not isinstance(loss, dict):
        return [f"{where} is not an object"]
    for table, optional in ((_LOSS, False), (_OPTIONAL, True)):
        for key, types in table.items():
            if key not in loss:
                if not optional:
                    return [f"{where}.{key} is missing"]
            elif not isinstance(loss[key], types) or isinstance(loss[key], bool):
                return [f"{where}.{key} is not {'/'.join(t.__name__ for t in types)}"]
    return []
