"""Kernel names a person can read: demangled, then shortened.

Traces and manifests keep the raw symbol (``_ZN2at6native29vectorized_elementwise_kernel...``,
``kernel_cutlass_affine_kernel_tensorptrf32gmem..._0``): it is what identifies a kernel.
Every human surface shows :func:`short` of it instead (``at::native::vectorized_elementwise_kernel<…>``,
``affine_kernel``), and machine output adds :func:`demangle`'s full name beside the symbol.

C++ symbols are demangled by the system's own demangler (``__cxa_demangle`` of libstdc++ or
libc++, through the ``cxxfilt`` package; its cost: ``bench/bench_demangle.py``);
where that is missing, :mod:`iket_cli.model.itanium` reads the symbol's qualified name
itself. :class:`Namer` tells apart kernels whose short names would coincide (PyTorch's
elementwise kernels differ only in their functor) by a word of their template arguments.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from functools import lru_cache

from . import itanium

ELLIPSIS = "…"
#: CuTe DSL's generated names: ``kernel_<prefix>_<function>_<arg>_..._<arg>_<n>``.
_CUTE = re.compile(r"^kernel_(?:cutlass|cute)_(?P<body>.+?)_(?P<n>\d+)$")
#: A word of a CuTe name that starts its arguments (str() of a tensor, a number, a type).
_CUTE_ARG = re.compile(
    r"^(?:\d|tensor|ptr|layout|shape|stride|coord|tuple|true$|false$|none$|cutlass|cute"
    r"|(?:b?float|u?int|bf|tf|f|i|u)\d+$)",
    re.IGNORECASE,
)
_ANONYMOUS = "(anonymous namespace)::"
#: Words of template arguments that never tell two kernels apart.
_DULL = frozenset(
    {"array", "char", "float", "double", "int", "long", "unsigned", "bool", "short", "signed"}
    | {"const", "void", "half", "anonymous", "namespace", "lambda", "BFloat16", "Half"}
)


@lru_cache(maxsize=4096)
def demangle(symbol: str) -> str:
    """The full demangled name of a C++ symbol; any other name unchanged."""
    if not symbol.startswith("_Z"):
        return symbol
    try:
        import cxxfilt

        return cxxfilt.demangle(symbol)
    except Exception:  # no cxxfilt, no libstdc++/libc++, or a symbol it refuses: read it ourselves
        parsed = itanium.qualified_name(symbol)
        return symbol if parsed is None else parsed


@lru_cache(maxsize=4096)
def short(symbol: str) -> str:
    """The name to show: a C++ kernel's qualified name with its template arguments elided
    (``at::native::reduce_kernel<…>``; a single plain argument stays:
    ``cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>``), a CuTe DSL kernel's
    own function name (``affine_kernel``), anything else unchanged."""
    cute = _CUTE.match(symbol)
    if cute:
        return _cute_function(cute["body"])
    if not symbol.startswith("_Z"):
        return symbol
    full = demangle(symbol)
    return shorten(full) if full != symbol else symbol


def _cute_function(body: str) -> str:
    words = body.split("_")
    for at in range(1, len(words)):
        if words[at] and _CUTE_ARG.match(words[at]):
            return "_".join(words[:at])
    return body


def shorten(demangled: str) -> str:
    """``void ns::f<int, X<y>>(int, float)`` -> ``ns::f<…>``: no return type, no parameters,
    template arguments elided unless they are one plain word, no ``(anonymous namespace)``."""
    text = demangled.replace(_ANONYMOUS, "")
    out: list[str] = []
    depth, group_start, i = 0, 0, 0
    while i < len(text):
        if text.startswith("operator", i) and depth == 0:
            token = re.match(r"operator\s*(\(\)|\[\]|[^\w\s(]+|\w+)", text[i:])
            if token:
                out.append(token[0])
                i += len(token[0])
                continue
        char = text[i]
        if char in "<({":
            if depth == 0:
                group_start = i
            depth += 1
        elif char in ">)}" and depth:
            depth -= 1
            if depth == 0:
                out.append(_elided(text[group_start : i + 1]))
        elif depth == 0:
            out.append(char)
        i += 1
    flat = "".join(out)
    cut = flat.rfind("(…)")  # the parameter list: the last group of parentheses
    if cut > 0:
        flat = flat[:cut]
    flat = flat.strip()
    return flat.rsplit(" ", 1)[-1] if " " in flat else flat


def _elided(group: str) -> str:
    opener, inner = group[0], group[1:-1]
    if opener == "<" and re.fullmatch(r"[\w.]+", inner.strip() or "-"):
        return group  # one plain argument: it names the kernel (cutlass::Kernel2<cutlass_80_...>)
    if opener == "{":
        return group  # {lambda(...)#1}: kept whole
    return f"{opener}{ELLIPSIS}{group[-1]}"


def matches(pattern: str, symbol: str) -> bool:
    """Whether ``pattern`` (a glob, or a substring) matches the raw, demangled or short name."""
    for name in dict.fromkeys((symbol, short(symbol), demangle(symbol))):
        if fnmatch.fnmatchcase(name, pattern) or pattern in name:
            return True
    return False


class Namer:
    """Short names made unique among a set of kernels.

    Two kernels whose short names coincide get the first word of their template
    arguments that the others lack (``at::native::vectorized_elementwise_kernel<…MulFunctor…>``);
    where no word tells them apart, a number (``affine_kernel #2``), in first-seen order.
    """

    def __init__(self, symbols: Iterable[str]) -> None:
        self._names: dict[str, str] = {}
        groups: dict[str, list[str]] = {}
        for symbol in dict.fromkeys(symbols):
            groups.setdefault(short(symbol), []).append(symbol)
        for name, members in groups.items():
            if len(members) == 1:
                self._names[members[0]] = name
                continue
            words = {m: _words(m) for m in members}
            for number, member in enumerate(members, 1):
                own = _telling(words[member], [set(words[o]) for o in members if o != member])
                self._names[member] = _with_words(name, own) if own else f"{name} #{number}"
            if len(set(self._names[m] for m in members)) < len(members):
                for number, member in enumerate(members, 1):
                    self._names[member] = f"{name} #{number}"

    def __call__(self, symbol: str) -> str:
        return self._names.get(symbol) or short(symbol)

    def __contains__(self, symbol: str) -> bool:
        return symbol in self._names


def _words(symbol: str) -> list[str]:
    """The identifiers of a symbol's template arguments, in order, without repeats."""
    if _CUTE.match(symbol):
        return []  # CuTe DSL's arguments are tensor layouts: a number reads better
    full = demangle(symbol).replace(_ANONYMOUS, "")
    start = full.find("<")
    found = re.findall(r"([A-Za-z_]\w*)(::)?", full[start:] if start >= 0 else "")
    words = (w for w, scope in found if not scope)  # a namespace tells nothing
    return [w for w in dict.fromkeys(words) if w not in _DULL and not w.startswith("_GLOBAL__N")]


def _telling(words: list[str], others: list[set[str]]) -> list[str] | None:
    """The first word, or else pair of words, that no other kernel's arguments hold."""
    for word in words:
        if not any(word in other for other in others):
            return [word]
    for at, first in enumerate(words):
        for second in words[at + 1 :]:
            if not any(first in other and second in other for other in others):
                return [first, second]
    return None


def _with_words(name: str, words: list[str]) -> str:
    said = ", ".join(words)
    if name.endswith(f"<{ELLIPSIS}>"):
        return f"{name[: -len(ELLIPSIS) - 1]}{ELLIPSIS}{said}{ELLIPSIS}>"
    return f"{name} [{said}]"
