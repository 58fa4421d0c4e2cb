"""The Perfetto export's wing: a process's trace by launches and CTA chunks, joined into the
trace NVIDIA's decoder would write whole.

``export`` runs it in the pool (:class:`..base.Run`); ``parts`` exports and describes a
part, then moves it, in its worker (kept in that worker's memory for the move where the
memory allows); ``events`` and ``tracks`` move events and descriptors to other tracks in
numpy (``varints``: protobuf varints in numpy); ``join`` plans the whole trace's numbering
and writes it; ``gzip_parts`` makes one gzip member of pieces deflated apart.
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
JOBS = ("move",)


def by_launches(run: Run, task: Task, launches: list[LaunchPart]) -> Outcome:
    """Export ``task`` by its launches in the pool's workers and join them."""
    from .export import by_launches as export

    return export(run, task, launches)


def export_part(task: Task, decoder: Any, hold: Callable[[str, Any], None] | None = None) -> list[str]:
    """A launch, or a chunk of one, exported and described; given to ``hold`` (its spool's
    name and the part) to be kept in this process for its move, else spooled to files."""
    from ...tasks import pftrace_beside
    from . import parts

    spooled = task.out_dir / task.outputs()[0]
    part = parts.exported(decoder, chunk=bool(task.chunk))
    if hold is not None:
        hold(str(spooled), part)
    else:
        parts.spool(part, spooled, *pftrace_beside(spooled))
    return task.outputs()


def export_whole(raw: Path, out: Path, decoder_class: Any) -> bool:
    """No sequential form: the decoder's own export is the whole one."""
    return False


def run_job(job: dict, held: dict[str, Any]) -> dict:
    """Move one part as the whole trace numbers it (:func:`.parts.move`): the part this
    worker keeps for it, or its spool."""
    from .parts import move

    return move(job, held.pop(job["spool"], None))


def spool_kept(part: Any, spool: Path) -> None:
    """A part kept for its move written to its spool and what the move reads beside it."""
    from ...tasks import pftrace_beside
    from .parts import spool as write

    write(part, spool, None, pftrace_beside(spool)[1])


def preload() -> None:
    from . import parts  # noqa: F401
