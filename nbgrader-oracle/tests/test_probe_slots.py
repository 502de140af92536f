"""The kernel's probes reach a student's objects only through captured slots of builtin and torch types."""

from __future__ import annotations

import ast
import builtins
import sys
from pathlib import Path

import pytest
import torch
from nboracle import draw_parameters, module_tensors, parameter_gradients, read_state, set_training
from nboracle.kernel import probes
from torch import nn

SOURCE = Path(probes.__file__).read_text()
TREE = ast.parse(SOURCE)
FUNCTIONS = {node.name: node for node in TREE.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
# probes that only call the student's callable and return what it returns (its answer, judged by the
# grader) or report what the kernel says of itself (never alone decisive): they read no module's state
ANSWERS = {"_arguments", "_is_instance", "_largest_tensor"}
CAPTURE = {"_genuine", "_torch_functions"}  # run when the kernel starts listening, before any student code
GRADED_CALLS = {"module", "function"}  # the call a probe makes on purpose: the student's forward
# arguments that come from the grader, decoded by the wire (plain dicts, tuples, tensors), or are its own
GRADER_VALUES = {"prefix", "aliases", "values", "settings", "names", "input_sets", "kwargs", "inputs", "direction", "mode"}
PLAIN_BUILTINS = {"zip", "range", "sorted", "list", "tuple", "dict", "set", "enumerate", "all", "any", "max", "min",
                  "abs", "KeyError", "ValueError", "TypeError"}
BUILTINS = set(dir(builtins))


def kernel_functions() -> set[str]:
    """The PROBES' functions and every function of probes.py they call, ANSWERS aside."""
    table = next(node.value for node in TREE.body if isinstance(node, ast.AnnAssign)
                 and getattr(node.target, "id", "") == "PROBES")
    todo = [value.id for value in table.values if value.id not in ANSWERS]
    found: set[str] = set()
    while todo:
        name = todo.pop()
        if name in found or name not in FUNCTIONS:
            continue
        found.add(name)
        todo += [n.func.id for n in ast.walk(FUNCTIONS[name]) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
        todo += [n.id for n in ast.walk(FUNCTIONS[name]) if isinstance(n, ast.Name) and n.id in FUNCTIONS]
    return found - CAPTURE


def unannotated(function: ast.AST) -> ast.AST:
    """``function`` without its annotations (types, not code that runs)."""
    for node in ast.walk(function):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.returns = None
        elif isinstance(node, ast.arg):
            node.annotation = None
        elif isinstance(node, ast.AnnAssign):
            node.annotation = ast.Constant(None)
    return function


def own_names(function: ast.AST) -> set[str]:
    """Locals that hold the grader's own containers: literals, comprehensions, results of probes.py's functions."""
    own = set(GRADER_VALUES)
    made = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp, ast.Tuple, ast.Constant)

    def ours(value: ast.AST | None) -> bool:
        if isinstance(value, ast.IfExp):
            return ours(value.body) and ours(value.orelse)
        return isinstance(value, made) or (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                                           and (value.func.id in FUNCTIONS or value.func.id in PLAIN_BUILTINS))

    for node in ast.walk(function):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        mine = ours(getattr(node, "value", None))
        for target in targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name) and mine:
                    own.add(name.id)
    return own


def root(node: ast.AST) -> ast.AST:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node


def violations(name: str, function: ast.AST | None = None) -> list[str]:
    function = unannotated(function or FUNCTIONS[name])
    own = own_names(function)
    nested = {n.name for n in ast.walk(function) if isinstance(n, ast.FunctionDef)}
    found = []
    for node in ast.walk(function):
        where = f"{name}, line {getattr(node, 'lineno', '?')}: {ast.unparse(node)[:80]}"
        if isinstance(node, ast.Attribute):
            base = root(node)
            if not (isinstance(base, ast.Name) and (base.id == "G" or base.id in own)):
                found.append(f"attribute of an object that may be the student's ({where})")
        elif isinstance(node, ast.Subscript):
            base = root(node)
            if not (isinstance(base, ast.Name) and base.id in own):
                found.append(f"item access on an object that may be the student's ({where})")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            called = node.func.id
            if called in BUILTINS and called not in PLAIN_BUILTINS:
                found.append(f"builtin {called}() (the student may rebind it, or it asks the object's class): "
                             f"use the captured G.{called} or a slot ({where})")
            elif called not in BUILTINS | set(FUNCTIONS) | nested | GRADED_CALLS | own:
                found.append(f"call of {called} ({where})")
        elif isinstance(node, (ast.Compare)) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            for side in node.comparators:
                if not (isinstance(side, ast.Name) and side.id in own):
                    found.append(f"`in` on an object that may be the student's ({where})")
    return found


def test_the_probes_reach_student_objects_only_through_captured_slots():
    names = kernel_functions()
    assert {"_slots", "_tables", "_set_training", "_load", "_read", "_gradients", "_outputs_at"} <= names
    found = [v for name in sorted(names) if name != "_GradientsOn" for v in violations(name)]
    assert not found, "\n".join(found)


def test_the_check_sees_what_a_regression_would_write():
    regression = ast.parse(
        "def _slots(module):\n"
        "    held = module.__dict__\n"                      # the class's __dict__
        "    table = held.get('_parameters')\n"             # a dict subclass's get
        "    if isinstance(table, dict) and 'w' in table:\n"  # __instancecheck__, __contains__
        "        return table['w'], type(module)\n").body[0]
    found = violations("_slots", regression)
    assert len(found) == 6, found


class _Filtered(dict):
    def get(self, key, default=None):
        return {} if key == "_parameters" else super().get(key, default)


class _ShowsNoBias(nn.Linear):
    @property
    def __dict__(self):  # what `self.__dict__` says outside torch's own code: no parameters at all
        real = nn.Module.__dict__["__dict__"].__get__(self)
        if "torch" in sys._getframe(1).f_code.co_filename:
            return real
        return {**real, "_parameters": {}}


class _Moody(nn.Linear):
    @property
    def training(self):
        return False

    @training.setter
    def training(self, mode):
        pass


def test_a_class_defined_dict_is_not_read():
    layer = _ShowsNoBias(3, 2)
    assert [row["name"] for row in module_tensors(layer)] == ["weight", "bias"]  # nn.Module's own slot


@pytest.mark.parametrize("where", ["__dict__", "_parameters", "_modules"])
def test_dict_subclasses_are_refused_with_a_message(where):
    layer = nn.Sequential(nn.Linear(3, 2))
    if where == "__dict__":
        nn.Module.__dict__["__dict__"].__set__(layer, _Filtered(vars(layer)))
    else:
        vars(layer)[where] = _Filtered(vars(layer)[where])
    with pytest.raises(probes.NotPlainModule, match="plain dicts nn.Module.__init__ makes"):
        read_state(layer)


def test_a_class_level_training_cannot_shadow_the_mode():
    with pytest.raises(probes.NotPlainModule, match="defines training itself"):
        set_training(nn.Sequential(_Moody(3, 2)), True)
    class Plain(nn.Linear):
        training = True  # a plain class attribute: the instance dict's entry wins over it

    plain = Plain(3, 2)
    set_training(plain, False)
    assert plain.training is False
    honest = nn.Sequential(nn.Linear(3, 2), nn.Dropout(0.5))
    set_training(honest, False)
    assert not honest.training and not honest[1].training
    set_training(honest, True)
    assert honest[1].training and bool((honest(torch.ones(50, 3)) == 0).any())


def test_rebound_builtins_are_not_asked():
    layer = nn.Linear(3, 2)
    probes._genuine()  # captured before the student's cell
    saved = builtins.type, builtins.id
    builtins.type, builtins.id = (lambda obj, *rest: dict if not rest else saved[0](obj, *rest)), (lambda obj: 0)
    try:
        rows = probes._tensor_list(layer)
    finally:
        builtins.type, builtins.id = saved
    assert [row[0] for row in rows] == ["weight", "bias"]


def test_reading_and_writing_a_module_runs_none_of_its_class_code():
    """A module that would learn it is graded (its class's __dict__, asked by anything but torch) learns nothing."""
    asked = []

    class Watching(nn.Linear):
        @property
        def __dict__(self):
            if "/torch/" not in sys._getframe(1).f_code.co_filename:
                asked.append(sys._getframe(1).f_code.co_name)
            return nn.Module.__dict__["__dict__"].__get__(self)

    layer = Watching(3, 2)
    drawn = draw_parameters(layer, torch.Generator().manual_seed(0))
    set_training(layer, False)
    assert torch.equal(read_state(layer)["weight"], drawn["weight"]) and not layer.training
    parameter_gradients(layer, (torch.randn(4, 3),), torch.randn(4, 2))
    assert asked == []
