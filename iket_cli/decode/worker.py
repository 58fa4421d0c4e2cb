"""A decode worker process: ``python -m iket_cli.decode.worker SPEC`` decodes one task.

SPEC is the task as JSON. Errors go to stderr as one line; the exit status says whether
the task succeeded. A decoder that aborts (a corrupt capture) takes only this process.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .export import decode
from .tasks import Task


def main(spec: str) -> int:
    data = json.loads(spec)
    task = Task(
        data["pid_hex"], Path(data["raw"]), Path(data["out_dir"]), data["export"], tuple(data["formats"])
    )
    outcome = decode(task)
    if outcome.error:
        sys.stderr.write(outcome.error + "\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
