"""A decode worker process: ``python -m iket_cli.decode.worker SPEC`` decodes one task.

SPEC is the task as JSON, with the pid of the CLI that started it. Errors go to stderr as
one line; the exit status says whether the task succeeded (ENOSPC or EDQUOT: the disk is
full). A decoder that aborts (a corrupt capture) takes only this process, and the worker
dies with the CLI (a parent-death signal), so a killed CLI leaves no decode running.
"""

from __future__ import annotations

import json
import sys

from ..capture.tree import die_with_parent
from .export import decode
from .tasks import DISK_FULL, Task


def main(spec: str) -> int:
    data = json.loads(spec)
    die_with_parent(data["parent"])
    outcome = decode(Task.from_dict(data))
    if outcome.error:
        sys.stderr.write(outcome.error + "\n")
        return outcome.errno if outcome.errno in DISK_FULL else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
