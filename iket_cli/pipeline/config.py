"""Project configuration for ``iket run``: ``iket.toml``, or ``[tool.iket]`` in ``pyproject.toml``.

Defaults (any ``iket profile`` option, plus ``output``) sit at the top level; each
``[[jobs]]`` entry (``[[tool.iket.jobs]]``) has a ``name`` and either a ``target`` (any
form ``iket profile`` accepts, as one string) or a ``command`` (an argv list), plus
``args``, ``env``, ``cwd``, ``timeout`` and option overrides. Every mistake is reported as
``FILE: key.path: what is wrong`` (exit 2).
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..model.vocab import EXECUTORS, RUN_MANIFEST_NAME

#: Options a config may set (top level or per job) and their types.
OPTIONS: dict[str, tuple[type, ...]] = {
    "postprocess": (str,),
    "keep": (bool,),
    "timeout": (int, float),
    "env": (dict,),
    "python": (str,),
    "run_iket": (str,),
    "max_ts_cnt_per_warp": (int,),
    "warp_trace": (bool,),
    "enabled_cluster": (str,),
    "enabled_cluster_config": (str,),
    "context_buffer_size": (str,),
    "log_level": (str,),
    "max_buffer": (int, str),
    "strict": (bool,),
    "overhead": (bool,),
    "warm": (bool,),
    "keep_dsl_cache": (bool,),
    "roles": (str,),
    "tracker": (str,),
    "repeat": (int,),
    # --extract MODULE:FUNC, the calls it saves (N, "A-B", "last") and their size limit
    "extract": (str,),
    "calls": (int, str),
    "max_extract": (int, str),
    "extract_rank": (int,),
    "stop_after": (bool,),
    # --window MODULE:FUNC (its calls: ``calls``), --one-pass: the run once, in-process
    "window": (str,),
    "one_pass": (bool,),
    # sbatch options for --executor slurm (SLURM_OPTIONS); a job's table overrides keys of the top one
    "slurm": (dict,),
}
#: Keys of a ``[slurm]`` table (top level or per job) and their types (docs/ci.md: iket run on Slurm).
SLURM_OPTIONS: dict[str, tuple[type, ...]] = {
    "partition": (str,),
    "account": (str,),
    "qos": (str,),
    "time": (str, int),
    "gpus": (int,),
    "cpus": (int,),
    "mem": (str,),
    "constraint": (str,),
    "extra": (list,),
    "python": (str,),
    "poll": (int, float),
}
#: Whole-number options that must be at least 1.
POSITIVE = ("repeat", "max_ts_cnt_per_warp")
#: Options checked as ``iket profile`` checks them, before any job runs.
EXTRACT_CHECKS = ("extract", "calls", "max_extract", "window")
TOP_ONLY = {"output": (str,), "jobs": (list,), "executor": (str,)}
JOB_ONLY = {"name": (str,), "target": (str,), "command": (list,), "args": (list,), "cwd": (str,)}


class ConfigError(UsageError):
    """The configuration file is wrong; the message names the file and the key path."""


@dataclass
class Job:
    name: str
    target: str | None
    command: list[str] | None
    args: list[str]
    cwd: Path | None
    options: dict[str, Any] = field(default_factory=dict)

    def words(self) -> tuple[str, list[str]]:
        """(kind, words) as :func:`iket_cli.capture.targets.parse` takes them."""
        if self.command is not None:
            return "command", [*self.command, *self.args]
        words = shlex.split(self.target or "")
        if words[:1] == ["-m"]:
            return "module", [*words[1:], *self.args]
        if words[:1] == ["--"]:
            return "command", [*words[1:], *self.args]
        return "positional", [*words, *self.args]


@dataclass
class Config:
    path: Path
    output: Path
    defaults: dict[str, Any]
    jobs: list[Job]
    #: ``local`` or ``slurm`` (``executor`` in the file; ``iket run --executor`` overrides it).
    executor: str = "local"

    def select(self, names: list[str]) -> list[Job]:
        if not names:
            return self.jobs
        known = {job.name: job for job in self.jobs}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ConfigError(
                f"{self.path}: no job named {unknown[0]!r}", hint=f"jobs: {', '.join(known) or '(none)'}"
            )
        return [known[n] for n in names]


def find(explicit: Path | None = None, start: Path | None = None) -> tuple[Path, dict]:
    """The config file and its iket table: ``--config``, else ``iket.toml``, else pyproject."""
    folder = start or Path.cwd()
    if explicit is not None:
        return explicit, _table(explicit)
    if (folder / "iket.toml").is_file():
        return folder / "iket.toml", _table(folder / "iket.toml")
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file():
        table = _read(pyproject).get("tool", {}).get("iket")
        if table is not None:
            return pyproject, table
    raise ConfigError(
        "no iket configuration here (iket.toml, or [tool.iket] in pyproject.toml)",
        hint="see docs/ci.md (`iket run`) for a full example",
    )


def _read(path: Path) -> dict:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path} does not exist") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid TOML: nested too deeply to be read") from None


def _table(path: Path) -> dict:
    data = _read(path)
    return data["tool"]["iket"] if path.name == "pyproject.toml" and "iket" in data.get("tool", {}) else data


def load(explicit: Path | None = None, start: Path | None = None) -> Config:
    path, table = find(explicit, start)
    prefix = "tool.iket." if path.name == "pyproject.toml" else ""
    _check(path, table, {**OPTIONS, **TOP_ONLY}, prefix)
    jobs_raw = table.get("jobs", [])
    jobs, seen = [], set()
    for number, raw in enumerate(jobs_raw):
        where = f"{prefix}jobs[{number}]"
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: {where}: each job is a table ([[jobs]])")
        _check(path, raw, {**OPTIONS, **JOB_ONLY}, f"{where}.")
        name = raw.get("name")
        if not name:
            raise ConfigError(f"{path}: {where}.name is missing", hint="every job needs a name")
        _check_job_name(path, f"{where}.name", name)
        if name in seen:
            raise ConfigError(f"{path}: {where}.name: {name!r} is used twice", hint="job names must differ")
        seen.add(name)
        if ("target" in raw) == ("command" in raw):
            raise ConfigError(f"{path}: {where}: give exactly one of target or command")
        for key in ("command", "args"):
            if key in raw and not all(isinstance(w, str) for w in raw[key]):
                raise ConfigError(f"{path}: {where}.{key}: every item must be a string")
        _check_env(path, raw.get("env", {}), f"{where}.env")
        _check_slurm(path, raw.get("slurm", {}), f"{where}.slurm")
        options = {k: v for k, v in raw.items() if k in OPTIONS}
        cwd = Path(raw["cwd"]) if "cwd" in raw else None
        jobs.append(
            Job(
                name,
                raw.get("target"),
                raw.get("command"),
                list(raw.get("args", [])),
                cwd if cwd is None or cwd.is_absolute() else path.parent / cwd,
                options,
            )
        )
    if not jobs:
        raise ConfigError(f"{path}: {prefix}jobs: no job defined", hint="add a [[jobs]] table")
    _check_env(path, table.get("env", {}), f"{prefix}env")
    _check_slurm(path, table.get("slurm", {}), f"{prefix}slurm")
    executor = table.get("executor", "local")
    if executor not in EXECUTORS:
        raise ConfigError(
            f"{path}: {prefix}executor: {executor!r} is not an executor",
            hint=f"one of: {', '.join(EXECUTORS)}",
        )
    defaults = {k: v for k, v in table.items() if k in OPTIONS}
    output = Path(table.get("output", "iket-runs"))
    return Config(path, output if output.is_absolute() else path.parent / output, defaults, jobs, executor)


#: A job's name becomes a folder of the output root: one plain path component.
_JOB_NAME = re.compile(r"[^\x00/\\]+")
JOB_NAME_MAX = 200
#: Names the output root keeps for ``iket run`` itself.
RESERVED_NAMES = (RUN_MANIFEST_NAME,)


def _check_job_name(path: Path, where: str, name: str) -> None:
    """A job's name is its folder under the output root: never a path that leaves it.

    A configuration can come from a pull request; ``../x`` or ``/etc/x`` as a name would
    write wherever the CI user may write.
    """
    if (
        not _JOB_NAME.fullmatch(name)
        or name.startswith(".")
        or name in RESERVED_NAMES
        or name.strip() != name
        or len(name.encode()) > JOB_NAME_MAX
    ):
        raise ConfigError(
            f"{path}: {where}: {name!r} is not a plain folder name",
            hint="a job's name is one path component (no '/', no '..', not starting with '.', "
            f"not {', '.join(RESERVED_NAMES)}, at most {JOB_NAME_MAX} bytes): it names the job's "
            "folder under the output root",
        )


def _check(path: Path, table: dict, allowed: dict[str, tuple[type, ...]], prefix: str) -> None:
    for key, value in table.items():
        if key not in allowed:
            raise ConfigError(
                f"{path}: {prefix}{key}: unknown key", hint=f"known keys: {', '.join(sorted(allowed))}"
            )
        types = allowed[key]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            names = " or ".join(t.__name__ for t in types)
            raise ConfigError(f"{path}: {prefix}{key}: should be {names}, not {type(value).__name__}")
        if key in POSITIVE and value < 1:
            raise ConfigError(f"{path}: {prefix}{key}: should be 1 or more, not {value}")
        if isinstance(value, float) and not (math.isfinite(value) and value > 0):  # nan, inf, 0 s
            raise ConfigError(f"{path}: {prefix}{key}: should be a number of seconds above 0, not {value}")
        if key in EXTRACT_CHECKS:
            _check_extract(path, f"{prefix}{key}", key, value)


def _check_extract(path: Path, where: str, key: str, value: Any) -> None:
    """``extract``, ``calls`` and ``max_extract`` as ``iket profile`` would take them (exit 2)."""
    from ..capture.saved_calls.extract import parse_calls
    from ..model.units import parse_size

    try:
        if key in ("extract", "window") and not value.strip():
            raise UsageError("'' names no function", hint=f"give MODULE:FUNC, or drop {key}")
        if key == "calls":
            parse_calls(str(value))
        if key == "max_extract" and (parse_size(str(value)) if isinstance(value, str) else value) < 1:
            raise UsageError(f"{value!r} is not a size", hint="e.g. 512M or 4G")
    except UsageError as error:
        raise ConfigError(f"{path}: {where}: {error.message}", hint=error.hint) from None


def _check_slurm(path: Path, table: dict, where: str) -> None:
    _check(path, table, SLURM_OPTIONS, f"{where}.")
    if not all(isinstance(word, str) for word in table.get("extra", [])):
        raise ConfigError(f"{path}: {where}.extra: every item must be a string (one sbatch argument each)")
    for key in ("gpus", "cpus"):
        if table.get(key, 0) < 0:
            raise ConfigError(f"{path}: {where}.{key}: should be 0 or more, not {table[key]}")


def _check_env(path: Path, env: dict, where: str) -> None:
    for key, value in env.items():
        if not isinstance(value, str):
            raise ConfigError(f"{path}: {where}.{key}: should be a string, not {type(value).__name__}")
