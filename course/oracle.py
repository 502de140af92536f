"""The wire between a grading kernel and the grader's oracle, and the kernel's end of it.

While nbgrader autogrades a chapter under the oracle (``instructor.oracle``), graded test
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
  state (at most 2**40 draws) and accepts only an exact match (``instructor.oracle._moved_on``),
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

Nothing here is a reference solution: it ships to students with the rest of ``course``.
"""

from __future__ import annotations

import base64
import builtins
import io
import itertools
import json
import math
import re
import sys
import types
from typing import Any, Callable

__all__ = ["WireError", "encode", "decode", "serve", "grad_mode", "parameter_gradients", "input_gradients",
           "parameter_and_input_gradients", "draw_parameters", "module_tensors", "read_tensors", "read_state", "load_tensors", "set_training", "is_remote", "call_keeping_arguments", "fresh", "Fresh"]

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


# ---------------------------------------------------------------- the kernel's end


_handles: dict[int, Any] = {}
_handle_ids: dict[int, int] = {}
_generators: list = []  # the generators built from the arguments of the request being answered


def _generator(state: Any) -> Any:
    import numpy as np

    if type(state) is not dict or type(state.get("bit_generator")) is not str \
            or not isinstance(getattr(np.random, state["bit_generator"], None), type):
        raise WireError("a generator's state names no NumPy bit generator")
    bit_generator = getattr(np.random, state["bit_generator"])()
    bit_generator.state = state
    generator = np.random.Generator(bit_generator)
    _generators.append(generator)
    return generator


def _handle(value: Any) -> dict:
    key = id(value)
    if key not in _handle_ids or _handles.get(_handle_ids[key]) is not value:
        _handle_ids[key] = len(_handles) + 1
        _handles[_handle_ids[key]] = value
    mro = [_class_name(k) for k in type(value).__mro__[:64]]
    return {"t": "h", "id": _handle_ids[key], "type": mro, "callable": callable(value)}


_CLASSES: dict | None = None  # id -> (class, name) of the library's classes, captured by listen()


def _genuine_classes() -> dict:
    """The classes of builtins, NumPy and ``torch`` / ``torch.nn`` as they are now (before any
    student code ran), by identity: a handle names a class of theirs only if it is one of these."""
    found: dict[int, tuple] = {}
    for name, module in list(sys.modules.items()):
        if module is None or not (name in ("builtins", "numpy", "torch") or name.startswith(("torch.nn.", "numpy.random"))):
            continue
        for value in list(vars(module).values()):
            if isinstance(value, type):
                found.setdefault(id(value), (value, f"{value.__module__}.{value.__qualname__}"))
    return found


def _class_name(cls: type) -> str:
    """How a handle names ``cls``: a library class by its genuine name; a class of the kernel's
    ``__main__`` by its name there; any other class with a ``~`` in front, so that a class that
    calls itself ``torch.nn.modules.normalization.LayerNorm`` is never taken for it."""
    name = f"{cls.__module__}.{cls.__qualname__}"
    if _CLASSES is None:  # outside a grading kernel: names as they are
        return name
    known = _CLASSES.get(id(cls))
    if known is not None and known[0] is cls:
        return known[1]
    return name if cls.__module__ == "__main__" else "~" + name


def _value(node: Any) -> Any:
    """An argument from the grader: data, or a handle to one of our objects."""
    if type(node) is dict and node.get("t") == "h":
        return _handles[node["id"]]
    if type(node) is dict and node.get("t") == "cb":  # an instructor object: it stays in the grader
        return _instructor(node)
    if type(node) is dict and node.get("t") == "generator":  # a random generator: its state, by value
        return _generator_from(node)
    if type(node) is dict and node.get("t") in ("tuple", "list", "iter"):
        values = [_value(v) for v in node["v"]]
        return tuple(values) if node["t"] == "tuple" else values if node["t"] == "list" else iter(values)
    if type(node) is dict and node.get("t") == "dict":
        return {_value(k): _value(v) for k, v in node["v"]}
    if type(node) is dict and node.get("t") == "rng":
        return _generator(_value(node["v"]))
    value = _decode(node, None, _Budget(), 0, True)
    if type(node) is dict and node.get("grad"):
        value.requires_grad_(True)
    return value


def _namespace() -> dict:
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except ImportError:  # pragma: no cover
        shell = None
    if shell is not None:
        return shell.user_ns
    import __main__

    return vars(__main__)


def grad_mode() -> dict | None:
    """The autograd mode here (``{"grad": bool, "inference": bool}``), None without torch loaded.

    The grader sends it with every request: ``with torch.no_grad(): out = student_fn(x)`` in a
    test runs the student's call in the kernel without gradients too, as in JupyterLab."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    return {"grad": bool(torch.is_grad_enabled()), "inference": bool(torch.is_inference_mode_enabled())}


def _in_mode(mode: Any, call: Callable[[], Any]) -> Any:
    """``call()`` under the grader's autograd ``mode``; the kernel's own mode is back afterwards,
    whatever the call did to it (a ``torch.set_grad_enabled(False)`` it never undid included)."""
    torch = sys.modules.get("torch")
    if torch is None or type(mode) is not dict:
        return call()
    saved = torch.is_grad_enabled()
    try:
        with torch.inference_mode(mode.get("inference") is True):
            torch.set_grad_enabled(mode.get("grad") is not False)
            return call()
    finally:
        torch.set_grad_enabled(saved)


def _run(request: dict, mode: Any = None) -> Any:
    op = request["op"]
    mode = request.get("mode", mode)
    if op == "batch":  # every item under the batch's mode, unless it carries its own
        return [_answer({"mode": mode, **item}) for item in request["v"]]
    if op == "name":
        namespace = _namespace()
        if request["name"] not in namespace:
            raise NameError(f"name {request['name']!r} is not defined")
        return namespace[request["name"]]
    target = _handles[request["h"]] if "h" in request else None
    args = [_value(a) for a in request.get("args", [])]
    kwargs = {k: _value(v) for k, v in request.get("kwargs", {}).items()}
    return _in_mode(mode, lambda: _operate(op, request, target, args, kwargs))


def _operate(op: str, request: dict, target: Any, args: list, kwargs: dict) -> Any:
    if op == "call":  # with "name": the method call target.name(*args, **kwargs), in one round trip
        if "name" in request:
            target = getattr(target, request["name"])
        return target(*args, **kwargs)
    if op == "getattr":
        return getattr(target, request["name"])
    if op == "setattr":
        setattr(target, request["name"], args[0])
        return None
    if op == "getitem":
        return target[args[0]]
    if op == "list":
        return list(target)
    if op == "len":
        return len(target)
    if op in ("str", "repr"):
        return (str if op == "str" else repr)(target)
    if op == "probe":
        return PROBES[request["name"]](*args, **kwargs)
    raise ValueError(f"unknown request {op!r}")


def _torch_generator(value: Any) -> bool:
    """A generator of PyTorch's own code (``named_parameters()``): finite, and listed at once."""
    torch = sys.modules.get("torch")
    if torch is None or type(value) is not types.GeneratorType:
        return False
    import os

    return value.gi_code.co_filename.startswith(os.path.dirname(torch.__file__) + os.sep)


def _answer(request: dict) -> dict:
    outer = _generators[:]
    _generators.clear()
    try:
        value = _run(request)
        if _torch_generator(value):
            answer = {"ok": {"t": "iter", "v": [encode(item, _handle, 1) for item in value]}}
        else:
            answer = {"ok": encode(value, _handle)}
        if _generators:  # where the call left the generators it was given
            answer["rng"] = [encode(g.bit_generator.state) for g in _generators]
        return answer
    except BaseException as error:  # the student's exception, a SystemExit, an interrupt: reported
        name = type(error).__name__
        try:
            text = str(error)[:4000]
        except BaseException:
            text = ""
        return {"error": [name if type(name) is str else "Exception", text]}
    finally:
        _generators[:] = outer


class _Printed(io.TextIOBase):
    """What the student's code prints while it answers a request (its first MAX_PRINTED characters)."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.cut = 0

    def writable(self) -> bool:
        return True

    def write(self, text: Any) -> int:
        text = str(text)
        room = max(MAX_PRINTED - self.size, 0)
        self.parts.append(text[:room])
        self.size += min(len(text), room)
        self.cut += max(len(text) - room, 0)
        return len(text)

    def text(self) -> str:
        cut = f"\n... [{self.cut} characters cut by the grader]\n" if self.cut else ""
        return "".join(self.parts) + cut


def serve(request: str) -> str:
    """The kernel's answer to one request of the grader (JSON in, JSON out).

    What the student's code prints meanwhile (stdout and stderr, bounded) travels with the
    answer (``"out"``): the grader shows it in the test cell's output. The reply echoes the
    request's ``"id"``. It is written by this module's functions **as they were when it was
    imported** (:data:`_SEALED`, before any student code ran): a student call that rebinds
    ``course.oracle.encode`` (or ``_handle``, ``PROBES``, ``json.dumps``) does not shape it.
    """
    return _SEALED["_serve"](request)


def _serve(request: str) -> str:
    printed = _Printed()
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = printed
    try:
        parsed = json.loads(request)
        request_id = parsed.get("id") if type(parsed) is dict else None  # read before the student's call
        answer = _answer(parsed)
    finally:
        sys.stdout, sys.stderr = saved
    if printed.size or printed.cut:
        answer["out"] = printed.text()
    if type(request_id) is str:
        answer["id"] = request_id
    return json.dumps(answer, separators=(",", ":"))


REQUEST, REPLY, LISTENING = "course_oracle_request", "course_oracle_reply", "course-oracle: listening"
# the socket channel: SERVE ({"path": ...}) makes the kernel answer requests that arrive on a Unix
# socket of the grader's (length-prefixed frames) until the frame END; then SERVED on the shell
SERVE, SERVED, END = "course_oracle_serve", "course_oracle_served", b""
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


# the socket of the grader cell being answered, and the server's answer function (see listen):
# an Instructor stand-in writes its requests on it, and answers the grader's nested requests
_LINE: list = []
_REPLY = '{"cbr":'  # how the grader's answer to a stand-in's request starts (a request of its own never does)


def _instructor(node: dict) -> Any:
    if type(node.get("id")) is not int or type(node.get("callable")) is not bool or type(node.get("name", "")) is not str:
        raise WireError("a malformed instructor object")
    made = object.__new__(Instructor)
    for slot, value in zip(Instructor.__slots__, (node["id"], node.get("name") or "object", node["callable"]), strict=True):
        object.__setattr__(made, slot, value)
    return made


def _ask_grader(target: Any, op: str, args: tuple = (), kwargs: dict | None = None, name: str | None = None) -> Any:
    """One request of a stand-in to the grader, while the grader waits for the student's call."""
    if not _LINE:
        raise RuntimeError("the tests' objects run in the grader, which answers them only while it waits for "
                           "your code on the oracle's socket channel (this kernel has none)")
    sock, served = _LINE[-1]
    message = {"cb": object.__getattribute__(target, "_cb_id"), "op": op, "mode": grad_mode()}
    if name is not None:
        message["name"] = name
    if args or kwargs:
        message["args"] = [encode(a) for a in args]  # data only: a kernel object cannot reach the grader
        message["kwargs"] = {str(k): encode(v) for k, v in (kwargs or {}).items()}
    write_frame(sock, json.dumps(message, separators=(",", ":")).encode())
    while True:
        frame = read_frame(sock, MAX_TEXT)
        if frame is None:
            raise RuntimeError("the grader closed the oracle's socket")
        text = frame.decode("utf-8", "replace")
        if not text.startswith(_REPLY):  # the grader's own request, made while it answers ours: answered first
            write_frame(sock, served(text).encode("utf-8", "replace"))
            continue
        reply = json.loads(text)["cbr"]
        if "error" in reply:
            kind, words = reply["error"]
            error = getattr(builtins, kind, None)
            if not (isinstance(error, type) and issubclass(error, Exception)):
                error, words = RuntimeError, f"{kind}: {words}"
            raise error(words)
        return _value(reply["ok"])


class Instructor:
    """The kernel's stand-in for an instructor function or object of the tests (:func:`fresh`).

    The object itself stays in the grader: calling the stand-in, reading one of its attributes
    (``block.qkv``, ``block.n_heads``), an item or its length asks the grader, which runs its
    own copy on the arguments (data only) and answers with data, or with another stand-in for
    a part of the object (a submodule, a method). Nothing of the object's code, closure or
    globals is here to read or to patch; what a student's code does to the stand-in reaches
    only that stand-in's own copy in the grader, made afresh for every call of the test.
    """

    __slots__ = ("_cb_id", "_cb_name", "_cb_callable")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _ask_grader(self, "call", args, kwargs)

    def __getattr__(self, name: str) -> Any:
        if name == "__name__":
            return object.__getattribute__(self, "_cb_name")
        if name.startswith("_"):
            raise AttributeError(f"the tests' {object.__getattribute__(self, '_cb_name')} runs in the grader: "
                                 f"its private attribute {name!r} is not readable here")
        return _ask_grader(self, "getattr", name=name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"the tests' {object.__getattribute__(self, '_cb_name')} runs in the grader and is "
                             "read-only here: keep your own state in your own objects")

    def __getitem__(self, key: Any) -> Any:
        return _ask_grader(self, "getitem", (key,))

    def __len__(self) -> int:
        return _ask_grader(self, "len")

    def __iter__(self):
        return iter(_ask_grader(self, "list"))

    def __repr__(self) -> str:
        return f"<the tests' {object.__getattribute__(self, '_cb_name')} (it runs in the grader)>"


def listen() -> str:
    """Answer the grader's requests as messages of their own on the kernel's shell channel.

    ``course.integrity.install()`` calls this when the kernel starts. Two handlers:

    * ``course_oracle_request`` (``{"request": text}``), answered by :func:`serve` in a
      ``course_oracle_reply`` (``{"answer": text}``): no cell machinery, about half the time
      of an execute request;
    * ``course_oracle_serve`` (``{"path": ...}``): connect to the grader's Unix socket at
      ``path`` (once; an empty path keeps the connection) and answer the frames that arrive
      there until an empty one, then reply ``course_oracle_served`` (``{"status": "done"}``).
      A round trip then costs a tenth of a shell message's; the grader checks the answers
      exactly as strictly.
    """
    try:
        from IPython import get_ipython

        kernel = getattr(get_ipython(), "kernel", None)
    except ImportError:  # pragma: no cover
        kernel = None
    if kernel is None or not hasattr(kernel, "shell_handlers"):
        return "no kernel"
    if getattr(kernel.shell_handlers.get(REQUEST), "course_oracle", False):
        return LISTENING  # already (course.integrity.install() listens before it snapshots the kernel)

    # The functions of this module as they are now, before any student code ran: a cell that
    # replaces them (course.* made no-ops) must not leave the grader without answers. They are
    # put back before every request; module state (counters, handles) is left as it is.
    module = sys.modules[__name__]
    genuine = {name: value for name, value in vars(module).items()
               if callable(value) and getattr(value, "__module__", None) == __name__}

    probes = dict(PROBES)
    # torch's own functions for reading and writing a module's tensors (see _slots), captured
    # now, before any student code ran; the sealed probes and this module read the same ones
    global _GENUINE, _CLASSES, _RAW
    _GENUINE = _SEALED["_GENUINE"] = _torch_functions()
    _RAW = None
    _RAW = _SEALED["_RAW"] = _raw()
    _CLASSES = _SEALED["_CLASSES"] = _genuine_classes()
    # what answers: the sealed copies made at import (see _seal); never this module's names,
    # which a student call may rebind between reading a request and writing its reply
    sealed = _SEALED
    sealed_serve, read, write, dumps = sealed["_serve"], sealed["read_frame"], sealed["write_frame"], sealed["json"].dumps
    line = sealed["_LINE"]

    def served(request: Any) -> str:
        """The sealed serve()'s answer; this module's functions and the probes are put back first
        (for whatever else reads them)."""
        for name, value in genuine.items():
            if vars(module).get(name) is not value:
                setattr(module, name, value)
        PROBES.clear()
        PROBES.update(probes)
        try:
            return sealed_serve(request) if type(request) is str else dumps({"error": ["TypeError", "not text"]})
        except BaseException as error:  # an interrupt while the student's code ran: reported
            return dumps({"error": [type(error).__name__, ""]})

    def answer(stream: Any, ident: Any, parent: dict) -> None:
        try:
            text = served(parent["content"]["request"])
        except BaseException as error:  # a message without a request
            text = dumps({"error": [type(error).__name__, ""]})
        kernel.session.send(stream, REPLY, {"answer": text}, parent, ident)

    connection: list = []  # the grader's socket, once connected (one per kernel)

    def serve_socket(stream: Any, ident: Any, parent: dict) -> None:
        """Answer frames on the grader's socket until END: a round trip without the shell's machinery."""
        import socket

        status = "done"
        try:
            path = parent["content"].get("path")
            if path or not connection:  # a path: the grader listens anew (a new link), connect to it
                for old in connection:
                    old.close()
                connection.clear()
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.connect(path)
                connection.append(sock)
            sock = connection[0]
            line.append((sock, served))
            while True:
                try:
                    frame = read(sock, MAX_TEXT)
                except KeyboardInterrupt:  # an interrupt meant for a request that had just been answered
                    continue
                if frame is None or frame == END:
                    break
                write(sock, served(frame.decode("utf-8", "replace")).encode("utf-8", "replace"))
        except BaseException as error:  # no socket: the grader goes on with shell requests
            status = type(error).__name__
            connection.clear()
        finally:
            line.clear()
        kernel.session.send(stream, SERVED, {"status": status}, parent, ident)

    answer.course_oracle = serve_socket.course_oracle = True
    kernel.shell_handlers[REQUEST] = answer
    kernel.shell_handlers[SERVE] = serve_socket
    return LISTENING


# ---------------------------------------------------------------- probes: what only the kernel holds


def is_remote(obj: Any) -> bool:
    """True for a proxy of a kernel object (only ever in the grader's process)."""
    return getattr(type(obj), "_oracle_proxy", False) is True


def _probe(name: str, *args: Any, **kwargs: Any) -> Any:
    """Run probe ``name`` where ``args[0]`` lives: in the kernel for a proxy, here otherwise."""
    target = args[0]
    if is_remote(target):
        return type(target)._oracle_probe(target, name, *args, **kwargs)
    return PROBES[name](*args, **kwargs)


class _GradientsOn:
    """A probe that runs a backward pass does it with gradients on (and inference mode off),
    whatever the caller's mode: ``parameter_gradients`` in a test's ``torch.no_grad()`` block works."""

    def __enter__(self) -> None:
        import torch

        self.modes = (torch.inference_mode(False), torch.enable_grad())
        for mode in self.modes:
            mode.__enter__()

    def __exit__(self, *exc: Any) -> None:
        for mode in reversed(self.modes):
            mode.__exit__(*exc)


def _gradients(module: Any, inputs: Any, direction: Any, kwargs: dict | None = None) -> dict:
    G = _genuine()
    held = [(name, t) for name, kind, t, _ in _slots(module) if kind == "parameter"]
    with _GradientsOn():
        for _, tensor in held:  # not module.zero_grad(): the module's own method
            G.grad.__set__(tensor, None)
        inputs = inputs if isinstance(inputs, tuple) else (inputs,)
        _backward(module(*inputs, **(kwargs or {})), direction)
    return {name: _gradient_of(t) for name, t in held}


def _backward(output: Any, direction: Any) -> None:
    """``(output * direction).sum().backward()`` (``output.sum()`` without a direction), with
    torch's own functions; a tuple's first item is the output."""
    G = _genuine()
    output = _first(output)
    if not isinstance(output, G.Tensor) or not G.requires_grad.__get__(output):
        raise TypeError(f"the output is a {type(output).__name__} that no gradient flows through: keep it a "
                        "tensor computed from the inputs (no .item(), no float(), no .detach())")
    with G.plain():
        G.backward(G.sum(output if direction is None else G.mul(output, direction)))


def parameter_gradients(module: Any, inputs: Any, direction: Any, **kwargs: Any) -> dict:
    """``{parameter name: gradient or None}`` of ``(module(*inputs) * direction).sum()``.

    The same call works on a real module (in JupyterLab) and on a proxy of the student's
    module in the grader, where the backward pass runs in the kernel and only the gradients
    come back, as data. Each gradient is checked against how the module's output changes when
    its parameter moves a little (a finite difference of the same forward), wherever it runs.
    """
    gradients = _probe("gradients", module, inputs, direction, kwargs)
    _checked_parameter_gradients(module, gradients, inputs, direction, kwargs)
    return gradients


def _leaves(inputs: Any) -> tuple:
    """``inputs`` (one or a tuple) with every floating-point tensor copied into a new leaf that requires grad."""
    import torch

    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    return tuple(torch.Tensor.detach(a).clone().requires_grad_(True)
                 if isinstance(a, torch.Tensor) and (a.is_floating_point() or a.is_complex()) else a for a in inputs)


def _input_gradients(function: Any, inputs: Any, direction: Any = None, kwargs: dict | None = None) -> tuple:
    with _GradientsOn():
        leaves = _leaves(inputs)
        _backward(function(*leaves, **(kwargs or {})), direction)
    return tuple(_gradient_of(leaf) for leaf in leaves)


def input_gradients(function: Any, inputs: Any, direction: Any = None, **kwargs: Any) -> tuple:
    """The gradients of ``(function(*inputs) * direction).sum()`` (``function(*inputs).sum()``
    without a direction) with respect to each input: a tuple with a tensor for every
    floating-point tensor input and ``None`` for the others (masks, integers).

    The inputs are copied into new leaves first, so the caller's tensors keep no gradient. The
    same call works on a real function (in JupyterLab) and on a proxy of the student's
    function in the grader, where the backward pass runs in the kernel and only the gradients
    come back, as data. Each gradient is checked against a finite difference of the same
    function's outputs, as :func:`parameter_gradients` does.
    """
    gradients = _probe("input_gradients", function, inputs, direction, kwargs)
    _checked_input_gradients(function, gradients, inputs, direction, kwargs)
    return gradients


def _is_instance(obj: Any, cls: Any) -> bool:
    return isinstance(obj, cls) is True


def draw_parameters(module: Any, generator: Any) -> dict:
    """Give every trainable floating-point parameter of ``module`` values drawn from ``generator``.

    Tests choose every input, parameters included: the values are drawn where the test runs
    (in the grader, under the oracle) and written into the module's own tensors with
    :func:`load_tensors` (never through the module's methods). Each tensor is uniform in
    ``(-1/sqrt(n), 1/sqrt(n))``, ``n`` its last dimension (PyTorch's default for a Linear
    layer's weight). Returns the ``{name: tensor}`` loaded.
    """
    import torch

    drawn = {}
    for row in module_tensors(module):
        dtype = getattr(torch, str(row["dtype"]), None)
        if row["kind"] == "parameter" and row["requires_grad"] is True and isinstance(dtype, torch.dtype) \
                and dtype.is_floating_point:  # trainable: frozen ones are design
            shape = tuple(int(n) for n in row["shape"])
            bound = 1.0 / math.sqrt(max(shape[-1] if shape else 1, 1))
            uniform = torch.rand(shape, generator=generator, dtype=torch.float64)
            drawn[row["name"]] = ((2 * uniform - 1) * bound).to(dtype)
    load_tensors(module, drawn)
    return drawn


def _arguments(function: Any, *args: Any, **kwargs: Any) -> tuple:
    return function(*args, **kwargs), args


def call_keeping_arguments(function: Any, *args: Any, **kwargs: Any) -> tuple:
    """``(function(*args, **kwargs), args)``: the result, and the arguments as the call left them.

    A test that must see whether a function modified its arguments in place calls it this
    way: in JupyterLab ``args`` are the caller's own objects; under the oracle, where
    arguments travel by value, they are the kernel's copies after the call, sent back as data.
    """
    return _probe("arguments", function, *args, **kwargs)


def _largest_tensor(fn: Any, *args: Any, **kwargs: Any) -> tuple:
    from .tracing import largest_tensor

    result, largest = largest_tensor(fn, *args, **kwargs)
    return result, int(largest.entries), tuple(int(n) for n in largest.shape)


def _parameter_and_input_gradients(module: Any, inputs: Any, direction: Any, kwargs: dict | None = None) -> tuple:
    with _GradientsOn():
        leaves = _leaves(inputs)
        parameters = _gradients(module, leaves, direction, kwargs)
    return parameters, tuple(_gradient_of(x) for x in leaves)


def parameter_and_input_gradients(module: Any, inputs: Any, direction: Any, **kwargs: Any) -> tuple:
    """``(parameter_gradients(...), gradients of the inputs)`` of ``(module(*inputs) * direction).sum()``.

    The second item has one entry per input: its gradient for a floating-point tensor (a copy of
    it is the leaf; the caller's tensor is not touched), else None. Under the oracle both are
    computed in the kernel and come back as data, in one round trip; both are checked against
    finite differences of the module's outputs, as :func:`parameter_gradients` does.
    """
    answer = _probe("parameter_and_input_gradients", module, inputs, direction, kwargs)
    if type(answer) is not tuple or len(answer) != 2:
        raise WireError("the gradients are not a pair")
    _checked_parameter_gradients(module, answer[0], inputs, direction, kwargs)
    _checked_input_gradients(module, answer[1], inputs, direction, kwargs)
    return answer


# ---------------------------------------------------------------- a module's tensors, read and written as they are
#
# A student's module may answer for itself with anything: ``named_parameters()``, ``state_dict()``,
# ``load_state_dict`` (and its hooks), ``zero_grad``, attributes and properties are its own code.
# The functions below never call them: they read the dicts in which torch.nn.Module keeps its
# parameters, buffers and submodules, and write tensors with torch's own copy_, through
# functions captured when the kernel started (listen()), before any student code ran.

_GENUINE: Any = None  # torch's own functions, captured by listen() (None: torch as it is, here)


def _torch_functions() -> Any:
    import torch

    base = torch._C.TensorBase
    return types.SimpleNamespace(
        Module=torch.nn.Module, Parameter=torch.nn.Parameter, Tensor=torch.Tensor,
        get=object.__getattribute__, items=dict.items, detach=base.detach, clone=base.clone,
        copy_=base.copy_, size=base.size, mul=base.mul, sum=base.sum,
        grad=base.__dict__["grad"], dtype=base.__dict__["dtype"], requires_grad=base.__dict__["requires_grad"],
        is_floating_point=base.is_floating_point, plain=torch._C.DisableTorchFunction,
        set_grad=torch._C._set_grad_enabled, grad_on=torch._C.is_grad_enabled, backward=torch.autograd.backward)


def _genuine() -> Any:
    global _GENUINE
    if _GENUINE is None:  # outside a grading kernel (JupyterLab, the grader): torch as it is, captured once
        _GENUINE = _torch_functions()
    return _GENUINE


def _slots(module: Any, aliases: dict | None = None) -> list[tuple[str, str, Any, bool]]:
    """``(name, "parameter" | "buffer", tensor, persistent)`` of every tensor ``module`` holds, in
    the order of ``named_parameters()`` then ``named_buffers()`` (a tensor held twice: its first
    name; ``aliases``, if given, gets ``{id(tensor): [its other names]}``)."""
    G = _genuine()
    if not issubclass(type(module), G.Module):
        raise TypeError(f"a {type(module).__name__} is not a torch.nn.Module")
    parameters: list = []
    buffers: list = []
    seen_tensors: dict = {}  # id -> the other names it is held under
    seen_modules: set = set()

    def walk(prefix: str, part: Any, depth: int) -> None:
        if depth > 64:
            return
        if id(part) in seen_modules:  # a shared module: its tensors get this name too
            shared.append((prefix, part))
            return
        seen_modules.add(id(part))
        held = G.get(part, "__dict__")
        dicts = [held.get(key) for key in ("_parameters", "_buffers", "_modules")]
        if not all(isinstance(d, dict) for d in dicts):
            raise TypeError(f"the module {prefix or 'itself'} does not keep its tensors as torch.nn.Module does")
        skipped = held.get("_non_persistent_buffers_set") or set()
        for (kind, found, wanted), table in zip(
                (("parameter", parameters, G.Parameter), ("buffer", buffers, G.Tensor)), dicts, strict=False):
            for key, tensor in G.items(table):
                if tensor is None:
                    continue
                if type(tensor) is not wanted and not (kind == "buffer" and type(tensor) is G.Parameter):
                    raise TypeError(f"the {kind} {prefix}{key} is a {type(tensor).__name__}: "
                                    f"the grader reads only a plain {wanted.__name__}")
                if id(tensor) not in seen_tensors:
                    seen_tensors[id(tensor)] = []
                    found.append((f"{prefix}{key}", kind, tensor, kind == "parameter" or key not in skipped))
                else:  # a tensor held twice (a module shared by two attributes, tied weights): an alias
                    seen_tensors[id(tensor)].append(f"{prefix}{key}")
        for key, child in G.items(dicts[2]):
            if child is not None:
                if not issubclass(type(child), G.Module):
                    raise TypeError(f"the submodule {prefix}{key} is a {type(child).__name__}, not a torch.nn.Module")
                walk(f"{prefix}{key}.", child, depth + 1)

    shared: list = []
    walk("", module, 0)
    if aliases is not None:
        for prefix, part in shared:  # every tensor of a shared module, under the prefix it is shared at
            for name, _, tensor, _ in _slots(part):
                aliases.setdefault(id(tensor), []).append(f"{prefix}{name}")
        for key, names in seen_tensors.items():
            aliases.setdefault(key, []).extend(names)
    return parameters + buffers


def _tensor_list(module: Any) -> list:
    """``[[name, kind, shape, dtype, requires_grad, persistent], ...]`` of :func:`_slots`, as data."""
    G = _genuine()
    aliases: dict = {}
    return [[name, kind, [int(n) for n in G.size(t)], str(G.dtype.__get__(t)).replace("torch.", ""),
             bool(G.requires_grad.__get__(t)), persistent, aliases.get(id(t), [])]
            for name, kind, t, persistent in _slots(module, aliases)]


def _every_name(module: Any) -> tuple[dict, list]:
    """``({name: tensor} with every name a tensor is held under, aliases included, [first names])``."""
    aliases: dict = {}
    slots = _slots(module, aliases)
    held = {name: tensor for name, _, tensor, _ in slots}
    for _, _, tensor, _ in slots:
        held.update({alias: tensor for alias in aliases.get(id(tensor), [])})
    return held, [name for name, _, _, _ in slots]


def _copy_of(tensor: Any) -> Any:
    G = _genuine()
    with G.plain():
        return G.clone(G.detach(tensor))


def _gradient_of(tensor: Any) -> Any:
    """A copy of ``tensor``'s gradient, read with torch's own accessor; None for none (or a non-tensor)."""
    G = _genuine()
    gradient = G.grad.__get__(tensor) if isinstance(tensor, G.Tensor) else None
    return None if gradient is None else _copy_of(gradient)


def _read(module: Any, names: Any = None) -> dict:
    """``{name: a copy of the tensor}`` for ``names`` (every tensor without them)."""
    held, first_names = _every_name(module)
    wanted = first_names if names is None else list(names)
    missing = [name for name in wanted if name not in held]
    if missing:
        raise KeyError(f"the module holds no tensor named {missing[0]!r}")
    return {name: _copy_of(held[name]) for name in wanted}


def _load(module: Any, values: dict) -> dict:
    """Write ``values`` into the module's own tensors (cast to each one's dtype, the shape as it is);
    returns what the tensors hold afterwards, read back."""
    G = _genuine()
    held, _ = _every_name(module)
    for name, value in values.items():
        if name not in held:
            raise KeyError(f"the module holds no tensor named {name!r}")
        if tuple(G.size(held[name])) != tuple(G.size(value)):
            raise ValueError(f"{name} has shape {tuple(G.size(held[name]))}, the values {tuple(G.size(value))}")
    saved = G.grad_on()
    try:
        G.set_grad(False)
        with G.plain():
            for name, value in values.items():
                G.copy_(held[name], value)
    finally:
        G.set_grad(saved)
    return {name: _copy_of(held[name]) for name in values}


def _outputs_at(module: Any, settings: list, inputs: Any, kwargs: dict | None = None) -> list:
    """The module's first output on ``inputs`` with each of ``settings`` (``{name: values}``)
    loaded in turn; the tensors it held before are back afterwards."""
    names = sorted({name for setting in settings for name in setting})
    before = _read(module, names)
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    outputs = []
    try:
        for setting in settings:
            _load(module, setting)
            outputs.append(_first_output(module(*inputs, **(kwargs or {}))))
    finally:
        _load(module, before)
    return outputs


def _function_at(function: Any, input_sets: list, kwargs: dict | None = None) -> list:
    """``function``'s first output on each tuple of ``input_sets``."""
    return [_first_output(function(*inputs, **(kwargs or {}))) for inputs in input_sets]


def _first(output: Any) -> Any:
    """A module's output: a tuple's first item (``(out, weights)``), else the output itself."""
    return output[0] if isinstance(output, tuple) and output else output


def _first_output(output: Any) -> Any:
    """A copy of the first output, for the grader (a non-tensor as it is)."""
    output = _first(output)
    return _copy_of(output) if isinstance(output, _genuine().Tensor) else output


def module_tensors(module: Any) -> list[dict]:
    """Every parameter and buffer ``module`` holds, as the module itself keeps them (never asking
    its methods): ``[{"name", "kind" ("parameter"/"buffer"), "shape", "dtype", "requires_grad",
    "persistent", "aliases"}, ...]``, in the order of ``named_parameters()`` then ``named_buffers()``;
    a tensor held under several names (a shared module, tied weights) is listed once, its other
    names in ``"aliases"``."""
    listed = _probe("tensors", module)
    keys = ("name", "kind", "shape", "dtype", "requires_grad", "persistent", "aliases")
    if type(listed) not in (list, tuple) or not all(type(row) in (list, tuple) and len(row) == len(keys) for row in listed):
        raise WireError("the list of a module's tensors is not in its format")
    return [dict(zip(keys, (row[0], row[1], tuple(row[2]), row[3], row[4], row[5], tuple(row[6])), strict=True))
            for row in listed]


def read_tensors(module: Any, names: Any = None) -> dict:
    """``{name: tensor}``: copies of what ``module`` holds (every parameter and buffer, or ``names``),
    read from the module's own tensors, never through its methods (``state_dict``)."""
    read = _probe("read", module, None if names is None else [str(n) for n in names])
    if type(read) is not dict:
        raise WireError("the tensors read are not a dict")
    return read


def _set_training(module: Any, mode: Any) -> bool:
    """``training = mode`` on ``module`` and every submodule, written in their own ``__dict__`` as
    ``nn.Module.train`` does, with no method of theirs called; a module that then reads another
    mode (a ``training`` property of its class) fails."""
    G = _genuine()
    mode, seen = mode is True, set()

    def walk(prefix: str, part: Any, depth: int) -> None:
        if depth > 64 or id(part) in seen:
            return
        if not issubclass(type(part), G.Module):
            raise TypeError(f"the submodule {prefix or 'itself'} is a {type(part).__name__}, not a torch.nn.Module")
        seen.add(id(part))
        held = G.get(part, "__dict__")
        children = held.get("_modules")
        if not isinstance(children, dict):
            raise TypeError(f"the module {prefix or 'itself'} does not keep its submodules as torch.nn.Module does")
        held["training"] = mode
        if G.get(part, "training") is not mode:
            raise TypeError(f"the module {prefix or 'itself'} does not keep its mode in `training` as torch.nn.Module "
                            "does")
        for key, child in G.items(children):
            if child is not None:
                walk(f"{prefix}{key}.", child, depth + 1)

    walk("", module, 0)
    return mode


def set_training(module: Any, mode: bool = True) -> None:
    """Train mode (``mode=False``: eval mode) for ``module`` and every submodule, as
    ``module.train(mode)`` sets it, without calling any method of the module: the test chooses the
    mode, and no ``train`` or ``eval`` of the student's can keep another. The same call works on a
    real module and on a proxy of the student's (the probe runs in the kernel)."""
    if _probe("training", module, mode is True) is not (mode is True):
        raise WireError("the kernel did not report the mode it set")


def read_state(module: Any) -> dict:
    """``{name: tensor}`` of what ``state_dict()`` would list (parameters, persistent buffers), read
    from the module's own tensors: a trained model's weights as they are, whatever its methods say."""
    names = [name for row in module_tensors(module) if row["persistent"] is True for name in (row["name"], *row["aliases"])]
    return read_tensors(module, names)


def load_tensors(module: Any, values: dict) -> None:
    """Write ``values`` (``{name: tensor}``) into ``module``'s own parameters and buffers, never
    through its methods (``load_state_dict`` and its hooks), and check, bit for bit, that they
    hold them afterwards (two names for one memory fail).

    A name the module does not hold, or a tensor of another shape, fails with a message that
    names it (the shapes the module has)."""
    import torch

    from .checks import CheckFailed

    rows = module_tensors(module)
    listed = {name: row for row in rows for name in (row["name"], *row["aliases"])}
    last = {}  # a tensor written under several of its names holds the last value written
    for name in values:
        if name in listed:
            last[listed[name]["name"]] = name
    for name, value in values.items():
        if name not in listed:
            known = ", ".join(row["name"] for row in rows) or "none"
            raise CheckFailed(f"the module has no parameter or buffer named {name!r} (it has: {known}): "
                              "name the layers as the text does")
        if tuple(value.shape) != listed[name]["shape"]:
            raise CheckFailed(f"{name} has shape {listed[name]['shape']}, expected {tuple(value.shape)}")
    read_back = _probe("load", module, {str(k): v for k, v in values.items()})
    for name, value in values.items():
        if last[listed[name]["name"]] != name:
            continue
        held = read_back.get(name) if type(read_back) is dict else None
        expected = value.detach().to(getattr(torch, listed[name]["dtype"], value.dtype))
        if not (isinstance(held, torch.Tensor) and held.dtype == expected.dtype and held.shape == expected.shape
                and torch.equal(held.view(-1).view(torch.uint8) if held.dtype.is_floating_point else held,
                                expected.view(-1).view(torch.uint8) if expected.dtype.is_floating_point else expected)):
            raise CheckFailed(f"after loading, {name} holds other values than were written: does it share "
                              "memory with another parameter (one tensor registered twice, or a view of another)?")


# The gradients a probe reports are credited only if they belong to the forward that was graded:
# along two directions for each tensor (the reported gradient's own, and a random one), the
# change of (output * direction).sum() over a small step, computed from the student's own
# outputs, must match what the gradient predicts. A straight-through sum (y.detach() + r -
# r.detach()), a hook that rescales a gradient, or a graph built beside the output fails.
# (step, rtol) by dtype: a step of ``step * max(1, |tensor|)``; ReLU's kinks and float32 rounding
# keep an honest module within a few tenths of rtol (measured on chapters 04, 05, 06 and 09)
STEPS = {"float64": (1e-4, 1e-2), "float32": (1e-3, 5e-2), "bfloat16": (1e-2, 2e-1), "float16": (1e-2, 2e-1)}
# the rounding of (output * direction).sum() in an output's dtype, per unit of |direction|
ROUNDING = {"float64": 1e-13, "float32": 2e-5, "bfloat16": 1e-1, "float16": 1e-2}


def _steps(points: dict, gradients: dict) -> tuple[list, list]:
    """``(settings, checks)``: the points to evaluate (two per direction) and what each pair checks."""
    import torch

    generator = torch.Generator().manual_seed(20261202)  # the grader's own: the test's generators move on as in Lab
    settings, checks = [], []
    for name, gradient in gradients.items():
        base = points.get(name)
        if not isinstance(gradient, torch.Tensor) or not isinstance(base, torch.Tensor) \
                or not base.is_floating_point() or base.numel() == 0:
            continue
        step, rtol = STEPS.get(str(base.dtype).replace("torch.", ""), STEPS["float32"])
        grad64, base64_ = gradient.detach().double(), base.detach().double()
        size = step * max(1.0, float(base64_.norm()))
        directions = [torch.randn(base.shape, generator=generator, dtype=torch.float64)]
        if float(grad64.norm()) > 0:
            directions.insert(0, grad64)
        for direction in directions:
            direction = direction / direction.norm().clamp_min(1e-300)
            plus, minus = (base64_ + size * direction).to(base.dtype), (base64_ - size * direction).to(base.dtype)
            settings += [{name: plus}, {name: minus}]
            checks.append((name, plus.double() - minus.double(), rtol * 2 * size * float(grad64.norm()), rtol))
    return settings, checks


def _check_differences(what: str, gradients: dict, checks: list, outputs: list, direction: Any) -> None:
    import torch

    from .checks import CheckFailed

    weight = None if direction is None else torch.as_tensor(direction).detach().double()
    for index, (name, moved, scale, rtol) in enumerate(checks):
        rounding = ROUNDING.get(str(outputs[2 * index].dtype).replace("torch.", ""), ROUNDING["float32"]) \
            if isinstance(outputs[2 * index], torch.Tensor) else 0.0
        values = []
        for output in outputs[2 * index: 2 * index + 2]:
            if not isinstance(output, torch.Tensor) or not (output.is_floating_point() or output.is_complex()):
                raise CheckFailed(f"{what} returned a {type(output).__name__} when the grader moved {name} a little: "
                                  "it should return the same kind of tensor for any values")
            output = output.detach().double()
            values.append((output if weight is None else output * weight).sum())
        observed = float(values[0] - values[1])
        predicted = float((gradients[name].detach().double() * moved).sum())
        floor = rounding * (float(weight.abs().sum()) if weight is not None else outputs[2 * index].numel())
        tolerance = rtol * max(abs(observed), abs(predicted)) + scale + floor
        if not abs(observed - predicted) <= tolerance:
            raise CheckFailed(f"the gradient of {name} does not belong to {what}'s output: moving {name} a little "
                              "changes the output otherwise than that gradient says. Is part of the computation "
                              "detached (.detach(), .data, torch.no_grad()) and added back, or a hook changing "
                              "gradients?")


def _checked_parameter_gradients(module: Any, gradients: Any, inputs: Any, direction: Any, kwargs: dict) -> None:
    if type(gradients) is not dict:
        raise WireError("the gradients are not a dict")
    points = read_tensors(module, [name for name, g in gradients.items() if g is not None])
    settings, checks = _steps(points, gradients)
    if settings:
        outputs = _probe("outputs_at", module, settings, inputs, kwargs)
        _check_differences(_name_of(module), gradients, checks, list(outputs), direction)


def _checked_input_gradients(function: Any, gradients: Any, inputs: Any, direction: Any, kwargs: dict) -> None:
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    if type(gradients) is not tuple or len(gradients) != len(inputs):
        raise WireError("the input gradients are not one entry per input")
    names = [f"input {i + 1}" for i in range(len(inputs))]
    named = dict(zip(names, gradients, strict=True))
    settings, checks = _steps(dict(zip(names, inputs, strict=True)), named)
    if settings:
        input_sets = [tuple(setting.get(name, x) for name, x in zip(names, inputs, strict=True)) for setting in settings]
        outputs = _probe("function_at", function, input_sets, kwargs)
        _check_differences(_name_of(function), named, checks, list(outputs), direction)


def _name_of(obj: Any) -> str:
    name = getattr(obj, "__name__", None) if not is_remote(obj) else None
    if not isinstance(name, str):
        name = type(obj).__name__
    return name


PROBES: dict[str, Callable[..., Any]] = {"gradients": _gradients, "arguments": _arguments,
                                       "largest_tensor": _largest_tensor, "input_gradients": _input_gradients,
                                       "parameter_and_input_gradients": _parameter_and_input_gradients,
                                       "isinstance": _is_instance, "tensors": _tensor_list, "read": _read,
                                       "load": _load, "outputs_at": _outputs_at, "function_at": _function_at,
                                       "training": _set_training}


# ---------------------------------------------------------------- instructor objects (they run in the grader)

_GRADER_SIDE = False  # set by the grader's oracle (instructor.oracle) while it grades a chapter


class Fresh:
    """An instructor function or object that a student function receives, under the oracle.

    Arguments travel by value only, and a function is not a value: the instructor's object
    **stays in the grader**. Sent to a student function, the marker becomes a stand-in in
    the kernel (:class:`Instructor`) whose every use is a request back to the grader, which
    answers from a copy of the object made for that call (so what the student's code does to
    it reaches neither the test's copy nor another call). In the grader the marker behaves
    as the grader's own object (``marker(...)``, ``marker.attr``), which the tests' references
    use: nothing the student's side computes is read back.
    """

    __slots__ = ("local", "_factory")

    def __init__(self, factory: Any, args: tuple = (), kwargs: dict | None = None, instance: bool = False) -> None:
        self._factory = factory
        self.local = factory(*args, **dict(kwargs or {})) if instance else factory

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.local(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(self.local, name)
        if self.local is self._factory:  # a function or class: its attributes as they are
            return value
        if _is_module(value):  # a part of the object (``lm.block``): a marker too
            return Fresh(value)
        if callable(value) and getattr(value, "__self__", None) is self.local:
            return _KeepMarker(self, value)  # ``.double()``, ``.eval()`` return the marker, not the grader's copy
        return value

    def __repr__(self) -> str:
        return f"<the tests' {_name_of(self.local)} (it runs in the grader)>"

    def copy_to_send(self) -> Any:
        """The object a student's call gets (through its stand-in): a copy of the grader's, made now."""
        import copy

        try:
            return copy.deepcopy(self.local)
        except Exception as error:
            raise WireError(f"the tests' {_name_of(self.local)} cannot be handed to the student's code "
                            f"({type(error).__name__}: a deep copy of it failed)") from None


class _KeepMarker:
    """A method of a marker's object: a result that is the object itself is the marker again."""

    __slots__ = ("_marker", "_method")

    def __init__(self, marker: Fresh, method: Any) -> None:
        self._marker, self._method = marker, method

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        result = self._method(*args, **kwargs)
        return self._marker if result is self._marker.local else result


def _is_module(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.nn.Module)


def fresh(factory: Any, *args: Any, **kwargs: Any) -> Any:
    """An instructor function (``fresh(toy_next_probs)``) or object (``fresh(TableModel, table)``,
    built as ``TableModel(table)``) for a student function to receive.

    In JupyterLab, or wherever tests run in the kernel, this is simply the function or the new
    object. In the grader (under the oracle) it is a :class:`Fresh` marker: sent to a student
    function it stays in the grader, and the kernel gets a stand-in whose uses are requests
    back to it; used by the test itself it is the grader's own object.
    """
    instance = bool(args or kwargs) or isinstance(factory, type)
    if not _GRADER_SIDE:
        return factory(*args, **kwargs) if instance else factory
    return Fresh(factory, args, kwargs, instance)


def generator_entry(generator: Any) -> dict:
    """``{"t": "generator", "state": ...}``: a ``torch.Generator`` sent by value (its state), so a
    student function called with ``generator=`` draws what the test's generator would draw."""
    import torch

    if type(generator) is not torch.Generator or generator.device.type != "cpu":
        raise WireError("only a CPU torch.Generator can be sent to the kernel")
    return {"t": "generator", "state": encode(generator.get_state())}


def _generator_from(node: dict) -> Any:
    import torch

    generator = torch.Generator()
    generator.set_state(_value(node["state"]))
    return generator


def _seal() -> dict:
    """This module's namespace as it is at import, before any student code runs, for the server.

    Every function of the module is copied with this snapshot as its globals, so the copies
    call each other (``_serve`` -> ``_answer`` -> ``encode`` -> ``_array_entry``), read
    :data:`PROBES` and ``json.dumps`` as they were at import, whatever a student call rebinds
    in ``course.oracle`` or in ``json``, ``base64``, ``math`` meanwhile. Module state (the
    handles, the generators of a request) is shared. What stays the student's to change is
    what their code computes with NumPy and PyTorch, which is their answer anyway.
    """
    import types as stdlib_types

    sealed = dict(globals())
    for name, functions in {"json": ("dumps", "loads"), "base64": ("b64encode", "b64decode"),
                            "math": ("isfinite", "prod", "sqrt"),
                            "types": ("GeneratorType", "ModuleType", "FunctionType", "SimpleNamespace")}.items():
        sealed[name] = stdlib_types.SimpleNamespace(**{f: getattr(sys.modules[name], f) for f in functions})
    for name, value in list(sealed.items()):
        if type(value) is stdlib_types.FunctionType and value.__module__ == __name__:
            copy = stdlib_types.FunctionType(value.__code__, sealed, value.__name__, value.__defaults__,
                                             value.__closure__)
            copy.__kwdefaults__, copy.__qualname__ = value.__kwdefaults__, value.__qualname__
            sealed[name] = copy
    sealed["PROBES"] = {key: sealed[probe.__name__] for key, probe in PROBES.items()}
    return sealed


_SEALED = _seal()
