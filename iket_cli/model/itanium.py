"""A small reader of Itanium C++ ABI symbols: the qualified name of a mangled function.

The fallback of :func:`iket_cli.model.names.demangle` where the system's demangler cannot
be loaded. It does not print types: it walks the grammar (nested and local names, template
arguments, literals, substitutions, lambdas) only to find where the function's name ends,
and returns ``ns::name<…>``, what :func:`~iket_cli.model.names.shorten` makes of the full
demangled name. Expressions in template arguments (``X...E``) are skipped by nesting depth.
"""

from __future__ import annotations

_BUILTIN = set("vwbcahstijlmxynofdegz")
_QUALIFIERS = set("rVK")
_POINTERS = set("PROCG")
_OPERATORS = {"cl": "operator()", "ix": "operator[]", "pl": "operator+", "mi": "operator-"}


class _Bad(ValueError):
    pass


class _Reader:
    def __init__(self, text: str) -> None:
        self.s, self.i = text, 0

    def peek(self, n: int = 1) -> str:
        return self.s[self.i : self.i + n]

    def take(self, n: int = 1) -> str:
        if self.i + n > len(self.s):
            raise _Bad("ran off the end")
        part, self.i = self.s[self.i : self.i + n], self.i + n
        return part

    def expect(self, char: str) -> None:
        if self.take() != char:
            raise _Bad(f"expected {char!r} at {self.i - 1}")

    def number(self) -> int:
        start = self.i
        while self.peek().isdigit():
            self.i += 1
        if start == self.i:
            raise _Bad("expected a number")
        return int(self.s[start : self.i])

    def seq_id(self) -> None:
        """``_`` or ``<base-36 digits>_`` (of S and T)."""
        while self.peek() and self.peek() != "_":
            if not self.peek().isalnum():
                raise _Bad("bad sequence id")
            self.i += 1
        self.expect("_")

    # -- names: each returns (components, the template arguments shown: "", <…> or <word>) --
    def name(self) -> tuple[list[str], str]:
        head = self.peek()
        if head == "N":
            return self.nested()
        if head == "Z":
            self.local()
            return self.name()
        if head == "S" and self.peek(2) != "St":
            self.substitution()
            return ["…"], self.maybe_template_args()
        parts = []
        if self.peek(2) == "St":
            self.take(2)
            parts.append("std")
        parts.append(self.unqualified())
        return parts, self.maybe_template_args()

    def nested(self) -> tuple[list[str], str]:
        self.expect("N")
        while self.peek() in _QUALIFIERS or self.peek() in ("R", "O"):
            self.take()
        parts: list[str] = []
        templated = ""
        while self.peek() != "E":
            if not self.peek():
                raise _Bad("unterminated nested name")
            if self.peek() == "I":
                templated = self.template_args()
                continue
            templated = ""
            if self.peek(2) == "St":
                self.take(2)
                parts.append("std")
            elif self.peek() == "S":
                self.substitution()
                parts.append("…")
            elif self.peek() == "T":
                self.template_param()
                parts.append("…")
            else:
                parts.append(self.unqualified())
        self.expect("E")
        return parts, templated

    def local(self) -> None:
        """``Z <encoding> E <entity> [discriminator]``: the entity is read by the caller."""
        self.expect("Z")
        self.name()
        while self.peek() != "E":
            self.type()
        self.expect("E")

    def unqualified(self) -> str:
        head = self.peek()
        if head == "L":  # internal linkage
            self.take()
            head = self.peek()
        if head.isdigit():
            length = self.number()
            word = self.take(length)
            return "(anonymous namespace)" if word.startswith("_GLOBAL__N") else word
        if head in ("C", "D") and self.peek(2)[1:].isdigit():
            self.take(2)
            return "{ctor}" if head == "C" else "{dtor}"
        if self.peek(2) == "Ul":
            self.take(2)
            while self.peek() != "E":
                self.type()
            self.expect("E")
            self.discriminator()
            return "{lambda}"
        if self.peek(2) == "Ut":
            self.take(2)
            self.discriminator()
            return "{unnamed}"
        if head.islower():
            code = self.take(2)
            return _OPERATORS.get(code, f"operator {code}")
        raise _Bad(f"unknown name at {self.i}")

    def discriminator(self) -> None:
        while self.peek().isdigit():
            self.take()
        self.expect("_")

    def substitution(self) -> None:
        self.expect("S")
        if self.peek() and self.peek() in "abdios" and self.peek() != "_":
            self.take()
            return
        self.seq_id()

    def template_param(self) -> None:
        self.expect("T")
        self.seq_id()

    # -- template arguments and types -----------------------------------------------------
    def maybe_template_args(self) -> str:
        return self.template_args() if self.peek() == "I" else ""

    def template_args(self) -> str:
        """Skip ``I ... E``; ``<word>`` where it holds one plain argument (as names.shorten
        keeps it), else ``<…>``."""
        self.expect("I")
        start, count = self.i, 0
        while self.peek() != "E":
            self.template_arg()
            count += 1
        text = self.s[start : self.i]
        self.expect("E")
        return f"<{_plain(text)}>" if count == 1 and _plain(text) else "<…>"

    def template_arg(self) -> None:
        head = self.peek()
        if head == "L":
            self.literal()
        elif head == "X":
            self.expression()
        elif head == "J":
            self.take()
            while self.peek() != "E":
                self.template_arg()
            self.expect("E")
        else:
            self.type()

    def literal(self) -> None:
        self.expect("L")
        if self.peek() == "_":
            self.take()
        if self.peek() == "Z":
            self.take()
            self.name()
            while self.peek() != "E":
                self.type()
        else:
            self.type()
            while self.peek() not in ("E", ""):
                self.take()  # the value: digits, n (negative) or lowercase hex
        self.expect("E")

    def expression(self) -> None:
        self.expect("X")
        self.skip_to_end()

    def skip_to_end(self) -> None:
        """An expression (after ``X``, ``Dt`` or ``DT``) up to its ``E``, by nesting depth;
        source names stepped over whole."""
        depth = 1
        while depth:
            head = self.peek()
            if not head:
                raise _Bad("unterminated expression")
            if head.isdigit():
                self.take(self.number())
            elif head in "XIJNLF":
                depth += 1
                self.take()
            elif head == "E":
                depth -= 1
                self.take()
            else:
                self.take()

    def type(self) -> None:
        head = self.peek()
        if not head:
            raise _Bad("expected a type")
        if head in _BUILTIN:
            self.take()
        elif head == "u":
            self.take()
            self.take(self.number())
        elif head in _QUALIFIERS or head in _POINTERS:
            self.take()
            self.type()
        elif head == "D":
            self.d_type()
        elif head == "F":
            self.take()
            if self.peek() == "Y":
                self.take()
            while self.peek() != "E":
                if self.peek() in ("R", "O") and self.peek(2)[1:] == "E":
                    self.take()
                    continue
                self.type()
            self.expect("E")
        elif head == "A":
            self.take()
            if self.peek().isdigit():
                self.number()
            self.expect("_")
            self.type()
        elif head == "M":
            self.take()
            self.type()
            self.type()
        elif head == "T":
            self.template_param()
            self.maybe_template_args()
        elif head in ("N", "Z", "S") or head.isdigit():
            if head == "Z":
                self.local()
                self.name()
            else:
                self.name()
        else:
            raise _Bad(f"unknown type {head!r} at {self.i}")

    def d_type(self) -> None:
        self.expect("D")
        code = self.take()
        if code == "p":
            self.type()
        elif code == "v":
            if self.peek().isdigit():
                self.number()
            self.expect("_")
            self.type()
        elif code in ("t", "T"):
            self.skip_to_end()
        elif code in ("F", "B", "U"):
            self.number()
            if self.peek() == "_":
                self.take()
            if code == "F" and self.peek() == "x":
                self.take()


def qualified_name(symbol: str) -> str | None:
    """``ns::name<…>`` of a mangled ``_Z`` symbol; None where it cannot be read."""
    if not symbol.startswith("_Z"):
        return None
    reader = _Reader(symbol[2:])
    try:
        parts, shown = reader.name()
    except (_Bad, IndexError, ValueError):
        return None
    parts = [p for p in parts if p != "(anonymous namespace)"]
    if not parts:
        return None
    return "::".join(parts) + shown


_INTEGER_SUFFIX = {"i": "", "j": "u", "l": "l", "m": "ul"}


def _plain(argument: str) -> str | None:
    """The one template argument as the demangler prints it, where that is one plain word:
    a class without template arguments (``7Kernel2`` -> ``Kernel2``) or an integer."""
    import re

    word = re.fullmatch(r"(\d+)(\w+)", argument)
    if word and int(word[1]) == len(word[2]):
        return word[2]
    number = re.fullmatch(r"L([ijlm])(\d+)E", argument)
    return number[2] + _INTEGER_SUFFIX[number[1]] if number else None
