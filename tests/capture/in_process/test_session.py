"""The in-process session's binding (capture/in_process/session.py) against a stand-in of the C ABI
(tests/fakes/session_double.py: the library needs a GPU driver to load)."""

from __future__ import annotations

import ctypes
import json

import pytest
from fakes.session_double import SessionLibrary

from iket_cli.capture.in_process import session
from iket_cli.errors import SessionError, ToolchainError
from iket_cli.model import trace
from iket_cli.model.runiket_facts import PER_WINDOW


def test_the_options_are_the_headers_56_bytes():
    assert ctypes.sizeof(session.Options) == 56
    assert (
        session.Options.cluster_x.offset == 40 and session.Options.log_level.offset == 48
    )  # 4 padding bytes


def test_a_window_creates_sets_starts_stops_saves_and_destroys(tmp_path):
    lib = SessionLibrary()
    settings = session.Settings(max_ts_cnt_per_warp=64, context_buffer_size=64 << 20)
    with session.Session(lib, settings, design=PER_WINDOW) as s:
        assert s.running
    assert lib.calls == ["Create", "OptionsInit", "SetOptions", "Start", "Stop", "Destroy"]
    assert lib.options["max_ts_per_warp"] == 64 and lib.options["device_buffer_size"] == 64 << 20
    assert lib.options["log_level"] == 2 and lib.options["struct_size"] == 56 and lib.options["flags"] == 0


def test_the_librarys_defaults_stay_where_nothing_is_asked(tmp_path):
    lib = SessionLibrary()
    settings = session.Settings(log_level="warn", warp_lifetime_only=True, cluster=(1, 2, 3))
    with session.Session(lib, settings, design=PER_WINDOW):
        pass
    assert (lib.options["max_ts_per_warp"], lib.options["device_buffer_size"]) == (256, 536870912)
    assert lib.options["flags"] == session.WARP_LIFETIME_ONLY | session.ENABLE_CLUSTER
    assert (lib.options["cluster_x"], lib.options["cluster_y"], lib.options["cluster_z"]) == (1, 2, 3)


def test_the_saved_trace_is_read_as_any_trace(tmp_path):
    lib = SessionLibrary()
    with session.Session(lib, design=PER_WINDOW) as s:
        pass
    s_path = tmp_path / "w.trace.json"
    with session.Session(lib, design=PER_WINDOW) as s:
        s.stop()
        s.save(s_path)
    loaded = trace.load(s_path)
    assert [len(launch.ranges) for launch in loaded.launches] == [1]
    assert json.loads(s_path.read_text())["graphLaunches"] == {}


def test_a_refused_call_is_named_and_the_session_destroyed():
    lib = SessionLibrary(fail={"Start": 8})
    with pytest.raises(SessionError) as raised, session.Session(lib, design=PER_WINDOW):
        pass
    assert raised.value.call == "Start" and raised.value.result == 8
    assert "refused Start: INVALID_STATE (8)" in raised.value.message
    assert lib.calls[-1] == "Destroy"
    with session.Session(lib := SessionLibrary(), design=PER_WINDOW):  # the process may open another
        pass
    assert lib.calls[-1] == "Destroy"


def test_one_session_at_a_time_in_a_process():
    first = session.Session(SessionLibrary(), design=PER_WINDOW).start()
    with pytest.raises(SessionError, match="another IKET session is active"):
        session.Session(SessionLibrary(), design=PER_WINDOW).start()
    first.close()
    session.Session(SessionLibrary(), design=PER_WINDOW).start().close()


def test_a_body_that_raises_still_stops_and_destroys():
    lib = SessionLibrary()
    with pytest.raises(KeyError), session.Session(lib, design=PER_WINDOW):
        raise KeyError("the user's")
    assert lib.calls[-2:] == ["Stop", "Destroy"]


def test_another_abi_major_is_refused():
    with pytest.raises(ToolchainError, match="speaks session ABI 2.0"):
        session.checked(SessionLibrary(version=(2, 0)), "lib.so")
    assert isinstance(session.checked(SessionLibrary(version=(1, 3)), "lib.so"), SessionLibrary)


def test_the_library_is_found_beside_run_iket_or_its_absence_said(tmp_path, monkeypatch):
    import importlib.util

    beside_iket = session.library_path(None)  # no distribution named: beside the iket package found
    assert beside_iket.is_file() and beside_iket.parts[-3:] == session.LIBRARY.parts
    (tmp_path / session.LIBRARY).parent.mkdir(parents=True)
    (tmp_path / session.LIBRARY).write_bytes(b"")
    assert session.library_path(tmp_path) == tmp_path / session.LIBRARY
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ToolchainError, match="session library"):
        session.library_path(tmp_path / "elsewhere")


def test_the_real_library_without_a_driver_says_so(real_run_iket):
    from iket_cli.system import toolchain

    found = session.library_path(toolchain.own_distribution()[1])
    try:
        session.load(found)
    except ToolchainError as error:
        assert "libcuda.so.1" in error.message and "GPU machine" in error.hint
    else:  # a machine with a driver loads it and speaks ABI 1
        pass


def test_the_kept_design_creates_one_session_and_clears_it_between_windows(tmp_path):
    """One handle for the life of the process (runiket_facts.KEPT): created at the first window,
    its options set and its trace data cleared at each, never destroyed."""
    from iket_cli.model.runiket_facts import KEPT

    lib = SessionLibrary()
    for number, budget in enumerate((64, 128, 256)):
        with session.Session(
            lib, session.Settings(max_ts_cnt_per_warp=budget), design=KEPT, key=str(tmp_path)
        ) as s:
            s.stop()
            s.save(tmp_path / f"w{number}.trace.json")
        assert lib.options["max_ts_per_warp"] == budget
    assert lib.calls.count("Create") == 1 and "Destroy" not in lib.calls
    assert lib.calls.count("Start") == 3 and lib.calls.count("ClearTraceData") == 3
    assert lib.calls[:5] == ["Create", "OptionsInit", "SetOptions", "Start", "Stop"]


def test_a_per_window_session_is_destroyed_at_each_close(tmp_path):
    lib = SessionLibrary()
    for _ in range(2):
        with session.Session(lib, design=PER_WINDOW):
            pass
    assert lib.calls.count("Create") == 2 and lib.calls.count("Destroy") == 2
    assert "ClearTraceData" not in lib.calls
