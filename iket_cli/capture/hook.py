"""The start-up hook's side in the CLI: putting ``_hook/sitecustomize.py`` on the passes' path.

The hook writes one JSON line per Python process of the passes (see
``_hook/sitecustomize.py``); :mod:`iket_cli.model.labels` reads them back.
"""

from __future__ import annotations

from pathlib import Path

from ..system.toolchain import prepend_path

HOOK_DIR = Path(__file__).with_name("_hook")
#: The variable that tells the hook where to write.
PROCS_ENV = "IKET_CLI_PROCS"


def hook_env(env: dict[str, str], procs_file: Path) -> dict[str, str]:
    """``env`` with the start-up hook first on ``PYTHONPATH``, writing to ``procs_file``."""
    return {
        **env,
        "PYTHONPATH": prepend_path(str(HOOK_DIR), env.get("PYTHONPATH")),
        PROCS_ENV: str(procs_file),
    }
