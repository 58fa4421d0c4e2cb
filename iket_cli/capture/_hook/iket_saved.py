"""The format of ``--extract``'s saved calls, and its checks: shared by the record run, the
replay and the CLI.

``DIR/extract/calls.json`` is the index (:data:`VERSION`). Each saved call ``call-K/`` has two
*parts*, the arguments (``inputs``) and the result (``result``). A part is a pickle of the
value's structure (``inputs.pkl``) in which every array (a torch tensor, a numpy array) is a
reference to a row of the part's table of arrays, and the memory those arrays view, saved
raw, one file per storage (``inputs/0.bin``, ...). Arrays that shared memory in the workload
(``launch(x, x)``, a buffer and a view of it) share it again in the replay. The tables, each
file's size included, are in ``calls.json``: the CLI checks a saved call's files without
unpickling anything, and the replay builds arrays from raw bytes and these records alone.
File names are never read from the index: they follow from the part and the row.

A saved call is *damaged* when its index or files do not agree with this format:
:func:`check_index` and :func:`check_files` say where, in one line (:class:`Damaged`).

Runs in the user's interpreter (any Python 3) and in the CLI; imports nothing outside the
standard library, and no other module of this folder.
"""

import json
import os
import re
import stat
from json import dump as _dump
from os import replace as _replace

SPEC_ENV = "IKET_CLI_EXTRACT"
#: ``--window``/``--one-pass``: the window's spec (iket_window.py), and what the hook says of
#: the window in its folder as it happens (the CLI reads it should the process die inside it).
WINDOW_SPEC_ENV = "IKET_CLI_WINDOW"
WINDOW_STATE = "window.json"
#: Where the replay finds the saved calls (the capture's ``extract/`` folder).
DIR_ENV = "IKET_CLI_EXTRACT_DIR"
INDEX = "calls.json"
#: The index's format; an index of another version was written by another iket.
VERSION = 2
#: Created by the process that records (the first to call FUNC of the chosen rank).
OWNER = ".owner"
#: The replay's comparison of its results with the recorded ones.
CHECK = "replay.json"
#: The replay's account of a damaged saved call, read by the CLI (its exit status: :data:`DAMAGED`).
DAMAGE = "damaged.json"
#: The exit status of a record run whose argument could not be saved (the CLI reads the index).
UNSAVEABLE = 3
#: The exit status of a replay that found a saved call damaged (the CLI reads :data:`DAMAGE`).
DAMAGED = 4
#: A saved call's two parts, in the order they are written.
PARTS = ("inputs", "result")
#: The largest ``calls.json`` iket reads (an index lists arrays, not their values).
MAX_INDEX_BYTES = 16 << 20

#: torch dtypes by name, with their sizes in bytes (what a saved tensor may be).
TORCH_DTYPES = {
    "bool": 1, "uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8,
    "uint16": 2, "uint32": 4, "uint64": 8,
    "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8,
    "complex32": 4, "complex64": 8, "complex128": 16,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1,
}  # fmt: skip
#: numpy dtypes, as ``dtype.str`` writes them: byte order, kind, size (no objects, no records).
NUMPY_DTYPE = re.compile(r"^[<>|=][biufc]([1-9][0-9]?)$")
DEVICE = re.compile(r"^(cpu|cuda(:[0-9]{1,3})?)$")
CALL_FOLDER = re.compile(r"^call-([1-9][0-9]{0,11}|last)$")


class OverLimit(Exception):
    """The saved calls would pass ``--max-extract``."""


class Unsaveable(Exception):
    """An argument that cannot be saved (its name is in the message)."""


class DiskFull(Exception):
    """The disk holding the saved calls is full (its message names the file being written)."""


#: The errors of a full disk or quota (errno ENOSPC, EDQUOT).
DISK_FULL_ERRNOS = (28, 122)


class Damaged(Exception):
    """A saved call whose index or files do not agree with the format (where, in the message)."""


def write_json(path, data):
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w") as out:
        _dump(data, out, indent=1)  # private references: FUNC may be a function the hook uses
    _replace(temporary, path)


def pickle_name(part):
    return f"{part}.pkl"


def storage_name(part, number):
    return f"{part}/{number}.bin"


def under(path, root):
    """Whether ``path`` is ``root`` or lies inside it, links resolved."""
    path, root = os.path.realpath(path), os.path.realpath(root)
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def itemsize(kind, dtype):
    """Bytes per element of a saved array's dtype, or None when it is not one iket saves."""
    if kind == "torch":
        return TORCH_DTYPES.get(dtype) if isinstance(dtype, str) else None
    found = NUMPY_DTYPE.match(dtype) if isinstance(dtype, str) else None
    return int(found.group(1)) if found else None


# -- reading the index safely -------------------------------------------------------------


def open_regular(path):
    """A file descriptor of ``path`` if it is a regular file; never follows a link and never
    waits on a FIFO (``O_NONBLOCK``), so a planted link or pipe is refused, not read."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as error:
        if os.path.islink(path):
            raise Damaged(f"{os.path.basename(path)} is a symbolic link") from None
        raise Damaged(f"{os.path.basename(path)} cannot be read ({error.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Damaged(f"{os.path.basename(path)} is not a regular file")
    return fd


def read_index(folder):
    """The index of the saved calls in ``folder``, checked (:class:`Damaged` otherwise)."""
    fd = open_regular(os.path.join(folder, INDEX))
    with os.fdopen(fd, "rb") as source:
        data = source.read(MAX_INDEX_BYTES + 1)
    if len(data) > MAX_INDEX_BYTES:
        raise Damaged(f"{INDEX} is larger than {MAX_INDEX_BYTES >> 20} MiB")
    try:
        index = json.loads(data)
    except (ValueError, RecursionError):
        raise Damaged(f"{INDEX} is not JSON") from None
    check_index(index)
    return index


# -- the index's shape --------------------------------------------------------------------


def _need(ok, where, what):
    if not ok:
        raise Damaged(f"{INDEX}: {where} {what}")


def _count(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_index(index):
    """Raise :class:`Damaged`, naming the field, unless ``index`` has the format's shape."""
    _need(isinstance(index, dict), "the index", "is not an object")
    _need(index.get("version") == VERSION, "version", f"is not {VERSION} (saved by another iket)")
    for key in ("function", "module", "qualname"):
        _need(isinstance(index.get(key), str) and index[key], key, "is not a name")
    _need(isinstance(index.get("path0"), str), "path0", "is not a folder")
    calls = index.get("calls")
    _need(isinstance(calls, list), "calls", "is not a list")
    folders = set()
    for number, call in enumerate(calls):
        where = f"calls[{number}]"
        _need(isinstance(call, dict), where, "is not an object")
        _need(_count(call.get("call")) and call["call"] >= 1, f"{where}.call", "is not a call number")
        folder = call.get("folder")
        _need(isinstance(folder, str) and CALL_FOLDER.match(folder), f"{where}.folder", "is not call-N")
        _need(folder not in folders, f"{where}.folder", "is listed twice")
        folders.add(folder)
        _need(_count(call.get("bytes")), f"{where}.bytes", "is not a size")
        arguments = call.get("arguments", [])
        _need(isinstance(arguments, list), f"{where}.arguments", "is not a list")
        _need(all(isinstance(a, dict) for a in arguments), f"{where}.arguments", "is not a list of objects")
        parts = call.get("parts")
        _need(isinstance(parts, dict), f"{where}.parts", "is not an object")
        for part in PARTS:
            check_part(parts.get(part), f"{where}.parts.{part}")


def check_part(part, where):
    _need(isinstance(part, dict), where, "is not an object")
    _need(_count(part.get("pickle")), f"{where}.pickle", "is not a size")
    storages, arrays = part.get("storages"), part.get("arrays")
    _need(isinstance(storages, list), f"{where}.storages", "is not a list")
    _need(isinstance(arrays, list), f"{where}.arrays", "is not a list")
    for number, storage in enumerate(storages):
        at = f"{where}.storages[{number}]"
        _need(isinstance(storage, dict), at, "is not an object")
        _need(_count(storage.get("bytes")), f"{at}.bytes", "is not a size")
        device = storage.get("device")
        _need(
            isinstance(device, str) and DEVICE.match(device),
            f"{at}.device",
            f"{device!r} is not cpu or cuda:N",
        )
    for number, array in enumerate(arrays):
        check_array(array, storages, f"{where}.arrays[{number}]")


def check_array(array, storages, where):
    """An array's record, and that the elements it views lie inside its storage."""
    _need(isinstance(array, dict), where, "is not an object")
    kind = array.get("kind")
    _need(kind in ("torch", "numpy"), f"{where}.kind", "is not torch or numpy")
    size = itemsize(kind, array.get("dtype"))
    _need(size is not None, f"{where}.dtype", f"{array.get('dtype')!r} is not a {kind} dtype iket saves")
    number = array.get("storage")
    _need(_count(number) and number < len(storages), f"{where}.storage", "names no storage of the part")
    shape, strides, offset = array.get("shape"), array.get("strides"), array.get("offset")
    _need(isinstance(shape, list) and all(_count(n) for n in shape), f"{where}.shape", "is not a shape")
    _need(len(shape) <= 64, f"{where}.shape", "has more than 64 dimensions")
    _need(
        isinstance(strides, list)
        and len(strides) == len(shape)
        and all(isinstance(s, int) and not isinstance(s, bool) for s in strides),
        f"{where}.strides",
        "do not go with its shape",
    )
    _need(_count(offset), f"{where}.offset", "is not an offset")
    # Bytes, whatever the kind: a torch record counts its offset and strides in elements.
    scale = size if kind == "torch" else 1
    span = extent(shape, [step * scale for step in strides], offset * scale, size)
    _need(
        span is None or (span[0] >= 0 and span[1] <= storages[number]["bytes"]),
        where,
        f"views bytes {span and span[0]}..{span and span[1]} of a storage of {storages[number]['bytes']}",
    )


def extent(shape, strides, offset, size):
    """The bytes ``[low, high)`` an array views (strides and offset in bytes); None if empty."""
    low = high = offset
    for length, step in zip(shape, strides):  # noqa: B905  (any Python 3 runs this file)
        if length == 0:
            return None
        reach = (length - 1) * step
        low, high = low + min(reach, 0), high + max(reach, 0)
    return low, high + size


# -- the files ----------------------------------------------------------------------------


def listed_files(index):
    """Every file of the saved calls with the size the index records: ``(relative path, bytes)``."""
    for call in index["calls"]:
        for part in PARTS:
            record = call["parts"][part]
            yield f"{call['folder']}/{pickle_name(part)}", record["pickle"]
            for number, storage in enumerate(record["storages"]):
                yield f"{call['folder']}/{storage_name(part, number)}", storage["bytes"]


def check_files(folder, index):
    """Each listed file is a regular file of the recorded size (:class:`Damaged` otherwise)."""
    for name, size in listed_files(index):
        path = os.path.join(folder, name)
        if not os.path.lexists(path):
            raise Damaged(f"{name} is missing")
        fd = open_regular(path)
        try:
            found = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if found != size:
            raise Damaged(f"{name} holds {found} bytes, {size} expected")
