"""The JSON export's wing: a process's export by launches and CTA chunks, merged back byte for
byte.

``export`` runs it in the pool (:class:`..base.Run`); ``merge`` spools a part and merges the
launches' parts; ``stitch`` plans a launch stitched from its chunks and ``stitch_jobs``
writes its bytes in the workers; ``indices`` finds and rewrites table indices; ``layout``
is what the merge relies on of the decoder's JSON; ``columns`` assembles the trace model
from the parts' scans, for the report.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...tasks import Outcome, Task
    from ..base import Run
    from ..launches import LaunchPart

#: The kinds of job this wing's workers write.
JOBS = ("stitch",)


def by_launches(run: Run, task: Task, launches: list[LaunchPart]) -> Outcome:
    """Export ``task`` by its launches in the pool's workers, merged into its file."""
    from .export import by_launches as export

    return export(run, task, launches)


def export_part(task: Task, decoder: Any, hold: Callable[[str, Any], None] | None = None) -> list[str]:
    """One launch of a split JSON export, or a chunk of one: spooled with what the merge
    and the report will need of it (its indices, which a chunk's stitch needs whatever its
    launch; its columns, when the report reads the trace back). Nothing is kept in memory."""
    from ...tasks import columns_name
    from . import columns, merge

    spooled = task.out_dir / task.outputs()[0]
    merge.spool(decoder, spooled, find_indices=task.part[0] > 0 or task.chunk is not None)
    if columns.wanted(task.formats):
        columns.keep(spooled, spooled.with_name(columns_name(spooled.name)))
    return task.outputs()


def export_whole(raw: Path, out: Path, decoder_class: Any) -> bool:
    """The whole export of ``raw`` to ``out``, by launches one after another in this process
    (much faster than one whole decode); False if it does not split."""
    from .merge import export_json

    return export_json(raw, out, decoder_class)


def run_job(job: dict, held: dict[str, Any]) -> dict | None:
    """Write one job of a launch's stitch (:func:`.stitch_jobs.write`)."""
    from .stitch_jobs import write

    write(job)
    return None


def spool_kept(part: Any, spool: Path) -> None:
    raise ValueError("the JSON export keeps no part in memory")


def preload() -> None:
    from . import columns  # noqa: F401
