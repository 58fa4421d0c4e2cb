"""Kernel names: demangled by the system's demangler, shortened, told apart; and the pure
reader (model/itanium.py) that stands in for the demangler, checked against it on every
kernel name recorded on the H200."""

from __future__ import annotations

import json
import sys
import tarfile

import pytest

from iket_cli.model import itanium, names

from conftest import FIXTURES


def recorded_symbols() -> set[str]:
    """Every kernel name in the H200 fixtures: traces, tracker lists, raw launch lists."""
    found = set()
    for path in [
        *FIXTURES.rglob("*.trace.json"),
        *FIXTURES.rglob("tracker.json"),
        *FIXTURES.rglob("iket.data.json"),
    ]:
        found.update(launch["kernelName"] for launch in json.loads(path.read_text())["launches"])
    with tarfile.open(FIXTURES / "torch_warp.tar.xz") as archive:
        raw = next(m for m in archive.getmembers() if m.name.endswith("iket.data.json"))
        found.update(launch["kernelName"] for launch in json.load(archive.extractfile(raw))["launches"])
    return found


SYMBOLS = sorted(recorded_symbols())
MANGLED = [s for s in SYMBOLS if s.startswith("_Z")]


def test_the_fixtures_hold_the_kernel_kinds_of_a_model_step():
    shorts = {names.short(s) for s in SYMBOLS}
    assert len(MANGLED) >= 15
    for expected in (
        "at::native::vectorized_elementwise_kernel<…>",  # elementwise
        "at::native::reduce_kernel<…>",  # reduction
        "cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>",  # cuBLAS's GEMM
        "softmax_warp_forward<…>",  # anonymous namespace dropped
        "affine_kernel",  # CuTe DSL
        "rowsum_kernel",
        "scale_loop_kernel",  # TIRx: already plain
    ):
        assert expected in shorts


@pytest.mark.parametrize("symbol", MANGLED)
def test_the_pure_reader_agrees_with_the_system_demangler(symbol):
    pytest.importorskip("cxxfilt")
    assert names.demangle(symbol) != symbol, "the system demangler is there (cxxfilt)"
    assert itanium.qualified_name(symbol) == names.shorten(names.demangle(symbol))


def test_short_names_are_readable():
    for symbol in SYMBOLS:
        shown = names.short(symbol)
        assert not shown.startswith("_Z") and "(anonymous namespace)" not in shown
        assert len(shown) <= 70, shown
        assert "(" not in shown and " " not in shown, shown


def test_shorten_drops_return_type_parameters_and_arguments():
    assert names.shorten("void ns::f<int, X<y> >(int, float)") == "ns::f<…>"
    assert names.shorten("ns::(anonymous namespace)::g(int)") == "ns::g"
    assert names.shorten("void k<4>(float*)") == "k<4>"
    assert names.shorten("void A::operator()(int) const") == "A::operator()"


def test_cute_dsl_names_shorten_to_the_kernel_function():
    assert (
        names.short(
            "kernel_cutlass_affine_kernel_tensorptrf32gmemalign16o2561_tensorptrf32gmemalign16o2561_0"
        )
        == "affine_kernel"
    )
    assert names.short("kernel_cutlass_unmatched_kernel_0") == "unmatched_kernel"
    assert names.short("kernel_cutlass_gemm_128_float16_0") == "gemm"
    assert names.short("plain_kernel") == "plain_kernel"


def test_namer_tells_kernels_apart_by_a_word_of_their_arguments():
    namer = names.Namer(SYMBOLS)
    shown = [namer(s) for s in SYMBOLS]
    assert len(set(shown)) == len(SYMBOLS), "every kernel has its own name"
    assert "at::native::vectorized_elementwise_kernel<…AbsFunctor…>" in shown
    assert "at::native::vectorized_elementwise_kernel<…AUnaryFunctor, MulFunctor…>" in shown


def test_namer_numbers_what_no_word_tells_apart():
    first = "kernel_cutlass_affine_kernel_tensorptrf32gmemo10241_0"
    second = "kernel_cutlass_affine_kernel_tensorptrf32gmemo20481_1"
    namer = names.Namer([first, second])
    assert (namer(first), namer(second)) == ("affine_kernel #1", "affine_kernel #2")


def test_kernel_patterns_match_raw_demangled_and_short_names():
    gemm = next(s for s in SYMBOLS if "sgemm" in s)
    assert names.matches("*Kernel2*", gemm)
    assert names.matches("cutlass::Kernel2<*", gemm)
    assert names.matches("_ZN7cutlass*", gemm)
    assert names.matches("Params", gemm)  # in the demangled parameters only
    assert not names.matches("softmax", gemm)


def test_without_the_system_demangler_names_are_still_read(monkeypatch):
    monkeypatch.setitem(sys.modules, "cxxfilt", None)  # import cxxfilt now raises ImportError
    names.demangle.cache_clear()
    names.short.cache_clear()
    try:
        for symbol in MANGLED:
            assert names.short(symbol) == itanium.qualified_name(symbol)
            assert not names.short(symbol).startswith("_Z")
    finally:
        names.demangle.cache_clear()
        names.short.cache_clear()


@pytest.mark.parametrize("broken", ["_Z", "_ZN3foo", "_ZN3fooI", "_Zx", "_ZN99short"])
def test_a_damaged_symbol_is_shown_as_it_is(broken, monkeypatch):
    monkeypatch.setitem(sys.modules, "cxxfilt", None)
    names.demangle.cache_clear()
    names.short.cache_clear()
    try:
        assert names.short(broken) == broken
    finally:
        names.demangle.cache_clear()
        names.short.cache_clear()
