"""What readies a process for an in-process session: CuTe DSL's compile options and TIRx's
run-iket check (a module of TIRx's name with the same check stands in: TIRx needs a GPU stack)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from iket_cli.capture.in_process import live

ROOT = Path(__file__).resolve().parents[3]


def test_cute_keeps_its_iket_ops_and_the_users_options():
    env = {"CUTE_DSL_COMPILER_OPT": "warnings{nvvm}"}
    assert live.keep_cute_ops(env) == ["CUTE_DSL_COMPILER_OPT", "CUTE_EXPERIMENTAL_DSL_COMPILER_OPT"]
    assert env == {
        "CUTE_DSL_COMPILER_OPT": "warnings{nvvm} iket",
        "CUTE_EXPERIMENTAL_DSL_COMPILER_OPT": "iket",
    }
    assert live.keep_cute_ops(env) == []  # already there: unchanged
    assert (
        live.keep_cute_ops(
            {"CUTE_DSL_COMPILER_OPT": "--iket", "CUTE_EXPERIMENTAL_DSL_COMPILER_OPT": "x,iket"}
        )
        == []
    )


def test_tirx_check_stands_aside_whether_tirx_was_imported_before_or_after(tmp_path):
    package = tmp_path / "tvm_tirx" / "backend" / "cuda"
    package.mkdir(parents=True)
    for folder in (tmp_path / "tvm_tirx", tmp_path / "tvm_tirx" / "backend", package):
        (folder / "__init__.py").write_text("")
    (package / "iket.py").write_text(
        textwrap.dedent("""
        def _validate_official_environment():
            raise RuntimeError("CUDA_INJECTION64_PATH was not supplied by run-iket")

        def jit():
            _validate_official_environment()
            return "loaded"
    """)
    )
    script = textwrap.dedent("""
        import sys
        from iket_cli.capture.in_process import live
        if sys.argv[1] == "prepare":
            import iket_cli
            iket_cli.prepare()
            import tvm_tirx.backend.cuda.iket as iket
        elif sys.argv[1] == "before":
            import tvm_tirx.backend.cuda.iket as iket
            live.stand_aside_tirx()
        else:
            live.stand_aside_tirx()
            live.stand_aside_tirx()  # once is enough: no second finder
            import tvm_tirx.backend.cuda.iket as iket
        print(iket.jit(), sum(type(f).__name__ == "AfterImport" for f in sys.meta_path))
    """)
    for when in ("before", "after", "prepare"):
        env = {"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"}
        done = subprocess.run(
            [sys.executable, "-c", script, when], cwd=tmp_path, capture_output=True, text=True, env=env
        )
        assert done.returncode == 0 and done.stdout.split() == ["loaded", "0"], done.stderr
    bare = "import tvm_tirx.backend.cuda.iket as i; i.jit()"
    plain = subprocess.run(
        [sys.executable, "-c", bare], capture_output=True, text=True, env={"PYTHONPATH": str(tmp_path)}
    )
    assert "was not supplied by run-iket" in plain.stderr  # the stand-in does refuse without iket's hook
