"""``--replay``'s side of the saved calls: a part loaded without running code it carries.

Arrays are built from their raw storage files and their rows in ``calls.json`` alone
(``iket_saved.py`` checks both first). The rest of a value is unpickled through an
allow-list (:meth:`Loader.find_class`): plain containers and numbers, numpy's and torch's
value types, ``nn.Module`` classes of torch, and classes (never functions) of modules that
FUNC's import already loaded from the recorded source root. A pickle that names anything
else (``os.system``, ``builtins.eval``, ``subprocess.Popen``) is refused by name: saved calls
are data, and a capture is something people send each other.

Runs in the user's interpreter (any Python 3); imports torch or numpy only when a part holds
their arrays or values.
"""

import os
import pickle
import sys

from iket_saved import Damaged, pickle_name, storage_name, under

#: Globals a part's pickle may name, by module: value types, never a callable with effects.
ALLOWED = {
    "builtins": {
        "list",
        "dict",
        "set",
        "frozenset",
        "tuple",
        "bytearray",
        "bytes",
        "str",
        "int",
        "float",
        "complex",
        "bool",
        "slice",
        "range",
        "object",
        "NoneType",
        "Ellipsis",
        "NotImplemented",
    },
    "collections": {"OrderedDict", "defaultdict", "deque", "Counter"},
    "datetime": {"datetime", "date", "time", "timedelta", "timezone"},
    "decimal": {"Decimal"},
    "fractions": {"Fraction"},
    "copyreg": {"_reconstructor"},
    "numpy": {
        "ndarray",
        "dtype",
        "float16",
        "float32",
        "float64",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "bool_",
        "complex64",
        "complex128",
    },
    "numpy.core.multiarray": {"_reconstruct", "scalar"},
    "numpy._core.multiarray": {"_reconstruct", "scalar"},
    "torch": {"Size", "device", "dtype"},
}


class Refused(pickle.UnpicklingError):
    """The pickle names a global outside the allow-list."""


class Loader(pickle.Unpickler):
    """Unpickles a part: arrays from their rows, other globals through the allow-list."""

    def __init__(self, file, arrays, root):
        super().__init__(file)
        self.arrays = arrays  # row -> the array, built before unpickling
        self.root = root  # the recorded source root: classes of its modules are allowed

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 2 and pid[0] == "array"):
            raise Damaged(f"the pickle refers to {pid!r:.60}, not an array row")
        row = pid[1]
        if not isinstance(row, int) or not 0 <= row < len(self.arrays):
            raise Damaged(f"the pickle refers to array {row!r:.20}, which the part has not")
        return self.arrays[row]

    def find_class(self, module, name):
        found = _allowed(module, name) or _torch_value(module, name) or _source_class(module, name, self.root)
        if found is None:
            raise Refused(f"{module}.{name}"[:120])
        return found


def _allowed(module, name):
    if name not in ALLOWED.get(module, ()):
        return None
    __import__(module)  # one of ALLOWED's: the replay imports no other module for a pickle
    return getattr(sys.modules[module], name, None)


def _torch_value(module, name):
    """A torch dtype (``torch.float32``) or an ``nn.Module`` class of torch (a model's layers)."""
    torch = sys.modules.get("torch")
    if torch is None or not module.startswith("torch"):
        return None
    if module == "torch":
        value = getattr(torch, name, None)
        return value if isinstance(value, torch.dtype) else None
    owner = sys.modules.get(module)
    if not module.startswith("torch.nn.") or owner is None:
        return None
    value = getattr(owner, name, None)
    return value if isinstance(value, type) and issubclass(value, torch.nn.Module) else None


def _source_class(module, name, root):
    """A class of a module already imported from ``root`` (the user's own: FUNC's ``self``)."""
    owner = sys.modules.get(module)
    where = getattr(owner, "__file__", None)
    if owner is None or not where or not root or not under(where, root):
        return None
    value = getattr(owner, name, None)
    return value if isinstance(value, type) and value.__module__ == module else None


def load_part(folder, name, record, root):
    """The value of part ``name`` of the saved call in ``folder`` (checked by iket_saved)."""
    storages = [
        _storage(os.path.join(folder, storage_name(name, n)), s) for n, s in enumerate(record["storages"])
    ]
    arrays = _arrays(record["arrays"], storages)
    with open(os.path.join(folder, pickle_name(name)), "rb") as source:
        try:
            return Loader(source, arrays, root).load()
        except Refused as refused:
            raise Damaged(f"{pickle_name(name)} names {refused}, which a saved call may not hold") from None
        except Damaged:
            raise
        except Exception as error:
            raise Damaged(
                f"{pickle_name(name)} cannot be read: {type(error).__name__}: {error}"[:200]
            ) from None


def _storage(path, record):
    with open(path, "rb") as source:
        return bytearray(source.read(record["bytes"] + 1)), record["device"]


def _arrays(rows, storages):
    """Each row's array; a torch storage goes to its device once, and every view shares it."""
    built, placed = [], {}
    for row in rows:
        raw, device = storages[row["storage"]]
        if row["kind"] == "numpy":
            built.append(_ndarray(row, raw))
            continue
        if row["storage"] not in placed:
            placed[row["storage"]] = _placed(raw, device, row["storage"], rows)
        built.append(_tensor(row, placed[row["storage"]]))
    return built


def _ndarray(row, raw):
    import numpy

    array = numpy.ndarray(
        tuple(row["shape"]),
        dtype=numpy.dtype(row["dtype"]),
        buffer=raw,
        offset=row["offset"],
        strides=tuple(row["strides"]),
    )
    if not row.get("writeable", True):
        array.flags.writeable = False
    return array


def _placed(raw, device, number, rows):
    """A storage on its device, and the non-leaf root its views hang from, if one needs it.

    A tensor that required grad and was not a leaf (the output of an op) must come back as
    one: FUNC may write into it in place, which autograd refuses on a leaf. Its storage is
    then a clone of a leaf that requires grad, and every array of the storage a view of it.
    """
    import torch

    flat = torch.frombuffer(raw, dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
    flat = flat.to(device)
    grown = [r for r in rows if r["storage"] == number and r["kind"] == "torch"]
    if not any(r["requires_grad"] and not r["leaf"] for r in grown):
        return flat, None
    dtypes = {r["dtype"] for r in grown}
    if len(dtypes) != 1:
        raise Damaged("a storage that holds a non-leaf tensor is viewed with several dtypes")
    kind = getattr(torch, dtypes.pop())
    count = flat.numel() // torch.empty(0, dtype=kind).element_size()
    base = torch.empty(0, dtype=kind, device=flat.device).set_(flat.untyped_storage(), 0, (count,), (1,))
    return flat, base.requires_grad_(True).clone()


def _tensor(row, placed):
    import torch

    flat, root = placed
    kind = getattr(torch, row["dtype"])
    shape, strides = tuple(row["shape"]), tuple(row["strides"])
    if root is not None:
        view = root.as_strided(shape, strides, row["offset"])
        return view if row["requires_grad"] else view.detach()
    tensor = torch.empty(0, dtype=kind, device=flat.device).set_(
        flat.untyped_storage(), row["offset"], shape, strides
    )
    if row.get("parameter"):
        return torch.nn.Parameter(tensor, requires_grad=row["requires_grad"])
    if row["requires_grad"] and (tensor.is_floating_point() or tensor.is_complex()):
        tensor.requires_grad_(True)
    return tensor
