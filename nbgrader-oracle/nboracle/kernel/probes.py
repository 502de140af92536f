"""Probes: what a test asks of the student's objects that only the kernel holds (gradients, tensors).

Each public function works on a real object (in JupyterLab, where tests run in the kernel)
and on a proxy of the student's object in the grader, where the work runs in the kernel
(``PROBES``, answered by :mod:`nboracle.kernel.server`) and only data comes back. What a
probe reports is checked where it can be (gradients against finite differences of the
student's own outputs; tensors read back bit for bit); a module's tensors are read from the
dicts torch.nn.Module keeps them in, never through the module's own methods.

``largest_tensor(fn, *args)`` calls ``fn`` and reports the largest tensor produced by any
ATen operation inside it, including the intermediates of composite calls such as
``torch.einsum`` (measured by the storage behind each tensor, so a broadcast view of a small
tensor counts as small): a test tells a function that builds a large intermediate from one
that never does, without reading its code.
"""

from __future__ import annotations

import math
import os
import sys
import types
from dataclasses import dataclass
from typing import Any, Callable

from .wire import WireError

__all__ = ["CheckFailed", "is_remote", "parameter_gradients", "input_gradients", "parameter_and_input_gradients",
           "draw_parameters", "read_parameters", "call_keeping_arguments", "module_tensors", "read_tensors",
           "read_state", "load_tensors", "set_training", "largest_tensor", "Largest"]


class CheckFailed(AssertionError):
    """A probe's check failed (a name the module does not hold, gradients that do not belong to the
    output): an ``AssertionError`` (the test scores zero) shown as its message only, never as a
    traceback into this package (IPython asks for ``_render_traceback_`` first)."""

    def _render_traceback_(self) -> list[str]:
        return [f"\x1b[0;31m{type(self).__name__}\x1b[0m: {self}"]


def is_remote(obj: Any) -> bool:
    """True for a proxy of a kernel object (only ever in the grader's process)."""
    return getattr(type(obj), "_oracle_proxy", False) is True


def _probe(name: str, *args: Any, **kwargs: Any) -> Any:
    """Run probe ``name`` where ``args[0]`` lives: in the kernel for a proxy, here otherwise."""
    target = args[0]
    if is_remote(target):
        return type(target)._oracle_probe(target, name, *args, **kwargs)
    if name in GRADIENT_PROBES and refused_here():
        raise CheckFailed(f"{_GRADIENT_NAMES[name]} computes gradients for the tests, which run in the grader: "
                          "a grading kernel computes none for a notebook's own code (write the computation "
                          "the exercise asks for yourself)")
    return PROBES[name](*args, **kwargs)


# the probes that compute gradients (a Jacobian, a vector-Jacobian product: what an exercise may ask a
# student to derive), by the public function that asks for them
_GRADIENT_NAMES = {"gradients": "parameter_gradients", "input_gradients": "input_gradients",
                   "parameter_and_input_gradients": "parameter_and_input_gradients"}
GRADIENT_PROBES = frozenset(_GRADIENT_NAMES)
# the server's function that runs every request of the grader (nboracle.kernel.server._serve, or its sealed copy):
# while a frame of it is on a thread's stack, this process is serving the grader
_SERVING = ("_serve", os.path.join("nboracle", "kernel", "server.py"))
_current_frames = sys._current_frames


def refused_here() -> bool:
    """True while this process serves a request of the grader: a frame of the server's ``_serve`` is on the
    stack of one of its threads (every graded call of a student's function or method runs inside it). No test
    runs in a kernel then, so only a student's own code could ask this package for gradients of its objects
    (``input_gradients(softmax, x, e_i)`` inside the graded ``softmax_jacobian``: a Jacobian handed in as
    theirs): the public gradient functions refuse it. The grader's request decides, not a mark the kernel
    keeps: nothing a student's cell sets (a handler's attribute, a fresh ``import nboracle``) takes the frame
    off the stack while the grader's request runs. In JupyterLab, with the tests in the kernel
    (``COURSE_ORACLE=off``), in a kernel's own cells and in the grader (a proxy's probe runs in the server's
    sealed copy, never through here) no request is being served, and they work as documented."""
    try:
        raise RuntimeError
    except RuntimeError as here:  # this thread's frames, without asking sys
        frames = [here.__traceback__.tb_frame]
    try:
        frames += list(_current_frames().values())  # the other threads' (a worker a graded call waits for)
    except Exception:  # noqa: BLE001 (sys as a student left it: this thread's frames still answer)
        pass
    name, path = _SERVING
    for frame in frames:
        while frame is not None:
            code = frame.f_code
            if code.co_name == name and code.co_filename.endswith(path):
                return True
            frame = frame.f_back
    return False


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


def _gradients(module: Any, inputs: Any, direction: Any, kwargs: dict | None = None, prefixes: Any = None) -> dict:
    G = _genuine()
    held = [(name, t) for name, kind, t, _ in _slots(module) if kind == "parameter"]
    with _GradientsOn():
        for _, tensor in held:  # not module.zero_grad(): the module's own method
            G.grad.__set__(tensor, None)
        inputs = inputs if G.type(inputs) is G.tuple else (inputs,)
        output = _backward(module(*inputs, **(kwargs or {})), direction)
    if G.type(prefixes) is G.tuple:  # only the parameters the test asked for (names are the slots', exact strs)
        held = [(name, t) for name, t in held
                if any(G.type(p) is G.str and G.str.startswith(name, p) for p in prefixes)]
    return {name: _gradient_of(t) for name, t in held}, output


def _backward(output: Any, direction: Any) -> Any:
    """``(output * direction).sum().backward()`` (``output.sum()`` without a direction), with
    torch's own functions; a tuple's first item is the output. Returns that output, detached: the
    gradient checks judge it beside the points a hair away (:func:`_check_differences`)."""
    G = _genuine()
    output = _first(output)
    if not _derives(output, G.Tensor) or not G.requires_grad.__get__(output):
        raise TypeError(f"the output is a {_type_name(output)} that no gradient flows through: keep it a "
                        "tensor computed from the inputs (no .item(), no float(), no .detach())")
    with G.plain():
        G.backward(G.sum(output if direction is None else G.mul(output, direction)))
        return G.detach(output)


def parameter_gradients(module: Any, inputs: Any, direction: Any, **kwargs: Any) -> dict:
    """``{parameter name: gradient or None}`` of ``(module(*inputs) * direction).sum()``.

    The same call works on a real module (in JupyterLab) and on a proxy of the student's
    module in the grader, where the backward pass runs in the kernel and only the gradients
    come back, as data. Each gradient is checked against how the module's output changes when
    its parameter moves a little (a finite difference of the same forward), wherever it runs.
    """
    gradients, output = _with_output(_probe("gradients", module, inputs, direction, kwargs), 2)
    _checked_parameter_gradients(module, gradients, inputs, direction, kwargs, output)
    return gradients


def parameter_gradients_of(module: Any, prefixes: tuple, inputs: Any, direction: Any, **kwargs: Any) -> dict:
    """:func:`parameter_gradients` for the parameters whose names start with one of ``prefixes`` only
    (``("encoder_blocks.", "encoder_norm.")``): the same backward pass, and only those gradients come
    back and are checked against finite differences (a test about one part of a model pays for that
    part's points, not the whole model's)."""
    if type(prefixes) is not tuple or not prefixes or any(type(p) is not str or not p for p in prefixes):
        raise TypeError("prefixes must be a non-empty tuple of non-empty parameter-name prefixes")
    gradients, output = _with_output(_probe("gradients", module, inputs, direction, kwargs, prefixes), 2)
    if type(gradients) is dict and any(type(name) is not str or not name.startswith(prefixes) for name in gradients):
        raise WireError("the gradients hold a parameter the test did not ask for")
    _checked_parameter_gradients(module, gradients, inputs, direction, kwargs, output)
    return gradients


def _with_output(answer: Any, size: int) -> tuple:
    """A gradient probe's answer: the gradients, then the output their backward pass went through."""
    if type(answer) is not tuple or len(answer) != size:
        raise WireError("the gradients are not in the probe's format")
    return answer


def _leaves(inputs: Any) -> tuple:
    """``inputs`` (one or a tuple) with every floating-point tensor copied into a new leaf that requires grad."""
    G = _genuine()
    inputs = inputs if G.type(inputs) is G.tuple else (inputs,)
    with G.plain():
        return G.tuple(G.requires_grad_(G.clone(G.detach(a)), True)
                       if _derives(a, G.Tensor) and (G.is_floating_point(a) or G.is_complex(a)) else a for a in inputs)


def _input_gradients(function: Any, inputs: Any, direction: Any = None, kwargs: dict | None = None) -> tuple:
    with _GradientsOn():
        leaves = _leaves(inputs)
        output = _backward(function(*leaves, **(kwargs or {})), direction)
    return tuple(_gradient_of(leaf) for leaf in leaves), output


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
    gradients, output = _with_output(_probe("input_gradients", function, inputs, direction, kwargs), 2)
    _checked_input_gradients(function, gradients, inputs, direction, kwargs, output)
    return gradients


def _is_instance(obj: Any, cls: Any) -> bool:
    return isinstance(obj, cls) is True


def _trainable(module: Any) -> list[tuple[str, tuple, Any]]:
    """``(name, shape, dtype)`` of every trainable floating-point parameter of ``module`` (frozen ones are
    design), as :func:`module_tensors` lists them."""
    import torch

    rows = []
    for row in module_tensors(module):
        dtype = getattr(torch, str(row["dtype"]), None)
        if row["kind"] == "parameter" and row["requires_grad"] is True and isinstance(dtype, torch.dtype) \
                and dtype.is_floating_point:
            rows.append((row["name"], tuple(int(n) for n in row["shape"]), dtype))
    return rows


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
    for name, shape, dtype in _trainable(module):
        bound = 1.0 / math.sqrt(max(shape[-1] if shape else 1, 1))
        uniform = torch.rand(shape, generator=generator, dtype=torch.float64)
        drawn[name] = ((2 * uniform - 1) * bound).to(dtype)
    load_tensors(module, drawn)
    return drawn


def read_parameters(module: Any) -> dict:
    """``{name: tensor}``: copies of the parameters :func:`draw_parameters` would draw, as ``module``
    holds them now (the weights it was built with, for a module just built), read from its own
    tensors and nothing written: a test judges a module on the weights it was built with, as a
    user first runs it, beside the weights the test loads (a load is a write the module can see)."""
    return read_tensors(module, [name for name, _, _ in _trainable(module)])


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
    result, largest = largest_tensor(fn, *args, **kwargs)
    return result, int(largest.entries), tuple(int(n) for n in largest.shape)


def _parameter_and_input_gradients(module: Any, inputs: Any, direction: Any, kwargs: dict | None = None) -> tuple:
    with _GradientsOn():
        leaves = _leaves(inputs)
        parameters, output = _gradients(module, leaves, direction, kwargs)
    return parameters, tuple(_gradient_of(x) for x in leaves), output


def parameter_and_input_gradients(module: Any, inputs: Any, direction: Any, **kwargs: Any) -> tuple:
    """``(parameter_gradients(...), gradients of the inputs)`` of ``(module(*inputs) * direction).sum()``.

    The second item has one entry per input: its gradient for a floating-point tensor (a copy of
    it is the leaf; the caller's tensor is not touched), else None. Under the oracle both are
    computed in the kernel and come back as data, in one round trip; both are checked against
    finite differences of the module's outputs, as :func:`parameter_gradients` does.
    """
    parameters, from_inputs, output = _with_output(
        _probe("parameter_and_input_gradients", module, inputs, direction, kwargs), 3)
    _checked_parameter_gradients(module, parameters, inputs, direction, kwargs, output)
    _checked_input_gradients(module, from_inputs, inputs, direction, kwargs, output)
    return parameters, from_inputs


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
        # builtins as they are now (a student may rebind builtins.type later) and slots of builtin types:
        # a module's own instance dict through the __dict__ slot nn.Module introduced (whatever its class
        # defines as __dict__), a class's own dict, MRO and name through type's slots
        type=type, id=id, tuple=tuple, set=set, str=str, bool=bool, int=int, dict=dict, object=object,
        instance_dict=vars(torch.nn.Module)["__dict__"].__get__, class_dict=vars(type)["__dict__"].__get__,
        mro=vars(type)["__mro__"].__get__, class_name=vars(type)["__name__"].__get__,
        items=dict.items, lookup=dict.get, store=dict.__setitem__, has=dict.__contains__,
        proxy_has=type(vars(type)).__contains__, proxy_get=type(vars(type)).get, first=tuple.__getitem__, length=tuple.__len__,
        dtype_names={value: str(value).replace("torch.", "") for value in vars(torch).values() if type(value) is torch.dtype},
        detach=base.detach, clone=base.clone, requires_grad_=base.requires_grad_,
        copy_=base.copy_, size=base.size, mul=base.mul, sum=base.sum,
        grad=base.__dict__["grad"], dtype=base.__dict__["dtype"], requires_grad=base.__dict__["requires_grad"],
        is_floating_point=base.is_floating_point, is_complex=base.is_complex, plain=torch._C.DisableTorchFunction,
        set_grad=torch._C._set_grad_enabled, grad_on=torch._C.is_grad_enabled, backward=torch.autograd.backward)


def _genuine() -> Any:
    global _GENUINE
    if _GENUINE is None:  # outside a grading kernel (JupyterLab, the grader): torch as it is, captured once
        _GENUINE = _torch_functions()
    return _GENUINE


class NotPlainModule(TypeError):
    """A module whose structure is not nn.Module's own (an instance dict or a table that is not a
    plain dict, a key that is not a plain str, a class that defines ``training``): the grader reads
    and writes only a plain structure, so the test fails with this message."""


def _derives(obj: Any, cls: Any) -> bool:
    """``cls`` is in the MRO of ``obj``'s own type, read through type's slot (no ``__instancecheck__``,
    no ``__class__``, no metaclass method of the student's)."""
    G = _genuine()
    for base in G.mro(G.type(obj)):
        if base is cls:
            return True
    return False


def _type_name(obj: Any) -> str:
    """The name of ``obj``'s own type, read through type's slot."""
    G = _genuine()
    name = G.class_name(G.type(obj))
    return name if G.type(name) is G.str else "object"


def _tables(prefix: str, part: Any) -> tuple[dict, dict, dict, dict]:
    """``(instance dict, _parameters, _buffers, _modules)`` of ``part``, read through the ``__dict__``
    slot nn.Module introduced: each must be exactly a dict (not a subclass with its own get or
    __setitem__), as nn.Module.__init__ makes them."""
    G = _genuine()
    where = _where(prefix)
    if not _derives(part, G.Module):
        raise NotPlainModule(f"the submodule {where} is a {_type_name(part)}, not a torch.nn.Module")
    held = G.instance_dict(part)
    plain = G.type(held) is G.dict
    parameters, buffers, modules = (G.lookup(held, key) if plain else None for key in ("_parameters", "_buffers", "_modules"))
    if not all(G.type(table) is G.dict for table in (held, parameters, buffers, modules)):
        raise NotPlainModule(f"the module {where} ({_type_name(part)}) does not keep its state as torch.nn.Module "
                             "does: its __dict__, _parameters, _buffers and _modules must be the plain dicts "
                             "nn.Module.__init__ makes, and the grader reads only such a module")
    return held, parameters, buffers, modules


def _where(prefix: str) -> str:
    """The submodule at ``prefix`` (``"decoder.0."``), as a message names it."""
    return prefix[:-1] if prefix else "itself"


def _key(prefix: str, key: Any) -> str:
    """A table's key: exactly a str (a subclass could answer hash and == as it likes)."""
    G = _genuine()
    if G.type(key) is not G.str:
        raise NotPlainModule(f"the module {_where(prefix)} holds an entry whose name is a "
                             f"{_type_name(key)}, not a str: register tensors and submodules by plain names")
    return key


def _slots(module: Any, aliases: dict | None = None) -> list[tuple[str, str, Any, bool]]:
    """``(name, "parameter" | "buffer", tensor, persistent)`` of every tensor ``module`` holds, in
    the order of ``named_parameters()`` then ``named_buffers()`` (a tensor held twice: its first
    name; ``aliases``, if given, gets ``{id(tensor): [its other names]}``). Everything is read
    through slots of builtin and torch types (:func:`_tables`); no code of the module's class runs."""
    G = _genuine()
    if not _derives(module, G.Module):
        raise NotPlainModule(f"a {_type_name(module)} is not a torch.nn.Module")
    parameters: list = []
    buffers: list = []
    seen_tensors: dict = {}  # id -> the other names it is held under
    seen_modules: set = set()
    shared: list = []

    def walk(prefix: str, part: Any, depth: int) -> None:
        if depth > 64:
            return
        if G.id(part) in seen_modules:  # a shared module: its tensors get this name too
            shared.append((prefix, part))
            return
        seen_modules.add(G.id(part))
        held, parameter_table, buffer_table, module_table = _tables(prefix, part)
        listed = G.lookup(held, "_non_persistent_buffers_set")
        if listed is not None and G.type(listed) is not G.set:
            raise NotPlainModule(f"the module {_where(prefix)} does not keep its "
                                 "non-persistent buffers in a plain set as torch.nn.Module does")
        skipped = set() if listed is None else {_key(prefix, name) for name in listed}
        for kind, wanted, table in (("parameter", G.Parameter, parameter_table), ("buffer", G.Tensor, buffer_table)):
            for key, tensor in G.items(table):
                key = _key(prefix, key)
                name = prefix + key
                if tensor is None:
                    continue
                if G.type(tensor) is not wanted and not (kind == "buffer" and G.type(tensor) is G.Parameter):
                    raise NotPlainModule(f"the {kind} {name} is a {_type_name(tensor)}: the grader reads only "
                                         f"a plain {G.class_name(wanted)}")
                if G.id(tensor) not in seen_tensors:
                    seen_tensors[G.id(tensor)] = []
                    if kind == "parameter":
                        parameters.append((name, kind, tensor, True))
                    else:
                        buffers.append((name, kind, tensor, key not in skipped))
                else:  # a tensor held twice (a module shared by two attributes, tied weights): an alias
                    seen_tensors[G.id(tensor)].append(name)
        for key, child in G.items(module_table):
            name = prefix + _key(prefix, key)
            if child is not None:
                walk(name + ".", child, depth + 1)

    walk("", module, 0)
    if aliases is not None:
        for prefix, part in shared:  # every tensor of a shared module, under the prefix it is shared at
            for name, _, tensor, _ in _slots(part):
                aliases.setdefault(G.id(tensor), []).append(prefix + name)
        for key, names in seen_tensors.items():
            aliases.setdefault(key, []).extend(names)
    return parameters + buffers


def _tensor_list(module: Any) -> list:
    """``[[name, kind, shape, dtype, requires_grad, persistent], ...]`` of :func:`_slots`, as data."""
    G = _genuine()
    aliases: dict = {}
    return [[name, kind, [G.int(n) for n in G.size(t)], G.lookup(G.dtype_names, G.dtype.__get__(t), "unknown"),
             G.bool(G.requires_grad.__get__(t)), persistent, aliases.get(G.id(t), [])]
            for name, kind, t, persistent in _slots(module, aliases)]


def _every_name(module: Any) -> tuple[dict, list]:
    """``({name: tensor} with every name a tensor is held under, aliases included, [first names])``."""
    G = _genuine()
    aliases: dict = {}
    slots = _slots(module, aliases)
    held = {name: tensor for name, _, tensor, _ in slots}
    for _, _, tensor, _ in slots:
        held.update({alias: tensor for alias in aliases.get(G.id(tensor), [])})
    return held, [name for name, _, _, _ in slots]


def _copy_of(tensor: Any) -> Any:
    G = _genuine()
    with G.plain():
        return G.clone(G.detach(tensor))


def _gradient_of(tensor: Any) -> Any:
    """A copy of ``tensor``'s gradient, read with torch's own accessor; None for none (or a non-tensor)."""
    G = _genuine()
    gradient = G.grad.__get__(tensor) if _derives(tensor, G.Tensor) else None
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
    loaded in turn, every other tensor a setting names at its value from before (a point moves
    only what it names); the tensors it held before are back afterwards."""
    G = _genuine()
    names = sorted({name for setting in settings for name in setting})
    before = _read(module, names)
    inputs = inputs if G.type(inputs) is G.tuple else (inputs,)
    outputs = []
    try:
        for setting in settings:
            _load(module, {**before, **setting})
            outputs.append(_first_output(module(*inputs, **(kwargs or {}))))
    finally:
        _load(module, before)
    return outputs


def _function_at(function: Any, input_sets: list, kwargs: dict | None = None) -> list:
    """``function``'s first output on each tuple of ``input_sets``."""
    return [_first_output(function(*inputs, **(kwargs or {}))) for inputs in input_sets]


def _first(output: Any) -> Any:
    """A module's output: a tuple's first item (``(out, weights)``), else the output itself (read
    through tuple's own slots: a tuple subclass's ``__getitem__`` is not asked)."""
    G = _genuine()
    return G.first(output, 0) if _derives(output, G.tuple) and G.length(output) else output


def _first_output(output: Any) -> Any:
    """A copy of the first output, for the grader (a non-tensor as it is)."""
    output = _first(output)
    G = _genuine()
    return _copy_of(output) if _derives(output, G.Tensor) else output


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


def _shadows(value: Any) -> bool:
    """A class attribute that wins over the instance dict: a data descriptor (its type defines
    ``__set__`` or ``__delete__``), read through type's slots."""
    G = _genuine()
    for base in G.mro(G.type(value)):
        own = G.class_dict(base)
        if G.proxy_has(own, "__set__") or G.proxy_has(own, "__delete__"):
            return True
    return False


def _set_training(module: Any, mode: Any) -> bool:
    """``training = mode`` on ``module`` and every submodule, written in their own instance dicts as
    ``nn.Module.train`` does, with no method of theirs called. The forward must then read that
    mode: a module whose class (or any class of its MRO, nn.Module included) defines ``training``
    as a data descriptor (a property) or its own ``__getattribute__`` could answer ``self.training``
    with another, so it fails, as a structure the grader cannot put in a mode."""
    G = _genuine()
    mode, seen = mode is True, set()

    def walk(prefix: str, part: Any, depth: int) -> None:
        if depth > 64 or G.id(part) in seen:
            return
        held, _, _, children = _tables(prefix, part)
        seen.add(G.id(part))
        for cls in G.mro(G.type(part)):
            own = G.class_dict(cls)
            shadowing = G.proxy_has(own, "training") and _shadows(G.proxy_get(own, "training"))
            if shadowing or (cls is not G.object and G.proxy_has(own, "__getattribute__")):
                what = "training" if shadowing else "__getattribute__"
                raise NotPlainModule(f"the class {G.class_name(cls)} of the module {_where(prefix)} "
                                     f"defines {what} itself: a module keeps its mode in the `training` entry "
                                     "nn.Module.train() sets, and the forward must read that one")
        G.store(held, "training", mode)
        for key, child in G.items(children):
            if child is not None:
                walk(prefix + _key(prefix, key) + ".", child, depth + 1)

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


def _check_differences(what: str, gradients: dict, checks: list, outputs: list, direction: Any,
                       center: Any) -> None:
    """Each reported gradient against the change of the outputs at its two points; and the output the
    backward pass went through (``center``, at the values the test chose) against the same two points:
    it must lie between them as a function does (their mean, up to their difference), so that a forward
    that answers the points a hair away otherwise than the call the gradients came from fails."""
    import torch

    weight = None if direction is None else torch.as_tensor(direction).detach().double()
    for index, (name, moved, scale, rtol) in enumerate(checks):
        rounding = ROUNDING.get(str(outputs[2 * index].dtype).replace("torch.", ""), ROUNDING["float32"]) \
            if isinstance(outputs[2 * index], torch.Tensor) else 0.0
        values = []
        for output in [*outputs[2 * index: 2 * index + 2], center]:
            if not isinstance(output, torch.Tensor) or not (output.is_floating_point() or output.is_complex()):
                raise CheckFailed(f"{what} returned a {type(output).__name__} when the grader moved {name} a little: "
                                  "it should return the same kind of tensor for any values")
            output = output.detach().double()
            if tuple(output.shape) != tuple(outputs[2 * index].shape):
                raise CheckFailed(f"{what} returned an output of shape {tuple(output.shape)} once and "
                                  f"{tuple(outputs[2 * index].shape)} when the grader moved {name} a little: "
                                  "it should return the same shape for any values")
            if not bool(torch.isfinite(output).all()):
                raise CheckFailed(f"{what}'s output contains NaN or infinite values, so its gradients cannot be "
                                  "checked: make the tests of its values pass first (a row of scores masked "
                                  "entirely gives NaN after softmax)")
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
        bent = float(values[0] + values[1] - 2 * values[2])  # second difference: h^2 f'' for a function
        if not abs(bent) <= max(abs(observed), abs(predicted)) + scale + 2 * floor:
            raise CheckFailed(f"{what}'s output at the values the test chose does not lie between its outputs with "
                              f"{name} moved a little either way: the forward must compute the same function on "
                              "every call (no memory of earlier calls, no detached part added back)")


def _checked_parameter_gradients(module: Any, gradients: Any, inputs: Any, direction: Any, kwargs: dict,
                                 center: Any) -> None:
    if type(gradients) is not dict:
        raise WireError("the gradients are not a dict")
    points = read_tensors(module, [name for name, g in gradients.items() if g is not None])
    settings, checks = _steps(points, gradients)
    if settings:
        outputs = _probe("outputs_at", module, settings, inputs, kwargs)
        _check_differences(_name_of(module), gradients, checks, list(outputs), direction, center)


def _checked_input_gradients(function: Any, gradients: Any, inputs: Any, direction: Any, kwargs: dict,
                             center: Any) -> None:
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    if type(gradients) is not tuple or len(gradients) != len(inputs):
        raise WireError("the input gradients are not one entry per input")
    names = [f"input {i + 1}" for i in range(len(inputs))]
    named = dict(zip(names, gradients, strict=True))
    settings, checks = _steps(dict(zip(names, inputs, strict=True)), named)
    if settings:
        input_sets = [tuple(setting.get(name, x) for name, x in zip(names, inputs, strict=True)) for setting in settings]
        outputs = _probe("function_at", function, input_sets, kwargs)
        _check_differences(_name_of(function), named, checks, list(outputs), direction, center)


def _name_of(obj: Any) -> str:
    name = getattr(obj, "__name__", None) if not is_remote(obj) else None
    if not isinstance(name, str):
        name = type(obj).__name__
    return name


# ---------------------------------------------------------------- what a function allocates


@dataclass
class Largest:
    """The biggest tensor seen: its number of entries (storage) and its shape."""

    entries: int = 0
    shape: tuple[int, ...] = ()


_WATCH: list = []  # the dispatch mode's class, made on first use (it needs torch)


def _watch() -> Any:
    """A TorchDispatchMode that records the largest tensor any ATen operation produces."""
    if _WATCH:
        return _WATCH[0]()
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class _Watch(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            # By default torch wraps __torch_dispatch__ in torch._disable_dynamo, which imports
            # torch._dynamo: seconds on first use, for a mode that is never compiled.
            return False

        def __init__(self) -> None:
            super().__init__()
            self.largest = Largest()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for value in tree_flatten(out)[0]:
                if isinstance(value, torch.Tensor) and value.element_size() > 0:
                    entries = value.untyped_storage().nbytes() // value.element_size()
                    if entries > self.largest.entries:
                        self.largest = Largest(int(entries), tuple(value.shape))
            return out

    _WATCH.append(_Watch)
    return _Watch()


def largest_tensor(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, Largest]:
    """Call ``fn(*args, **kwargs)``; return its result and the largest tensor built inside it.

    Under the grader's oracle ``fn`` may be a proxy of the student's function: the call is then
    watched where it runs, in the kernel (probe ``largest_tensor``), and only the result and the
    two numbers come back, as data. What the kernel reports is the student's to fake, so a graded
    test never rests on it alone.
    """
    if is_remote(fn):
        result, entries, shape = _probe("largest_tensor", fn, *args, **kwargs)
        if type(entries) is not int or type(shape) is not tuple or not all(type(n) is int for n in shape):
            raise WireError("the kernel's largest_tensor report is not two numbers")
        return result, Largest(entries, shape)
    watch = _watch()
    with watch:
        result = fn(*args, **kwargs)
    return result, watch.largest


PROBES: dict[str, Callable[..., Any]] = {"gradients": _gradients, "arguments": _arguments,
                                       "largest_tensor": _largest_tensor, "input_gradients": _input_gradients,
                                       "parameter_and_input_gradients": _parameter_and_input_gradients,
                                       "isinstance": _is_instance, "tensors": _tensor_list, "read": _read,
                                       "load": _load, "outputs_at": _outputs_at, "function_at": _function_at,
                                       "training": _set_training}


