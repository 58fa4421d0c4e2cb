"""The format of ``--extract``'s saved calls, shared by the record run and the replay.

``DIR/extract/calls.json`` is the index; each saved call has ``call-K/inputs.pkl`` (the
arguments, ``(args, kwargs)``), ``call-K/result.pkl`` and ``call-K/tensors/N.bin``. Tensors
are kept out of the pickles: each is checked against the size limit before it is written,
and comes back with its device, dtype, shape and strides. Everything else is pickled and
counted as it is written.

Runs in the user's interpreter (any Python 3) and in the CLI (for the names below); imports
torch or numpy only where the workload already did, and no other module of this folder.
"""

import json
import os
import pickle
import sys

SPEC_ENV = "IKET_CLI_EXTRACT"
#: Where the replay finds the saved calls (the capture's ``extract/`` folder).
DIR_ENV = "IKET_CLI_EXTRACT_DIR"
INDEX = "calls.json"
#: Created by the process that records (the first to call FUNC of the chosen rank).
OWNER = ".owner"
#: The replay's comparison of its results with the recorded ones.
CHECK = "replay.json"
#: The exit status of a record run whose argument could not be saved (the CLI reads the index).
UNSAVEABLE = 3


class OverLimit(Exception):
    """The saved calls would pass ``--max-extract``."""


class Unsaveable(Exception):
    """An argument that cannot be saved (its name is in the message)."""


def write_json(path, data):
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w") as out:
        json.dump(data, out, indent=1)
    os.replace(temporary, path)


class _Counted:
    """A file that counts what is written to it against the recorder's limit."""

    def __init__(self, out, recorder, what):
        self.out = out
        self.recorder = recorder
        self.what = what

    def write(self, data):
        self.recorder.used += len(data)
        if self.recorder.used > self.recorder.spec["max"]:
            raise OverLimit(f"{self.what} took the saved calls over --max-extract")
        return self.out.write(data)


class _Saver(pickle.Pickler):
    """Pickles a value, writing each tensor it holds to a file of its own."""

    def __init__(self, out, recorder, folder):
        super().__init__(out, protocol=4)
        self.recorder = recorder
        self.folder = folder
        self.tensors = {}

    def persistent_id(self, obj):
        torch = sys.modules.get("torch")
        if torch is None or not isinstance(obj, torch.Tensor):
            return None
        if id(obj) in self.tensors:
            return self.tensors[id(obj)]
        self.tensors[id(obj)] = reference = save_tensor(self, obj, torch)
        return reference


def save_tensor(saver, tensor, torch):
    size = tensor.numel() * tensor.element_size()
    recorder = saver.recorder
    if recorder.used + size > recorder.spec["max"]:
        raise OverLimit(
            f"a {tuple(tensor.shape)} {str(tensor.dtype).replace('torch.', '')} tensor ({size} bytes) "
            "would take the saved calls over --max-extract"
        )
    folder = os.path.join(saver.folder, "tensors")
    os.makedirs(folder, exist_ok=True)
    name = f"{len(os.listdir(folder))}.bin"
    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    with open(os.path.join(folder, name), "wb") as out:
        out.write(flat.view(torch.uint8).numpy().tobytes() if size else b"")
    recorder.used += size
    return (
        "tensor",
        name,
        str(tensor.dtype).replace("torch.", ""),
        tuple(tensor.shape),
        tuple(tensor.stride()),
        str(tensor.device),
        bool(tensor.requires_grad),
        isinstance(tensor, torch.nn.Parameter),
    )


def save(recorder, path, folder, value, what):
    os.makedirs(folder, exist_ok=True)
    with open(path, "wb") as raw:
        try:
            _Saver(_Counted(raw, recorder, what), recorder, folder).dump(value)
        except (OverLimit, RecursionError):
            raise
        except Exception as error:
            raise Unsaveable(f"{what} cannot be saved: {type(error).__name__}: {error}") from None


def probe(value, what):
    """Fail with the argument's name if a plain pickle of it (tensors aside) fails."""
    torch = sys.modules.get("torch")

    class Probe(pickle.Pickler):
        def persistent_id(self, obj):
            return 0 if torch is not None and isinstance(obj, torch.Tensor) else None

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


class Loader(pickle.Unpickler):
    """Unpickles a saved value, reading each tensor from its own file."""

    def __init__(self, file, folder):
        super().__init__(file)
        self.folder = folder

    def persistent_load(self, pid):
        _, name, dtype, shape, stride, device, requires_grad, parameter = pid
        import torch

        kind = getattr(torch, dtype)
        with open(os.path.join(self.folder, "tensors", name), "rb") as data:
            raw = bytearray(data.read())
        flat = torch.frombuffer(raw, dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
        values = flat.view(kind).reshape(shape)
        try:
            tensor = torch.empty_strided(shape, stride, dtype=kind, device=device).copy_(values)
        except RuntimeError:  # overlapping strides (an expanded tensor): its values, contiguous
            tensor = values.to(device)
        if parameter:
            return torch.nn.Parameter(tensor, requires_grad=requires_grad)
        return tensor.requires_grad_(requires_grad) if tensor.is_floating_point() else tensor


def load(folder, name):
    """The value saved in ``folder/name``."""
    with open(os.path.join(folder, name), "rb") as source:
        return Loader(source, folder).load()
