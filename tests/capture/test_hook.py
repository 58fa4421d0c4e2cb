"""iket's start-up hook in a process that compiles a real CuTe DSL kernel (no GPU needed to
compile): it notes each event name's payload type, and the kernel it compiles is the same,
source locations included, as without it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from iket_cli.capture.hook import HOOK_DIR, PROCS_ENV, hook_env
from iket_cli.model import labels

from conftest import SCRIPTS

COMPILE = (
    "import sys\n"
    f"sys.path.insert(0, {str(SCRIPTS)!r})\n"
    "import cutlass.cute as cute\n"
    "import cute_unmatched\n"
    "cute.compile(cute_unmatched.unmatched)\n"
)


def compile_probe(folder: Path, hooked: bool) -> tuple[str, Path]:
    """Compile scripts/cute_unmatched.py, keeping its MLIR; the MLIR and the hook's file."""
    procs = folder / "procs.jsonl"
    env = {k: v for k, v in os.environ.items() if k not in (PROCS_ENV, "PYTHONPATH")}
    env.update(
        CUTE_DSL_ARCH="sm_90a",
        CUTE_DSL_NO_CACHE="1",
        CUTE_DSL_KEEP_IR="1",
        CUTE_DSL_LINEINFO="1",
        CUTE_DSL_DUMP_DIR=str(folder),
    )
    if hooked:
        env = hook_env(env, procs)
    subprocess.run([sys.executable, "-c", COMPILE], cwd=folder, env=env, check=True, timeout=300)
    (mlir,) = folder.glob("*.mlir")
    return mlir.read_text(), procs


def test_the_hook_notes_payload_types_and_changes_nothing_compiled(tmp_path):
    (tmp_path / "with").mkdir()
    (tmp_path / "without").mkdir()
    hooked, procs = compile_probe(tmp_path / "with", hooked=True)
    plain, _ = compile_probe(tmp_path / "without", hooked=False)
    assert hooked == plain, "the same MLIR, locations included"
    assert "cute_unmatched.py" in hooked and str(HOOK_DIR) not in hooked
    (sites,) = labels.payload_sites(procs).values()
    assert {(s["op"], s["name"], s["type"]) for s in sites} == {
        ("range_start", "open", None),
        ("range_push", "dangling", None),
        ("range_start", "closed", None),
        ("range_end", "closed", None),
        ("mark", "value", "i32"),
        ("mark", "value", "f32"),
    }
