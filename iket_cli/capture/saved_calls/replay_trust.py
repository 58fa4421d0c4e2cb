"""What ``--replay`` trusts: saved calls this user recorded on this machine, and no others.

Replaying saved calls imports the module their index names and loads the values they hold.
A capture is something people send each other and CI uploads, so what a capture carries is
treated as ``torch.load(weights_only=True)`` treats a file: as data. Three rules, whatever
the user says:

* the module is confined to the recorded source root (``path0``), which never lies inside
  the capture: a capture's own files are never imported;
* values other than arrays go through an allow-list unpickler (``_hook/iket_load.py``), and
  arrays are built from raw bytes and their records, without pickle;
* only regular files the index lists are read or copied, each of exactly the recorded size.

And by default one more: the saved calls must be ones this user recorded on this machine.
The record run leaves a digest of what it saved (index and files) in the user's cache;
``--replay`` recomputes it and refuses saved calls it does not know, with one line naming
the opt-in, ``--trust-replay``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from pathlib import Path

from ...errors import UsageError
from ...system import filesystem
from .._hook.iket_saved import INDEX, Damaged, listed_files, open_regular, read_index
from ..two_pass import trackers

#: The opt-in that replays saved calls recorded elsewhere or by someone else.
TRUST_FLAG = "--trust-replay"
#: Read and copied in blocks of this many bytes.
BLOCK = 1 << 20


def recorded_root(env: dict[str, str]) -> Path:
    return trackers.cache_root(env) / "recorded"


def digest(folder: Path, index: dict, into: Path | None = None) -> str:
    """What the saved calls in ``folder`` are, byte for byte: their index and every listed file
    (regular files of their recorded sizes, no link followed); with ``into``, also copied there."""
    hashed = hashlib.sha256()
    for name, size in [(INDEX, None), *listed_files(index)]:
        hashed.update(f"{name}\0".encode())
        with contextlib.ExitStack() as stack:
            out = None
            if into is not None:
                (into / name).parent.mkdir(parents=True, exist_ok=True)
                out = stack.enter_context(open(into / name, "xb"))
            for block in _blocks(folder / name, size):
                hashed.update(block)
                if out is not None:
                    out.write(block)
    return hashed.hexdigest()


def remember(folder: Path, env: dict[str, str]) -> None:
    """Note, in the user's cache, that this user recorded the saved calls in ``folder`` here."""
    found = digest(folder, read_index(str(folder)))
    root = recorded_root(env)
    root.mkdir(parents=True, exist_ok=True)
    (root / found).write_text(f"{time.time():.0f} {folder}\n")


def known(found: str, env: dict[str, str]) -> bool:
    return (recorded_root(env) / found).is_file()


def refuse_unknown(name: str, found: str, env: dict[str, str], trust: bool) -> None:
    """Exit 2 unless the saved calls were recorded here or the user opted in."""
    if trust or known(found, env):
        return
    raise UsageError(
        f"--replay {name}: its saved calls were not recorded by you on this machine",
        hint=f"replaying them imports the module they name and loads their values: pass {TRUST_FLAG} "
        "if you trust whoever made the capture, or record the calls yourself with --extract",
    )


def copy(source: Path, into: Path, index: dict) -> str:
    """Copy the saved calls' listed files (and nothing else) into the new folder ``into``; the
    digest of what was copied."""
    into.mkdir(parents=True)
    try:
        return digest(source, index, into)
    except OSError as error:
        if filesystem.is_full(error):
            needed = sum(size for _, size in listed_files(index))
            raise filesystem.disk_full(into.parent, needed, writing="the saved calls") from None
        raise UsageError(f"the saved calls cannot be copied: {error.strerror or error}") from None


def _blocks(path: Path, size: int | None):
    """The bytes of the regular file ``path``, checking its size (:class:`Damaged` otherwise)."""
    _no_links(path)
    fd = open_regular(str(path))
    with os.fdopen(fd, "rb") as handle:
        count = 0
        while block := handle.read(BLOCK if size is None else min(BLOCK, size - count + 1)):
            count += len(block)
            if size is not None and count > size:
                raise Damaged(f"{path.name} holds more than the {size} bytes recorded")
            yield block
    if size is not None and count != size:
        raise Damaged(f"{path.name} holds {count} bytes, {size} expected")


def _no_links(path: Path) -> None:
    """No folder between the saved calls' root and ``path`` is a link (the file itself is
    opened without following one)."""
    for parent in list(path.parents)[:2]:
        if parent.is_symlink():
            raise Damaged(f"{parent.name} is a symbolic link")
