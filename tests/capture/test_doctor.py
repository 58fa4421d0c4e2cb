from iket_cli.capture import doctor


def test_checks_in_process_name_every_part_and_leak_nothing(monkeypatch):
    """In-process (with warnings as errors, so an uncollected probe would fail the test)."""
    monkeypatch.setenv("IKET_RUN_IKET", "/none")
    results = doctor.checks()
    names = [c.name for c in results]
    assert names == [
        "Python",
        "iket-cli",
        "run-iket",
        "cuda-bindings + NVRTC",
        "GPU",
        "CUDA_INJECTION64_PATH",
        "in-process session",
        "TIRx",
        "CuTe DSL",
        "CuTe DSL variables",
        "tracker cache",
        "iket sql / export",
        "Slurm (iket run --executor slurm)",
    ], "no decoder check without run-iket"
    assert not doctor.healthy(results)


def test_the_in_process_session_is_checked_as_a_window_loads_it(library, tmp_path):
    env = {"IKET_CLI_SESSION_LIBRARY": str(library)}
    (check,) = [c for c in doctor.checks(env) if c.name == "in-process session"]
    assert check.ok and not check.required and f"ABI 1.0 at {library}" in check.detail, check
    assert "at most 256 timestamps a warp" in check.detail
    newer = {**env, "IKET_DOUBLE_VERSION": "2"}
    (check,) = [c for c in doctor.checks(newer) if c.name == "in-process session"]
    assert not check.ok and "speaks session ABI 2.0" in check.detail and "libiket_injection.so" in check.fix
    gone = {"IKET_CLI_SESSION_LIBRARY": str(tmp_path / "none.so")}
    (check,) = [c for c in doctor.checks(gone) if c.name == "in-process session"]
    assert not check.ok and check.detail.startswith(f"cannot load {tmp_path / 'none.so'}"), check


def test_a_probe_that_fails_names_its_last_line():
    answer, problem = doctor.Probe("raise SystemExit('no GPU stack here')", {}).result()
    assert answer is None and problem == "no GPU stack here"


def test_gpu_check_falls_back_to_nvidia_smi_names():
    check = doctor._gpu(None, "no cuda-python", [{"index": "0", "name": "NVIDIA H200", "driver": "580"}])
    assert check.ok and "NVIDIA H200" in check.detail and "compute capability unknown" in check.detail
    old = doctor._gpu({"cuda_driver": "13.0", "gpus": [{"index": 0, "name": "A100", "cc": [8, 0]}]}, "", [])
    assert not old.ok and "sm_80" in old.detail, "Hopper or newer is needed"


def test_cute_dsl_without_a_toolkit_flavour_names_the_package():
    problem = "RuntimeError: No CTK flavor installed: expected one or more of ..."
    check = doctor._cute(None, problem)
    assert not check.ok and not check.required, "TIRx workloads do not need CuTe DSL"
    assert "nvidia-cutlass-dsl-libs-cu13" in check.fix
    found = doctor._cute({"version": "4.8.1", "flavours": ["cu13"], "seconds": 1.2}, "")
    assert found.ok and "CTK flavour: cu13" in found.detail


def test_the_tracker_cache_is_reported(tmp_path):
    (tmp_path / "trackers" / ("0" * 24) / "pid_0x1").mkdir(parents=True)
    (tmp_path / "trackers" / ("0" * 24) / "pid_0x1" / "tracker.json").write_text("x" * 1000)
    (check,) = [c for c in doctor.checks({"IKET_CACHE_DIR": str(tmp_path)}) if c.name == "tracker cache"]
    assert check.ok and "1 tracker pass(es)" in check.detail and str(tmp_path) in check.detail


def test_the_sql_extra_is_reported(monkeypatch):
    from importlib import metadata

    (check,) = [c for c in doctor.checks() if c.name == "iket sql / export"]
    assert check.ok and "pyarrow" in check.detail and "duckdb" in check.detail, "the test extra has both"
    real = metadata.version

    def without_duckdb(name):
        if name == "duckdb":
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(metadata, "version", without_duckdb)
    missing = doctor._sql()
    assert not missing.ok and not missing.required and "duckdb not installed" in missing.detail
    assert "pip install 'iket-cli[sql]'" in missing.fix


def test_slurm_is_reported_without_failing_the_machine(tmp_path):
    """No Slurm tools on PATH: an optional check says which are missing and what to do."""
    (check,) = [c for c in doctor.checks({"PATH": str(tmp_path)}) if c.name.startswith("Slurm")]
    assert not check.ok and not check.required
    assert check.detail.startswith("not on PATH: sbatch") and "login node" in check.fix
