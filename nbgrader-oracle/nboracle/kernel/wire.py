"""The wire format between a grading kernel and the grader: its limits, ``encode`` and a strict ``decode``.

Both sides use this module: the kernel (:mod:`nboracle.kernel.server`) encodes its answers,
the grader (:mod:`nboracle.grader.oracle`) decodes them.

While nbgrader autogrades a chapter under the oracle (``nboracle.grader.oracle``), graded test
cells run in the *grader's* process. The names they read that belong to the student (their
functions, classes, answers) are proxies: every call, attribute read or item read is a
request to the kernel, answered by :func:`serve` there (while a grader cell runs, on a Unix
socket of the grader's, in length-prefixed frames: see :func:`listen`), and what comes back
is **plain data** in a fixed format:

* ``None``, booleans, integers, floats (``NaN`` and infinities included) and strings, as
  JSON itself;
* ``{"t": "tuple" | "list", "v": [...]}`` and ``{"t": "dict", "v": [[key, value], ...]}``;
* ``{"t": "nd" | "np" | "pt", "dtype": ..., "shape": [...], "b64": ...}``: a NumPy array, a
  NumPy scalar or a PyTorch tensor, its raw little-endian bytes in base64, the dtype from
  :data:`DTYPES` only;
* ``{"t": "dtype", "v": "float64"}``: a torch dtype (an argument such as ``dtype=torch.float64``);
* ``{"t": "rng", "v": state}``: a NumPy ``Generator`` argument, by the state of its bit generator
  (a dict of integers and strings; PCG64, ``np.random.default_rng``, only); the kernel draws from
  a fresh generator in that state, and its reply carries the states the call left (``"rng"``).
  The grader never loads them: it advances its own generator by the distance to the reported
  state (at most 2**40 draws) and accepts only an exact match (``nboracle.grader.oracle._moved_on``),
  so a test sees ``rng`` move on exactly as in JupyterLab;
* ``{"t": "iter", "v": [...]}``: what a generator of PyTorch's own code (``module.parameters()``,
  ``named_parameters()``, ``buffers()``) yields, listed in the kernel at once (one round trip,
  not two); the grader reads it as an iterator over the items;
* a request carries ``"id"`` (random text), which its reply echoes (the grader refuses any
  other reply), and ``"mode"`` (``{"grad": bool, "inference": bool}``, the test's autograd mode,
  under which the kernel runs the call);
* ``{"t": "h", "id": n, "type": [...], "callable": bool}``: a handle to an object that lives
  in the kernel (a module, a function), which the grader wraps in a new proxy.
* ``{"t": "generator", "state": ...}`` (grader to kernel only): a CPU ``torch.Generator`` by
  value, its state as a uint8 tensor; the kernel draws from a copy;
* ``{"t": "cb", "id": n, "callable": bool, "name": ...}`` (grader to kernel only): an
  instructor function or object a student function must receive (:func:`fresh`). It stays in
  the grader; the kernel holds a stand-in (:class:`Instructor`) whose every use (a call, an
  attribute, an item) is a frame back to the grader on the socket, ``{"cb": n, "op": ...}``,
  with data both ways, answered while the grader waits for the student's call to return.

:func:`decode` reads that format strictly (whitelisted dtypes, caps on size, length and
depth, nothing else) and builds fresh, genuine objects: never a pickle, never an object the
kernel made. :func:`encode` writes it; in the kernel it may be replaced by student code,
which changes nothing the grader trusts: whatever the kernel sends is, at most, what the
student's own code could have returned.

Nothing here is a reference solution: it ships to students with the rest of the kernel side.
"""

from __future__ import annotations

import base64
import itertools
import json
import math
import re
import sys
import types
from typing import Any, Callable

__all__ = ["WireError", "encode", "decode", "decode_tree", "dumps", "loads", "read_frame", "write_frame",
           "MAX_BYTES", "MAX_TEXT", "MAX_ITEMS", "MAX_PRINTED"]

# numpy dtype names accepted on the wire (torch tensors use the same names, plus bfloat16,
# which travels as float32 and is cast back)
DTYPES = {
    "bool": "|b1", "int8": "|i1", "uint8": "|u1", "int16": "<i2", "int32": "<i4", "int64": "<i8",
    "float16": "<f2", "float32": "<f4", "float64": "<f8", "complex64": "<c8", "complex128": "<c16",
}
TORCH_ONLY = {"bfloat16": "float32"}
MAX_BYTES = 128 * 1024 * 1024  # bytes of all arrays of one reply together
# characters of one reply (a frame on the socket, an answer on the shell), checked before it is
# read or parsed: the arrays' base64 (4/3 of MAX_BYTES) and room for the rest
MAX_TEXT = MAX_BYTES * 4 // 3 + 16 * 1024 * 1024
MAX_ITEMS = 200_000  # values of one reply (container entries, scalars)
# JSON values (objects, arrays, strings, numbers) of one reply, counted before json.loads builds
# any: a wire entry is a few of them (its dict, its tag, its list); a 64 MiB "[[],[],...]" is 21
# million, which json.loads would turn into 1.5 GB of lists before MAX_ITEMS could say no
MAX_NODES = 8 * MAX_ITEMS
MAX_DEPTH = 24  # nesting of containers
MAX_STRING = 4 * 1024 * 1024  # characters of one string
MAX_NDIM = 32
MAX_PRINTED = 20_000  # characters of what the student's code prints during one request (the rest is cut)


class WireError(ValueError):
    """The kernel's answer is not data in the oracle's format (the test that asked fails)."""


# ---------------------------------------------------------------- encoding (either side)


_RAW: Any = None  # NumPy's and torch's functions encode uses, captured by listen() (see _raw)


def _raw() -> Any:
    """The functions :func:`encode` reads arrays and tensors with. In a grading kernel they are
    captured by :func:`listen` before any student code runs, so that a call which rebinds
    ``np.asarray`` or ``torch.Tensor.numpy`` cannot change what the kernel's reply says its
    answer holds; elsewhere (JupyterLab, the grader) they are taken as they are, once."""
    global _RAW
    if _RAW is None:
        import numpy as np
        import torch

        base = torch._C.TensorBase  # a C type: its methods cannot be replaced
        _RAW = types.SimpleNamespace(asarray=np.asarray, dtype=np.dtype, detach=base.detach, cpu=base.cpu,
                                     contiguous=base.contiguous, numpy=base.numpy, to=base.to,
                                     plain=torch._C.DisableTorchFunction)
    return _RAW


def _array_entry(kind: str, array: Any, dtype_name: str) -> dict:
    raw = _raw()
    array = raw.asarray(array, dtype=raw.dtype(DTYPES[dtype_name]), order="C")  # keeps 0-d arrays 0-d
    return {"t": kind, "dtype": dtype_name, "shape": [int(n) for n in array.shape],
            "b64": base64.b64encode(array.tobytes()).decode("ascii")}


# what a numeric dtype outside DTYPES travels as (extended precision, unsigned integers): the
# nearest whitelisted one, by its kind; values it cannot hold are refused with the dtype named
WIDEST = {"f": "float64", "c": "complex128", "u": "int64", "i": "int64"}


def _as_wire_dtype(array: Any, name: str) -> tuple[Any, str]:
    """``(array cast to a whitelisted dtype, its name)`` for a numeric NumPy array outside DTYPES
    (``np.longdouble`` -> float64, complex256 -> complex128, uint64 -> int64); WireError, naming
    the dtype, where the cast would change a value beyond rounding (an overflow); ``(None, "")``
    for an array that is not numbers (objects, strings, records: not data)."""
    import numpy as np

    target = WIDEST.get(array.dtype.kind)
    if target is None or array.dtype.fields is not None:
        return None, ""
    info = np.iinfo if target == "int64" else np.finfo
    if array.size and target == "int64":
        if int(array.max()) > info(np.int64).max or int(array.min()) < info(np.int64).min:
            raise WireError(f"an array of dtype {name} holds integers beyond int64's range: "
                            "the grader cannot receive it (return int64 values)")
        return array.astype(np.int64), target
    with np.errstate(over="ignore", invalid="ignore"):
        cast = array.astype(target)
    if array.size and np.count_nonzero(np.isfinite(cast)) != np.count_nonzero(np.isfinite(array)):
        raise WireError(f"an array of dtype {name} holds values beyond {target}'s range: "
                        f"the grader cannot receive it (return {target} values)")
    return cast, target


def encode(value: Any, handle: Callable[[Any], dict] | None = None, _depth: int = 0) -> Any:
    """``value`` in the wire format; objects that are not data become ``handle(value)``.

    Without ``handle`` (the grader sending arguments) anything that is not data raises
    :class:`WireError`: arguments travel by value only.
    """
    if _depth > MAX_DEPTH:
        raise WireError("the value is nested too deeply to send")
    kind = type(value)
    if value is None or kind in (bool, str):
        return value
    if kind is int:
        return value
    if kind is float:
        return value if math.isfinite(value) else {"t": "float", "v": repr(value)}
    if isinstance(value, (bool, int, float, str)) and handle is not None:  # a subclass: its plain value
        base = next(b for b in (bool, int, float, str) if isinstance(value, b))
        return encode(base(value), handle, _depth)
    if kind in (tuple, list) or (handle is not None and isinstance(value, (tuple, list))):
        tag = "list" if isinstance(value, list) else "tuple"
        return {"t": tag, "v": [encode(item, handle, _depth + 1) for item in value]}
    if kind is dict or (handle is not None and isinstance(value, dict)):
        return {"t": "dict", "v": [[encode(k, handle, _depth + 1), encode(v, handle, _depth + 1)]
                                   for k, v in dict.items(value)]}
    np = sys.modules.get("numpy")
    if np is not None:
        if isinstance(value, np.ndarray) and value.dtype.name in DTYPES:
            return _array_entry("nd", np.ndarray.view(value, np.ndarray), value.dtype.name)
        if isinstance(value, np.generic) and value.dtype.name in DTYPES:
            return _array_entry("np", _raw().asarray(value), value.dtype.name)
        if isinstance(value, (np.ndarray, np.generic)):  # numbers of another dtype: as the nearest one
            plain = np.ndarray.view(value, np.ndarray) if isinstance(value, np.ndarray) else _raw().asarray(value)
            cast, name = _as_wire_dtype(plain, value.dtype.name)
            if cast is not None:
                return _array_entry("nd" if isinstance(value, np.ndarray) else "np", cast, name)
        if handle is None and type(value) is np.random.Generator:  # an argument: by its state
            return {"t": "rng", "v": encode(value.bit_generator.state, None, _depth + 1)}
    torch = sys.modules.get("torch")
    if torch is not None:
        if isinstance(value, torch.Tensor):
            raw = _raw()
            with raw.plain():
                plain = raw.cpu(raw.detach(value))
                name = str(plain.dtype).replace("torch.", "")
                if name in TORCH_ONLY:
                    plain = raw.to(plain, getattr(torch, TORCH_ONLY[name]))
                    entry = _array_entry("pt", raw.numpy(raw.contiguous(plain)), TORCH_ONLY[name])
                    entry["dtype"] = name
                elif name in DTYPES:
                    entry = _array_entry("pt", raw.numpy(raw.contiguous(plain)), name)
                else:  # numbers of another dtype (uint32, complex32, float8): as the nearest one
                    entry = _odd_tensor(plain, name)
                    if entry is None:
                        if handle is None:
                            raise WireError(f"a tensor of dtype {name} cannot be sent")
                        return handle(value)
            if value.requires_grad:
                entry["grad"] = True
            return entry
        if isinstance(value, torch.dtype):
            return {"t": "dtype", "v": str(value).replace("torch.", "")}
    if handle is None:
        raise WireError(f"a {kind.__name__} cannot be sent to the kernel: arguments travel by value "
                        "(arrays, tensors, numbers, strings, None, and tuples, lists and dicts of them)")
    return handle(value)


def _odd_tensor(plain: Any, name: str) -> dict | None:
    """The ``"pt"`` entry of a CPU tensor of a numeric dtype outside DTYPES, cast to the nearest
    whitelisted one (see :func:`_as_wire_dtype`); None for one that is not numbers (quantized)."""
    import torch

    if plain.is_quantized or plain.layout != torch.strided:
        return None
    raw = _raw()
    if plain.is_complex():
        wide = raw.to(plain, torch.complex128)
    elif plain.is_floating_point():
        wide = raw.to(plain, torch.float64)
    elif plain.dtype.is_signed or plain.dtype == torch.bool:
        return None
    else:  # an unsigned integer tensor
        wide = plain
    try:
        array = raw.numpy(raw.contiguous(wide))
    except (TypeError, RuntimeError):  # a dtype NumPy does not have (uint16 in older torch)
        array = raw.numpy(raw.contiguous(raw.to(plain, torch.int64))) if not plain.is_floating_point() else None
    if array is None:
        return None
    cast, wire_name = _as_wire_dtype(array, name) if array.dtype.name not in DTYPES else (array, array.dtype.name)
    return None if cast is None else _array_entry("pt", cast, wire_name)


def dumps(value: Any, handle: Callable[[Any], dict] | None = None) -> str:
    return json.dumps(encode(value, handle), separators=(",", ":"))


# ---------------------------------------------------------------- strict decoding (the grader)


class _Budget:
    def __init__(self) -> None:
        self.items = 0
        self.bytes = 0

    def count(self, n_items: int = 1, n_bytes: int = 0) -> None:
        self.items += n_items
        self.bytes += n_bytes
        if self.items > MAX_ITEMS:
            raise WireError(f"the answer holds more than {MAX_ITEMS} values")
        if self.bytes > MAX_BYTES:
            raise WireError(f"the answer holds more than {MAX_BYTES // 2 ** 20} MiB of arrays")


def _keys(entry: dict, allowed: set) -> None:
    if not set(entry) <= allowed or "t" not in entry:
        raise WireError(f"unexpected fields {sorted(set(entry) - allowed)} in a {entry.get('t')!r} entry")


def _array(entry: dict, budget: _Budget, torch_ok: bool):
    import numpy as np

    kind = entry["t"]
    _keys(entry, {"t", "dtype", "shape", "b64", "grad"})
    name, shape, data = entry.get("dtype"), entry.get("shape"), entry.get("b64")
    wire_name = TORCH_ONLY.get(name, name) if kind == "pt" else name
    if type(name) is not str or wire_name not in DTYPES:
        raise WireError(f"dtype {name!r} is not one the grader accepts")
    if type(shape) is not list or len(shape) > MAX_NDIM or any(type(n) is not int or n < 0 for n in shape):
        raise WireError("an array's shape must be a short list of non-negative integers")
    if kind == "np" and shape:
        raise WireError("a NumPy scalar has shape []")
    if type(data) is not str:
        raise WireError("an array's bytes must be base64 text")
    dtype = np.dtype(DTYPES[wire_name])
    size = math.prod(shape)
    budget.count(1, size * dtype.itemsize)
    try:
        raw = base64.b64decode(data.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise WireError("an array's bytes are not valid base64") from None
    if len(raw) != size * dtype.itemsize:
        raise WireError(f"an array of shape {tuple(shape)} and dtype {wire_name} needs {size * dtype.itemsize} "
                        f"bytes, the answer has {len(raw)}")
    array = np.frombuffer(raw, dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="), copy=True)
    if kind == "nd":
        return array
    if kind == "np":
        return array[()]
    if not torch_ok:
        raise WireError("a tensor arrived but PyTorch is not available here")
    import torch

    tensor = torch.from_numpy(array)
    if name in TORCH_ONLY:
        tensor = tensor.to(getattr(torch, name))
    if "grad" in entry:  # a trainable parameter or an output with a graph in the kernel: the same flag here
        if entry["grad"] is not True or not (tensor.is_floating_point() or tensor.is_complex()):
            raise WireError("only a floating-point tensor can require a gradient")
        tensor.requires_grad_(True)
    return tensor


# a JSON string (skipped whole, at the regex engine's speed) or the start of another value
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[{,]')


def loads(text: Any) -> Any:
    """``json.loads(text)`` of one reply, bounded: the length (:data:`MAX_TEXT`) and the number of
    JSON values (:data:`MAX_NODES`) are checked **before** anything is built, so an answer can
    cost the grader about its own size in memory, never a multiple of it. WireError otherwise."""
    if type(text) is not str:
        raise WireError("the kernel's answer is not text")
    if len(text) > MAX_TEXT:
        raise WireError(f"the kernel's answer is longer than {MAX_TEXT // 2 ** 20} MiB")
    # every value is a string, an opening bracket, or follows a comma: a bound on their number
    tokens = sum(1 for _ in itertools.islice(_JSON_TOKEN.finditer(text), MAX_NODES + 1))
    if tokens > MAX_NODES:
        raise WireError(f"the kernel's answer holds more than {MAX_NODES} JSON values")
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise WireError("the kernel's answer is not JSON") from None
    except MemoryError:
        raise WireError("the kernel's answer does not fit in the grader's memory") from None


def decode(text: str, make_handle: Callable[[dict], Any] | None = None) -> Any:
    """The value that ``text`` (one answer of the kernel) describes, as fresh genuine objects.

    Raises :class:`WireError` on anything outside the format. ``make_handle(entry)`` turns a
    handle entry into a proxy; without it a handle is refused.
    """
    return decode_tree(loads(text), make_handle)


def decode_tree(tree: Any, make_handle: Callable[[dict], Any] | None = None) -> Any:
    """:func:`decode` of an answer already parsed as JSON (by a caller that checked its length)."""
    try:
        import torch  # noqa: F401

        torch_ok = True
    except ImportError:  # pragma: no cover
        torch_ok = False
    return _decode(tree, make_handle, _Budget(), 0, torch_ok)


def _decode(node: Any, make_handle, budget: _Budget, depth: int, torch_ok: bool) -> Any:
    if depth > MAX_DEPTH:
        raise WireError(f"the answer is nested more than {MAX_DEPTH} levels deep")
    budget.count()
    kind = type(node)
    if node is None or kind in (bool, int):
        return node
    if kind is float:
        return node
    if kind is str:
        if len(node) > MAX_STRING:
            raise WireError("a string in the answer is too long")
        return node
    if kind is list:
        raise WireError("a bare JSON list is not part of the format")
    if kind is not dict:
        raise WireError(f"unexpected JSON value {kind.__name__}")
    tag = node.get("t")
    if tag in ("tuple", "list"):
        _keys(node, {"t", "v"})
        items = node.get("v")
        if type(items) is not list:
            raise WireError("a sequence's items must be a list")
        values = [_decode(item, make_handle, budget, depth + 1, torch_ok) for item in items]
        return tuple(values) if tag == "tuple" else values
    if tag == "iter":
        _keys(node, {"t", "v"})
        items = node.get("v")
        if type(items) is not list:
            raise WireError("an iterator's items must be a list")
        return iter([_decode(item, make_handle, budget, depth + 1, torch_ok) for item in items])
    if tag == "dict":
        _keys(node, {"t", "v"})
        pairs = node.get("v")
        if type(pairs) is not list or any(type(p) is not list or len(p) != 2 for p in pairs):
            raise WireError("a dict's items must be [key, value] pairs")
        out = {}
        for key, value in pairs:
            key = _decode(key, None, budget, depth + 1, torch_ok)
            if not _hashable_data(key):
                raise WireError("a dict key must be a string, number, None or a tuple of them")
            out[key] = _decode(value, make_handle, budget, depth + 1, torch_ok)
        return out
    if tag == "float":
        _keys(node, {"t", "v"})
        if node.get("v") not in ("nan", "inf", "-inf"):
            raise WireError("a special float must be nan, inf or -inf")
        return float(node["v"])
    if tag in ("nd", "np", "pt"):
        return _array(node, budget, torch_ok)
    if tag == "dtype":
        _keys(node, {"t", "v"})
        name = node.get("v")
        if type(name) is not str or (name not in DTYPES and name not in TORCH_ONLY):
            raise WireError(f"dtype {name!r} is not one the grader accepts")
        import torch

        return getattr(torch, name)
    if tag == "h":
        _keys(node, {"t", "id", "type", "callable"})
        types = node.get("type")
        if type(node.get("id")) is not int or type(types) is not list or len(types) > 64 \
                or any(type(t) is not str or len(t) > 300 for t in types) or type(node.get("callable")) is not bool:
            raise WireError("a malformed handle")
        if make_handle is None:
            raise WireError("a kernel object arrived where only data is allowed")
        return make_handle(node)
    raise WireError(f"unknown entry {tag!r}")


def _hashable_data(key: Any) -> bool:
    if key is None or type(key) in (bool, int, float, str):
        return True
    return type(key) is tuple and all(_hashable_data(k) for k in key)



FRAME_HEADER = 8  # bytes of a frame's length, big-endian


def read_frame(sock: Any, limit: int) -> bytes | None:
    """One frame from ``sock``: its bytes, or None at the end of the stream; over ``limit`` bytes: WireError."""
    header = _read_exactly(sock, FRAME_HEADER)
    if header is None:
        return None
    size = int.from_bytes(header, "big")
    if size > limit:
        raise WireError(f"a frame of {size} bytes is over the limit of {limit}")
    return _read_exactly(sock, size)


def _read_exactly(sock: Any, size: int) -> bytes | None:
    parts, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            return None
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def write_frame(sock: Any, data: bytes) -> None:
    sock.sendall(len(data).to_bytes(FRAME_HEADER, "big") + data)
