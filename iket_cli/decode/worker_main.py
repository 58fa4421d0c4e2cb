"""A decode worker process: ``python -m iket_cli.decode.worker_main SPEC`` decodes one task;
``--serve PARENT`` decodes one task per line of its input, or writes one job of a launch's stitch
or of a Perfetto join, answering a line each (a long-lived worker, :class:`.workers.Server`).

SPEC is the task as JSON, with the pid of the CLI that started it. Errors go to stderr as
one line; the exit status says whether the task succeeded (ENOSPC or EDQUOT: the disk is
full). A decoder that aborts (a corrupt capture) takes only this process, and the worker
dies with the CLI (a parent-death signal), so a killed CLI leaves no decode running.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from ..system.filesystem import DISK_FULL
from ..system.tree import die_with_parent
from . import split
from .decoder import decode, preload
from .tasks import Task


def main(spec: str) -> int:
    data = json.loads(spec)
    die_with_parent(data["parent"])
    outcome = decode(Task.from_dict(data))
    if outcome.error:
        sys.stderr.write(outcome.error + "\n")
        return outcome.errno if outcome.errno in DISK_FULL else 1
    return 0


def serve(parent: int) -> int:
    """Decode each task read from stdin, or write each job of a split export
    (``{"pieces": job}``, by the wing that registered its kind, :func:`.split.run_job`);
    answer each on the original stdout with a JSON line (``error``, ``errno``). A part that
    its wing keeps in memory for its move (the Perfetto export's) stays here, and the parent
    sends its move to this worker alone: its answer says what the join needs of it
    (``described``), with no spool or sidecar written and read back. The decoder's own
    output goes to stderr, not into the answers."""
    die_with_parent(parent)
    preload()  # before the first request: a prestarted worker waits for its decode imported
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    held: dict[str, Any] = {}  # the parts kept, by spool name, until moved
    for line in sys.stdin:
        request = json.loads(line)
        if "pieces" in request:
            answer = _pieces(request["pieces"], held)
        elif "spool" in request:  # a part kept no longer: its move may go to any worker
            answer = _spooled(request["spool"], request["export"], held)
        else:
            answer = _decoded(request, held)
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
    return 0


def _decoded(request: dict, held: dict) -> dict:
    """The answer to a task: ``error``, ``errno``, and for a Perfetto part kept in ``held``,
    what the join needs of it. (Its own function: a part let go from ``held`` must not stay
    alive in a variable of the loop through the next export.)"""
    kept: dict[str, Any] = {}
    outcome = decode(Task.from_dict(request), hold=kept.__setitem__)
    answer = {"error": outcome.error, "errno": outcome.errno}
    for name, part in kept.items():
        held[name] = part
        answer["described"] = part.described
    return answer


def _spooled(name: str, export: str, held: dict) -> dict:
    """The part kept for ``name`` spooled to its files by its wing and let go."""
    try:
        split.spool_kept(export, held.pop(name), Path(name))
    except KeyError:
        return {"error": "no such part kept", "errno": None}
    except OSError as error:  # a full disk
        return {"error": error.strerror or str(error), "errno": error.errno}
    return {"error": None, "errno": None}


def _pieces(job: dict, held: dict) -> dict:
    """The answer to a job of a split export (a part in ``held`` moved, or a stitch's bytes
    written): ``error`` and ``errno`` (None when written), and what the job says of what it
    wrote."""
    try:
        said = split.run_job(job, held)
    except OSError as error:  # a full disk
        return {"error": error.strerror or str(error), "errno": error.errno}
    except ValueError as error:
        return {"error": str(error), "errno": None}
    return {"error": None, "errno": None, **(said or {})}


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        code = serve(int(sys.argv[2]))
        sys.stdout.flush()
        sys.stderr.flush()
        # its heap and modules given back by the kernel at once: the interpreter's own
        # teardown kept the CLI waiting some 30 ms at the decode's end
        os._exit(code)
    sys.exit(main(sys.argv[1]))
