"""``--extract``'s record run: one part of a saved call (the arguments, or the result) written.

A part is written in the format of ``iket_saved.py``: the value's structure pickled, each
torch tensor and numpy array in it replaced by a row of the part's table of arrays, and the
memory of each array saved once per storage, raw, so that views and repeated arguments come
back sharing memory. Every byte is counted against ``--max-extract`` as it is written.

Runs in the user's interpreter (any Python 3); uses torch or numpy only where the workload
already imported them.
"""

import os
import pickle
import sys

from iket_saved import (
    DISK_FULL_ERRNOS,
    DiskFull,
    OverLimit,
    Unsaveable,
    extent,
    itemsize,
    pickle_name,
    storage_name,
)


class _Counted:
    """A file that counts what is written to it against the recorder's limit."""

    def __init__(self, out, recorder, what):
        self.out = out
        self.recorder = recorder
        self.what = what
        self.written = 0

    def write(self, data):
        self.recorder.used += len(data)
        self.written += len(data)
        if self.recorder.used > self.recorder.spec["max"]:
            raise OverLimit(f"{self.what} took the saved calls over --max-extract")
        return self.out.write(data)


class Part:
    """The table of one part: its storages (memory saved once each) and arrays (views of them)."""

    def __init__(self, recorder, folder, name):
        self.recorder = recorder
        self.folder = folder
        self.name = name
        self.storages = []
        self.arrays = []
        self._storage_at = {}  # (kind, device, address) -> row
        self._array_at = {}  # id(array) -> row
        self._kept = []  # the arrays seen, so that no id is reused while the part is written

    def record(self, pickled):
        return {"pickle": pickled, "storages": self.storages, "arrays": self.arrays}

    def reference(self, value, torch, numpy):
        """The row of ``value`` if it is an array iket saves raw, else None (pickled)."""
        if id(value) in self._array_at:
            return self._array_at[id(value)]
        if torch is not None and isinstance(value, torch.Tensor):
            row = self._tensor(value, torch)
        elif numpy is not None and type(value) is numpy.ndarray and itemsize("numpy", value.dtype.str):
            row = self._ndarray(value, numpy)
        else:
            return None
        self._kept.append(value)
        self._array_at[id(value)] = row
        return row

    def _tensor(self, tensor, torch):
        if tensor.layout != torch.strided or tensor.is_quantized or tensor.device.type not in ("cpu", "cuda"):
            raise Unsaveable(f"a {tensor.layout} {tensor.device.type} tensor cannot be saved")
        dtype = str(tensor.dtype).replace("torch.", "")
        if itemsize("torch", dtype) is None:
            raise Unsaveable(f"a {dtype} tensor cannot be saved")
        if tensor.is_conj() or tensor.is_neg():
            tensor = tensor.resolve_conj().resolve_neg()
        storage = tensor.untyped_storage()
        device = str(tensor.device) if tensor.device.type == "cpu" else f"cuda:{tensor.device.index or 0}"
        key = ("torch", device, storage.data_ptr()) if storage.data_ptr() else ("torch", id(tensor))
        number = self._storage(key, storage.nbytes(), device, lambda: _tensor_bytes(tensor, storage, torch))
        row = len(self.arrays)
        self.arrays.append(
            {
                "kind": "torch",
                "storage": number,
                "dtype": dtype,
                "shape": list(tensor.shape),
                "strides": list(tensor.stride()),
                "offset": tensor.storage_offset(),
                "requires_grad": bool(tensor.requires_grad),
                "leaf": bool(tensor.is_leaf),
                "parameter": isinstance(tensor, torch.nn.Parameter),
            }
        )
        return row

    def _ndarray(self, array, numpy):
        root = array
        while isinstance(root.base, numpy.ndarray):
            root = root.base
        start = root.__array_interface__["data"][0]
        offset = array.__array_interface__["data"][0] - start
        whole = root.flags.c_contiguous or root.flags.f_contiguous
        if not whole or not _inside(array, offset, root.nbytes):
            root, offset = numpy.ascontiguousarray(array), 0  # memory it does not share: a copy
            start = root.__array_interface__["data"][0]
        key = ("numpy", start, root.nbytes) if start else ("numpy", id(root))
        number = self._storage(
            key, root.nbytes, "cpu", lambda: root.ravel(order="K").view(numpy.uint8).tobytes()
        )
        row = len(self.arrays)
        self._kept.append(root)
        self.arrays.append(
            {
                "kind": "numpy",
                "storage": number,
                "dtype": array.dtype.str,
                "shape": list(array.shape),
                "strides": list(array.strides),
                "offset": offset,
                "writeable": bool(array.flags.writeable),
            }
        )
        return row

    def _storage(self, key, size, device, data):
        if key in self._storage_at:
            return self._storage_at[key]
        recorder = self.recorder
        if recorder.used + size > recorder.spec["max"]:
            raise OverLimit(f"an array of {size} bytes would take the saved calls over --max-extract")
        number = len(self.storages)
        path = os.path.join(self.folder, storage_name(self.name, number))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as out:
            out.write(data() if size else b"")
        recorder.used += size
        self.storages.append({"bytes": size, "device": device})
        self._storage_at[key] = number
        return number


def _inside(array, offset, nbytes):
    span = extent(array.shape, array.strides, offset, array.itemsize)
    return span is None or (span[0] >= 0 and span[1] <= nbytes)


def _tensor_bytes(tensor, storage, torch):
    whole = torch.empty(0, dtype=torch.uint8, device=tensor.device)
    whole.set_(storage, 0, (storage.nbytes(),), (1,))
    return whole.detach().to("cpu").numpy().tobytes()


class _Saver(pickle.Pickler):
    """Pickles a value's structure; its arrays become rows of the part's table."""

    def __init__(self, out, part):
        super().__init__(out, protocol=4)
        self.part = part
        self.torch = sys.modules.get("torch")
        self.numpy = sys.modules.get("numpy")

    def persistent_id(self, obj):
        row = self.part.reference(obj, self.torch, self.numpy)
        return None if row is None else ("array", row)


def save(recorder, folder, name, value, what):
    """Write part ``name`` of a saved call into ``folder``; its record for the index."""
    try:
        os.makedirs(folder, exist_ok=True)
        part = Part(recorder, folder, name)
        with open(os.path.join(folder, pickle_name(name)), "wb") as raw:
            counted = _Counted(raw, recorder, what)
            _Saver(counted, part).dump(value)
    except (OverLimit, RecursionError):
        raise
    except Unsaveable as error:
        raise Unsaveable(f"{what} cannot be saved: {error}") from None
    except OSError as error:
        if error.errno in DISK_FULL_ERRNOS:
            raise DiskFull(f"no space left writing {what} into {folder}") from None
        raise Unsaveable(f"{what} cannot be saved: {type(error).__name__}: {error}") from None
    except Exception as error:
        raise Unsaveable(f"{what} cannot be saved: {type(error).__name__}: {error}") from None
    return part.record(counted.written)


def probe(value, what):
    """Fail with the argument's name if a plain pickle of it (arrays aside) fails."""
    torch, numpy = sys.modules.get("torch"), sys.modules.get("numpy")

    class Probe(pickle.Pickler):
        def persistent_id(self, obj):
            if torch is not None and isinstance(obj, torch.Tensor):
                return 0
            return 0 if numpy is not None and type(obj) is numpy.ndarray else None

    class Sink:
        def write(self, data):
            return len(data)

    try:
        Probe(Sink(), protocol=4).dump(value)
    except Exception as error:
        raise Unsaveable(f"{what} cannot be saved: {type(error).__name__}: {error}") from None


def describe(value):
    """A short record of a value for the manifest: kind, shape, dtype, bytes."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return {
            "kind": "tensor",
            "shape": list(value.shape),
            "dtype": str(value.dtype).replace("torch.", ""),
            "device": str(value.device),
            "bytes": value.numel() * value.element_size(),
        }
    if torch is not None and isinstance(value, torch.nn.Module):
        count = sum(p.numel() * p.element_size() for p in value.parameters())
        return {"kind": "module", "type": type(value).__name__, "bytes": count}
    shape, dtype, nbytes = (
        getattr(value, "shape", None),
        getattr(value, "dtype", None),
        getattr(value, "nbytes", None),
    )
    if shape is not None and dtype is not None and isinstance(nbytes, int):
        return {"kind": "array", "shape": list(shape), "dtype": str(dtype), "bytes": nbytes}
    return {"kind": type(value).__name__}
