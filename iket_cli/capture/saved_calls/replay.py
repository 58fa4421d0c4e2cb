"""``iket profile --replay DIR``: the saved calls of an earlier capture, checked and copied.

Before anything runs, DIR's saved calls are checked against their format (``_hook/iket_saved.py``:
the index's shape, each listed file regular and of its recorded size), FUNC's module is
confined to the recorded source root outside the capture, and the calls must be ones this
user recorded here unless ``--trust-replay`` (:mod:`.replay_trust` says why). The attempt
then copies exactly the listed files into its own ``extract/`` and checks that they are what
was checked.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from ...errors import IketError, TargetError, UsageError
from ...model.vocab import EXTRACT_DIR
from .._hook import iket_saved as saved_format
from .._hook.iket_saved import INDEX
from ..targets import Target, find_module
from .extract import Extract, record_facts, signature


def from_capture(folder: Path, cwd: Path, env: dict[str, str], trust: bool) -> tuple[Target, Extract]:
    """``--replay DIR``: the target and FUNC of the capture whose saved calls are replayed,
    checked before anything runs (capture/saved_calls/replay_trust.py says what is trusted; exit 2)."""
    from ...errors import Status
    from ...model import manifest

    folder = (cwd / folder).resolve()
    data = manifest.read(folder)
    name = folder.name
    if data.get("status") not in (Status.OK, Status.SUSPECT, Status.PARTIAL):
        raise UsageError(
            f"--replay {name}: it is a failed capture's evidence (status {data.get('status')}), "
            "not a capture",
            hint="replay the capture that succeeded, or record the calls again with --extract",
        )
    saved = folder / EXTRACT_DIR
    if not data.get("extract") or saved.is_symlink() or not (saved / INDEX).exists():
        raise UsageError(
            f"--replay {name}: it holds no saved calls (it was not captured with --extract)",
            hint="capture it first: iket profile WORKLOAD --extract MODULE:FUNC -o DIR",
        )
    index = checked_index(saved, name)
    source = _confined(index, folder, name)
    found = _trusted(saved, index, name, env, trust)
    target = data["target"]
    args = target.get("args") or []
    if not all(isinstance(target.get(k), str) for k in ("kind", "spec")) or not all(
        isinstance(a, str) for a in args
    ):
        raise UsageError(
            f"--replay {name}: its manifest's target is not a target", hint="record the calls again"
        )
    extract = Extract(
        function=index["function"],
        module=index["module"],
        qualname=index["qualname"],
        calls=tuple(int(c["call"]) for c in index["calls"]),
        max_bytes=0,
        rank=index["rank"] if isinstance(index.get("rank"), int) and index["rank"] >= 0 else 0,
        stop_after=True,
        path0=index["path0"],
        source=source,
        replay_of=folder,
        saved=signature(index),
        digest=found,
    )
    return Target(target["kind"], target["spec"], tuple(args)), extract


def checked_index(saved: Path, name: str) -> dict[str, Any]:
    """The saved calls' index and files, checked against the format (exit 2, naming the damage)."""
    try:
        index = saved_format.read_index(str(saved))
        saved_format.check_files(str(saved), index)
    except saved_format.Damaged as damage:
        raise UsageError(
            f"--replay {name}: the saved calls are damaged: {damage}",
            hint="record the calls again: iket profile WORKLOAD --extract MODULE:FUNC -o DIR",
        ) from None
    if not index["calls"]:
        raise UsageError(f"--replay {name}: it holds no saved call", hint="record one with --extract")
    return index


def _confined(index: dict[str, Any], folder: Path, name: str) -> Path | None:
    """FUNC's module lies under the recorded source root, which lies outside the capture."""
    root = Path(index["path0"])
    module = index["module"]
    refused = None
    names = [*index["qualname"].split("."), *([] if module.endswith(".py") else module.split("."))]
    if not all(part.isidentifier() for part in names):
        refused = f"FUNC {module}:{index['qualname']} is not MODULE:FUNC"
    elif not root.is_absolute() or (module.endswith(".py") and not Path(module).is_absolute()):
        refused = f"its module {module!r} or source root {index['path0']!r} is not an absolute path"
    elif root.resolve() == folder or folder in root.resolve().parents:
        refused = f"its source root {root} lies inside the capture"
    if refused is None:
        try:
            source = Path(module) if module.endswith(".py") else find_module(module, root, "")
        except TargetError:
            return None  # not here (another machine's path): the replay says so when it imports
        if source is not None and not source.resolve().is_relative_to(root.resolve()):
            refused = f"FUNC's module {module} lies outside its source root {root}"
        elif source is not None and folder in source.resolve().parents:
            refused = f"FUNC's module {module} lies inside the capture"
        else:
            return source
    raise UsageError(
        f"--replay {name}: {refused}",
        hint="a capture's own files are never imported: record the calls again with --extract",
    )


def _trusted(saved: Path, index: dict[str, Any], name: str, env: dict[str, str], trust: bool) -> str:
    from . import replay_trust

    try:
        found = replay_trust.digest(saved, index)
    except saved_format.Damaged as damage:
        raise UsageError(f"--replay {name}: the saved calls are damaged: {damage}") from None
    replay_trust.refuse_unknown(name, found, env, trust)
    return found


def refuse_same(folder: Path, output: Path, cwd: Path) -> None:
    """``--replay DIR -o DIR`` would replace the capture that holds the calls, and an output
    inside DIR would write into it (exit 2)."""
    replayed, output = (cwd / folder).resolve(), output.resolve()
    if replayed == output or replayed in output.parents:
        raise UsageError(
            f"--replay {folder} -o {output}: the new capture would "
            + (
                "replace the one it replays" if replayed == output else "be written inside the one it replays"
            ),
            hint="give another output directory: iket profile --replay DIR -o NEW",
        )


def copy_saved(extract: Extract, folder: Path) -> dict[str, Any]:
    """``--replay``: the earlier capture's saved calls, copied into this capture's ``folder``:
    the files the index lists and nothing else, checked to be what was checked before."""
    from . import replay_trust

    assert extract.replay_of is not None
    source = extract.replay_of / EXTRACT_DIR
    name = extract.replay_of.name
    try:  # each file is checked again as it is copied, and the whole against the digest
        index = saved_format.read_index(str(source))
        copied = replay_trust.copy(source, folder, index)
    except saved_format.Damaged as damage:
        shutil.rmtree(folder, ignore_errors=True)
        raise UsageError(f"--replay {name}: the saved calls are damaged: {damage}") from None
    except IketError:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    if copied != extract.digest:
        shutil.rmtree(folder, ignore_errors=True)
        raise UsageError(
            f"--replay {name}: the saved calls changed while they were copied", hint="run it again"
        )
    facts = record_facts(index, None)
    facts["record"] = None
    facts["replay_of"] = str(extract.replay_of)
    return facts
