"""Where a command's own outputs may go: never over what it reads, a capture's own files or ``/``.

``iket report -o``, ``iket diff --html``, ``iket run --junit/--summary`` write one file;
``iket export -o`` and ``iket run``'s output root write into a folder. A path given by
mistake (tab completion into a capture, a copied command line) must not overwrite the
capture it reads, the manifest that makes a folder a capture, or a file at the root of the
file system: each is refused (exit 2) before anything is written. (Capture directories have
rules of their own: :mod:`iket_cli.capture.outdir`.)
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..errors import IketError, UsageError
from . import manifest as manifest_mod
from .vocab import LOG_NAME, MANIFEST_NAME, PROCS_NAME, REPEAT_PREFIX, WARM_LOG_NAME

#: Files of a capture that no manifest lists but that are its own.
_OWN_NAMES = (MANIFEST_NAME, LOG_NAME, WARM_LOG_NAME, PROCS_NAME)


def check_file(out: Path, reads: Iterable[Path] = (), *, what: str = "output") -> Path:
    """Refuse (one line, exit 2) an output file that cannot or must not be written: a folder
    that does not exist, a directory, one of ``reads`` (the command's inputs), or a file that
    belongs to an iket capture (its manifest, its log, an artifact its manifest lists)."""
    out = Path(out)
    if not out.parent.is_dir():
        raise UsageError(f"cannot write {out}: {out.parent} is not a directory", hint="create it first")
    if out.is_dir():
        raise UsageError(f"cannot write the {what} {out}: it is a directory", hint="give a file name")
    real = out.resolve()
    for path in reads:
        if Path(path).is_file() and Path(path).resolve() == real:
            raise UsageError(
                f"the {what} {out} is {path}, which this command reads", hint="write it to another file"
            )
    owner = _capture_owning(real)
    if owner is not None:
        raise UsageError(
            f"the {what} {out} is a file of the capture {owner}; writing it would break the capture",
            hint="write it to another file (a new name inside the capture is fine)",
        )
    return out


def check_folder(folder: Path, *, what: str = "output folder") -> Path:
    """Refuse a folder for a command's outputs that is the root of the file system."""
    if Path(folder).resolve() == Path("/"):
        raise UsageError(
            f"the {what} {folder} is the root directory; refusing to write there",
            hint="give a folder of its own, e.g. -o ./iket-out",
        )
    return Path(folder)


def _capture_owning(real: Path) -> Path | None:
    """The capture that ``real`` (an absolute path) is one of the own files of, if any: the
    folder above it, or the one above that for a repeat's folder."""
    folders = [real.parent]
    if real.parent.name.startswith(REPEAT_PREFIX):
        folders.append(real.parent.parent)
    for folder in folders:
        if manifest_mod.status_of(folder) is None:
            continue
        relative = real.relative_to(folder).as_posix()
        if relative in _OWN_NAMES or real.name in _OWN_NAMES or relative in _listed(folder):
            return folder
    return None


def _listed(capture_dir: Path) -> set[str]:
    """Every file the capture's manifest names, relative to the capture."""
    try:
        record = manifest_mod.read(capture_dir)
    except IketError:  # changed since status_of read it: nothing is named
        return set()
    listed = set()
    for process in record["processes"]:
        listed.update(artifact["path"] for artifact in process["artifacts"].values())
        if process["raw"]:
            listed.add(process["raw"])
    return listed
