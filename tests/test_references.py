"""Every expected value comes from the grader's own code (issue 29, item 4).

A static taint analysis of every chapter's graded test cells, hidden parts included. A name a
test reads is the **student's** unless the chapter's locked provided cells (those that also run
in the grader: not `# kernel only`), an earlier or the same test cell, or Python's builtins
define it; a value computed from a student name (called, indexed, an attribute read, an
argument passed to anything) is **tainted**, and so is everything assigned from it. The
grader's own draws are clean: `draw_parameters` returns the tensors the test drew, and
`fresh(...)` is the grader's copy. A tuple keeps each item's taint (`block, layer = new_block(...)`, also
through a helper's `return block, layer`, `f(*new_block(...))`, `zip`, `enumerate` and a literal of tuples
iterated); used whole it is the union of its items. A comprehension's calls give a new output per item, and a
`.backward()` leaves its taint in every `.grad` the cell reads afterwards.

Two rules, over every comparison in a test cell (course checks, `torch.allclose` and friends,
`==`, `<`, ...):

* the expected side of a course check (`check_close(name, actual, expected)`, `check_shape`,
  `check_dtype`) is never tainted: no expected value calls a student function;
* no comparison has both sides tainted (two outputs of the same student object agree, so
  nothing about either is known), unless it only chooses a failure message or is a precondition
  that can only fail the test (a property of the student's function that the cell's reference
  relies on, such as "split_heads only rearranges entries"). Such a line carries the marker
  `# message only: <why>` or `# precondition: <why>`, and its cell must also hold a reference
  comparison (a tainted side against a clean one), which is what awards the point.

A composite may be judged around the student's own other part (chapter 08's linear attention
around the student's `phi`, so a wrong feature map costs the test of `phi` only): the helper that
hands that part to the references is listed in `OWN_PARTS`, with why, and must refuse a
degenerate part (a constant feature map would let a hard-coded composite match).

`PENDING` lists the cells not yet held to this, each with what it compares (empty since every
chapter's cells were rewritten); remove an entry once its cell is fixed
(`test_pending_cells_are_still_flagged` fails while a listed cell already passes).
"""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import torch
from nboracle.grader.nbgrader_ext import DEMO_ONLY
from nboracle.grader.oracle import KERNEL_ONLY
from support import ASSIGNMENTS, source_nb

ROOT = Path(__file__).resolve().parents[1]


def _test_modules() -> frozenset:
    """The course's test modules (`c.OracleExecute.test_modules` in nbgrader_config.py): their code is test code."""
    for node in ast.walk(ast.parse((ROOT / "nbgrader_config.py").read_text())):
        if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Attribute)
                and node.targets[0].attr == "test_modules"):
            return frozenset(ast.literal_eval(node.value))
    return frozenset()


TEST_MODULES = _test_modules()
MESSAGE_ONLY = "# message only:"  # a comparison of two student outputs that only picks a failure message
PRECONDITION = "# precondition:"  # a comparison of two student outputs that can only fail the test
MARKERS = (MESSAGE_ONLY, PRECONDITION)

# Calls whose result is the grader's own, whatever their arguments. The genuine accessors read what a module
# holds from torch's own dicts, never through its code: a trained model's weights run in a twin of the
# grader's are the grader's computation (issue 29 item 2), not an output of the student's code.
CLEAN_CALLS = {"draw_parameters", "fresh", "module_tensors", "read_tensors", "read_state", "read_parameters"}
# The grader's record of the points its gradient checks probed: items (point: the grader's, output: the student's).
PROBED_POINTS = "probed_points"
# Course checks: the index of the expected argument (and its keyword).
EXPECTED_ARGUMENT = {"check_close": (2, "expected"), "check_shape": (2, "expected"), "check_dtype": (2, "expected")}
# Two-sided comparisons: (function's last dotted name, the two argument positions).
PAIRWISE = {"allclose", "isclose", "equal", "array_equal", "assert_close", "assert_allclose", "assert_array_equal",
            "matches"}

# Course functions that run the student's code they are handed: each call is a new output.
RUNS_STUDENT_CODE = {"attempt", "call_keeping_arguments", "parameter_gradients", "input_gradients",
                     "parameter_and_input_gradients"}
# Methods that store their arguments in the object they are called on.
MUTATORS = {"append", "extend", "insert", "update", "setdefault", "add", "copy_", "__setitem__"}

# Methods of data (tensors, arrays, containers): calling one on a student's output is not a new output.
DATA_METHODS = set(dir(torch.Tensor)) | set(dir(np.ndarray)) | set(dir(dict)) | set(dir(list)) | set(dir(str))

# Cells not yet held to the rules (see the module docstring): {assignment: {grade_id: why}}. Empty an entry once its
# cell compares each student output with the grader's own reference; the test then keeps it so.
PENDING: dict[str, dict[str, str]] = {}

# A test helper that hands the student's *other* part to a test's reference, so that a composite is judged around
# the part the student wrote (one mistake, one loss; that part's own test judges it): {assignment: {helper: why}}.
# Its result counts as the grader's. Each helper must check that the part is not degenerate (a constant feature map
# would let a hard-coded composite match), which `test_own_parts_are_checked` holds.
OWN_PARTS: dict[str, dict[str, str]] = {
    "01_two_keys": {"own_weights": "attention's weights are judged around the student's softmax where it does not "
                                   "normalise rows (refused when it gives every row the same weights); the tests of "
                                   "softmax judge it"},
    "02_scaling": {"own_top": "the table's top weights are judged around the student's mean_top_weight (refused when "
                              "it gives flat and peaked scores the same answer); Part A's tests judge it"},
    "06_multihead_attention": {"multihead_reference": "the block is judged around the student's split_heads and "
                                                      "merge_heads, read as the entries they pick (as_gather refuses "
                                                      "anything but a rearrangement); Part A's tests judge them"},
    "07_seq2seq_beam_search": {"own_lp": "beam_decode is judged around the student's length_penalty, read as a table "
                                         "(refused when it raises, gives no positive number or the same answer for every "
                                         "length at an alpha above 0); test_length_penalty judges it"},
    "08_attention_cost": {"own_phi": "linear attention, its causal form and the step are judged around the "
                                     "student's phi; test_phi judges phi against F.elu(x) + 1"},
    "09_decoder": {"around_own_blocks": "encode and decode are judged around the model's own decoder blocks, called in "
                                        "the kernel on the reference stream (refused when one raises, gives NaN or "
                                        "gives two inputs the same answer); Part B's tests judge them"},
    "10_tiny_gpt": {"own_sublayers": "a Block is judged around its own attention and FFN, called as the block holds "
                                     "them (refused when either gives two inputs the same answer); Part B's tests "
                                     "judge them",
                    "own_blocks": "a GPT is judged around its own blocks, called in order (refused when one gives two "
                                  "inputs the same answer); Part C's tests judge them",
                    "own_parts": "meter_report is judged around the student's tone and rhyme_part, read as tables "
                                 "over the test's syllables (refused when tone gives every syllable the same answer or "
                                 "rhyme_part nearly the same sound); the tests of tone and rhyme_part judge them"},
    "11_modern_decoder": {"own_rope": "the attention is judged around the student's apply_rope, called on the grader's "
                                      "q and k (refused when it gives two inputs the same answer); Part B's tests "
                                      "judge it",
                          "own_block_parts": "a ModernBlock is judged around its own norms, attention and FFN, called as "
                                             "the block holds them (refused when one gives two inputs the same "
                                             "answer); Parts A, C and D judge them",
                          "own_model_parts": "a ModernGPT is judged around its own blocks and final norm, called in "
                                             "order (refused when one gives two inputs the same answer); the tests of "
                                             "ModernBlock and RMSNorm judge them"},
}

Taint = frozenset  # the student outputs a value derives from, as (student name, call) pairs (empty: the grader's own)
CLEAN: Taint = frozenset()


class Parts(frozenset):
    """The taint of a tuple: the union of its items' taints, and each item's own (`parts`), so that unpacking
    `block, layer = new_block(...)` gives the grader's layer its own taint, not the block's."""

    parts: tuple

    def __new__(cls, parts):
        self = super().__new__(cls, frozenset().union(*parts))
        self.parts = tuple(parts)
        return self


class Rows(frozenset):
    """The taint of an iterable whose every item has the taint `item` (a Parts for `zip(...)`, `enumerate(...)`);
    used as a value, the union of everything in it."""

    item: Taint

    def __new__(cls, item):
        self = super().__new__(cls, item)
        self.item = item
        return self


def join(a: Taint, b: Taint) -> Taint:
    """The taint of a value that is either `a` or `b`: item by item where both are tuples of one length."""
    if not a:
        return b
    if not b:
        return a
    if isinstance(a, Parts) and isinstance(b, Parts) and len(a.parts) == len(b.parts):
        return Parts(tuple(join(x, y) for x, y in zip(a.parts, b.parts, strict=True)))
    if isinstance(a, Rows) and isinstance(b, Rows):
        return Rows(join(a.item, b.item))
    return frozenset(a | b)


def item_of(taint: Taint) -> Taint:
    """The taint of one item of what has the taint `taint`, when iterated."""
    if isinstance(taint, Rows):
        return taint.item
    if isinstance(taint, Parts):
        item = CLEAN
        for part in taint.parts:
            item = join(item, part)
        return item
    return taint


def relabel(taint: Taint, label) -> Taint:
    """`taint` with each (student, call) pair replaced by `label(student, call)`, tuples kept item by item."""
    if isinstance(taint, Parts):
        return Parts(tuple(relabel(part, label) for part in taint.parts))
    if isinstance(taint, Rows):
        return Rows(relabel(taint.item, label))
    return frozenset(label(student, call) for student, call in taint)


def shape(taint: Taint):
    """A key that tells a tuple's taint from the plain union of its items (for the summaries' cache)."""
    if isinstance(taint, Parts):
        return ("parts", tuple(shape(part) for part in taint.parts))
    if isinstance(taint, Rows):
        return ("rows", shape(taint.item))
    return frozenset(taint)


@dataclass
class Function:
    node: ast.FunctionDef | ast.Lambda
    cell: str | None  # grade id of the cell that defines it; None: a test module's, read for the cell that calls it
    scope: dict  # the enclosing local scope (None at top level; a test module's own names)
    lines: list | None = None  # a test module's source lines (a cell's are in Analysis.lines)


@dataclass
class Finding:
    cell: str
    line: int
    text: str
    why: str

    def __str__(self) -> str:
        return f"{self.cell} line {self.line}: {self.why}: {self.text.strip()}"


@dataclass
class Analysis:
    """Taint of names through a chapter's provided and test cells, in notebook order."""

    globals: dict = field(default_factory=dict)  # name -> Taint or Function
    findings: list = field(default_factory=list)
    references: dict = field(default_factory=dict)  # cell -> number of reference comparisons
    excused: dict = field(default_factory=dict)  # cell -> [(line, text)] of `# message only` comparisons
    lines: dict = field(default_factory=dict)  # cell -> its source lines
    gradients: Taint = CLEAN  # what the backward passes of the current cell so far derive from (`.grad` reads it)
    _summaries: dict = field(default_factory=dict)
    _active: set = field(default_factory=set)
    cell: str = ""  # the cell whose statements are being read
    source: list | None = None  # the lines being read when they are a test module's, not the cell's
    modules: dict = field(default_factory=dict)  # a test module's name -> its names (Function or CLEAN)
    module_texts: dict = field(default_factory=dict)  # a test module's source given by a test of the analysis
    own_parts: frozenset = frozenset()  # OWN_PARTS' helpers of the chapter

    # ------------------------------------------------------------ names

    def lookup(self, name: str, scopes: list) -> Taint | Function:
        for scope in reversed(scopes):
            if name in scope:
                return scope[name]
        if name in self.globals:
            return self.globals[name]
        if name in builtins.__dict__:
            return CLEAN
        return frozenset({(name, "name")})  # the student's

    @staticmethod
    def taint_of(value) -> Taint:
        return value if isinstance(value, frozenset) else CLEAN

    def bind(self, target: ast.expr, taint: Taint, scopes: list) -> None:
        scope = scopes[-1] if scopes else self.globals
        if isinstance(target, ast.Name):
            scope[target.id] = taint
        elif isinstance(target, (ast.Tuple, ast.List)):
            starred = any(isinstance(element, ast.Starred) for element in target.elts)
            parts = taint.parts if isinstance(taint, Parts) and len(taint.parts) == len(target.elts) else None
            for i, element in enumerate(target.elts):  # a tuple's items one by one, anything else whole
                if isinstance(element, ast.Starred):
                    element = element.value
                self.bind(element, parts[i] if parts is not None and not starred else frozenset(taint), scopes)
        elif isinstance(target, (ast.Attribute, ast.Subscript)):
            base = target.value
            while isinstance(base, (ast.Attribute, ast.Subscript)):
                base = base.value
            if isinstance(base, ast.Name) and taint:  # an object that holds a student value is tainted, where it lives
                held = next((s for s in [*reversed(scopes), self.globals] if base.id in s), scope)
                held[base.id] = self.taint_of(self.lookup(base.id, scopes)) | taint
        elif isinstance(target, ast.Starred):
            self.bind(target.value, taint, scopes)

    # ------------------------------------------------------------ expressions

    def expr(self, node, scopes: list) -> Taint:
        if node is None:
            return CLEAN
        if isinstance(node, ast.Name):
            return self.taint_of(self.lookup(node.id, scopes))
        if isinstance(node, ast.Constant):
            return CLEAN
        if isinstance(node, ast.Attribute) and node.attr == "grad":  # what a backward pass left there
            return frozenset(self.expr(node.value, scopes) | self.gradients)
        if isinstance(node, ast.Call):
            return self.call(node, scopes)
        if isinstance(node, ast.Compare):  # equality; an order (`scaled < raw`) is a property, not a reference
            sides = [self.expr(node.left, scopes)] + [self.expr(c, scopes) for c in node.comparators]
            for op, left, right in zip(node.ops, sides, sides[1:], strict=False):
                if isinstance(op, (ast.Eq, ast.NotEq)):
                    self.compared(node, left, right)
            return frozenset().union(*sides)
        if isinstance(node, ast.Tuple) and not any(isinstance(e, ast.Starred) for e in node.elts):
            return Parts(tuple(self.expr(element, scopes) for element in node.elts))
        if isinstance(node, ast.Subscript):  # a clean table indexed by a student's key still holds clean values
            self.expr(node.slice, scopes)
            value = self.expr(node.value, scopes)
            index = node.slice.value if isinstance(node.slice, ast.Constant) else None
            if isinstance(value, Parts) and isinstance(index, int) and -len(value.parts) <= index < len(value.parts):
                return value.parts[index]  # `new_block(...)[1]`: that item's own
            return value
        if isinstance(node, ast.Lambda):
            inner = dict.fromkeys(_parameters(node.args), CLEAN)
            return self.expr(node.body, [*scopes, inner])
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            inner: dict = {}
            local = [*scopes, inner]
            for generator in node.generators:
                self.bind(generator.target, self.items(generator.iter, local), local)
                for condition in generator.ifs:
                    self.expr(condition, local)
            if isinstance(node, ast.DictComp):
                taint = self.expr(node.key, local) | self.expr(node.value, local)
            else:
                taint = self.expr(node.elt, local)
            inside = {id(n) for n in ast.walk(node) if isinstance(n, ast.Call)}  # a call here runs once per item
            return frozenset(taint | {(student, "many") for student, call in taint
                                      if (call[0] if isinstance(call, tuple) else call) in inside})
        if isinstance(node, ast.NamedExpr):
            taint = self.expr(node.value, scopes)
            self.bind(node.target, taint, scopes)
            return taint
        taint = CLEAN
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                taint |= self.expr(child, scopes)
            elif isinstance(child, ast.keyword):
                taint |= self.expr(child.value, scopes)
            elif isinstance(child, ast.comprehension):
                taint |= self.expr(child.iter, scopes)
        return taint

    def items(self, node: ast.expr, scopes: list) -> Taint:
        """The taint of one item of the iterable `node` (a literal list item by item, like a tuple)."""
        if isinstance(node, ast.List) and not any(isinstance(e, ast.Starred) for e in node.elts):
            return item_of(Parts(tuple(self.expr(element, scopes) for element in node.elts)))
        return item_of(self.expr(node, scopes))

    def call(self, node: ast.Call, scopes: list) -> Taint:
        args, rest = [], CLEAN  # the positional arguments' taints; `rest`: what a `*value` of unknown length holds
        for a in node.args:
            if isinstance(a, ast.Starred):
                value = self.expr(a.value, scopes)
                if isinstance(value, Parts) and not rest:  # `f(*new_block(...))`: its items, in their places
                    args.extend(value.parts)
                else:
                    rest |= value
            elif rest:
                rest |= self.expr(a, scopes)
            else:
                args.append(self.expr(a, scopes))
        kwargs = {k.arg: self.expr(k.value, scopes) for k in node.keywords}  # `**value` under the key None
        name = _callee_name(node.func)
        callee = self.lookup(node.func.id, scopes) if isinstance(node.func, ast.Name) else None
        if name in EXPECTED_ARGUMENT and isinstance(node.func, ast.Name) and callee == CLEAN:
            index, keyword = EXPECTED_ARGUMENT[name]
            expected = args[index] if len(args) > index else kwargs.get(keyword, CLEAN)
            actual = args[1] if len(args) > 1 else kwargs.get("actual", kwargs.get("value", CLEAN))
            if expected and not actual:
                self.flag(node, f"the expected value of {name} derives from {_names(expected)}")
            else:
                self.compared(node, actual, expected)
        elif name in PAIRWISE:
            sides = (args + list(kwargs.values()))[:2]
            if len(sides) == 2:
                self.compared(node, *sides)
        if isinstance(callee, Function) and isinstance(node.func, ast.Name) and node.func.id in self.own_parts:
            return CLEAN  # the student's other part as the reference's input (OWN_PARTS)
        if isinstance(callee, Function):  # what its own calls of student code return is new at every call
            given = {call for value in [*args, rest, *kwargs.values()] for _, call in value}
            return relabel(self.summary(callee, node, args, kwargs, rest),
                           lambda student, call: (student, call if call in given else (id(node), call)))
        if name in CLEAN_CALLS and isinstance(node.func, ast.Name):
            return CLEAN
        if name == PROBED_POINTS and isinstance(node.func, ast.Name) and callee == CLEAN and args:
            # the grader's record of its gradient checks: each item the point the grader chose (clean) and the
            # student's output there (a new output of the target)
            output = frozenset((student, (id(node), call)) for student, call in frozenset(args[0]))
            return Rows(Parts((CLEAN, output)))
        if name in ("zip", "enumerate") and callee == CLEAN and not rest and None not in kwargs:
            items = [item_of(value) for value in args]  # each item a tuple: one item of each argument
            return Rows(Parts(tuple(items) if name == "zip" else (CLEAN, *items[:1])))
        taint = self.expr(node.func, scopes)
        if taint and (isinstance(node.func, ast.Name) or name not in DATA_METHODS):
            taint = frozenset((student, id(node)) for student, _ in taint)  # a call of the student's code: a new output
        for value in [*args, rest, *kwargs.values()]:
            taint |= value
        if taint and name in RUNS_STUDENT_CODE and isinstance(node.func, ast.Name):
            taint = frozenset((student, (id(node), call)) for student, call in taint)
        if name == "backward":  # `(twin(x) * direction).sum().backward()`: every gradient it leaves has its taint
            self.gradients = frozenset(self.gradients | taint)
        if taint and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:  # `outs.append(student)`
            self.bind(node.func.value, taint | {(student, "many") for student, _ in taint}, scopes)
        return taint

    def summary(self, function: Function, node: ast.Call, args: list, kwargs: dict, rest: Taint = CLEAN) -> Taint:
        """What `function` returns when called with arguments of these taints (its body analysed once per taint).

        `rest` is what a `*value` of unknown length holds: any positional parameter from there on may get it."""
        names = _parameters(function.node.args)
        given = dict.fromkeys(names, CLEAN)
        positional = [a.arg for a in (*function.node.args.posonlyargs, *function.node.args.args)]
        vararg, kwarg = (a.arg if a is not None else None for a in (function.node.args.vararg, function.node.args.kwarg))
        extra = CLEAN
        for i, taint in enumerate(args):
            if i < len(positional):
                given[positional[i]] = join(given[positional[i]], taint)
            elif vararg:
                given[vararg] = frozenset(given[vararg] | taint)
            else:
                extra |= taint
        if rest:
            for name in [*positional[len(args):], *([vararg] if vararg else [])]:
                given[name] = frozenset(given[name] | rest)
        for key, taint in kwargs.items():
            if key is None:  # `**value`: any parameter may get it
                for name in given:
                    given[name] = frozenset(given[name] | taint)
            elif key in given:
                given[key] = join(given[key], taint)
            elif kwarg:
                given[kwarg] = frozenset(given[kwarg] | taint)
            else:
                extra |= taint
        key = (id(function.node), id(function.scope), tuple(sorted((k, shape(v)) for k, v in given.items())),
               self.gradients,  # its enclosing scope too: what it stores there is stored again
               self.cell if function.cell is None else None)  # a test module's function counts for each cell
        if key in self._summaries:
            return self._summaries[key] if not extra else frozenset(self._summaries[key] | extra)
        if key in self._active:  # recursion: assume everything it was given
            return frozenset().union(*given.values()) | extra
        self._active.add(key)
        scopes = [*([function.scope] if function.scope is not None else []), dict(given)]
        caller, source = self.cell, self.source
        if function.lines is not None:
            self.source = function.lines
        if isinstance(function.node, ast.Lambda):
            result = self.expr(function.node.body, scopes)
        else:
            result = self.block(function.node.body, scopes, function.cell if function.cell is not None else caller)
        self.cell, self.source = caller, source  # what the caller's later lines find is the caller's
        self._active.discard(key)
        self._summaries[key] = result
        return result if not extra else frozenset(result | extra)

    # ------------------------------------------------------------ statements

    def block(self, body: list, scopes: list, cell: str) -> Taint:
        """Analyse statements; the union of the taints of what `return` statements return."""
        returned = CLEAN
        for statement in body:
            returned = join(returned, self.statement(statement, scopes, cell))
        return returned

    def statement(self, node: ast.stmt, scopes: list, cell: str) -> Taint:
        self.cell = cell
        scope = scopes[-1] if scopes else self.globals
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for default in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
                self.expr(default, scopes)
            scope[node.name] = Function(node, cell, scopes[-1] if scopes else None)
            return CLEAN
        if isinstance(node, ast.ClassDef):
            scope[node.name] = CLEAN  # a test's own class: instances get their arguments' taint
            return CLEAN
        if isinstance(node, ast.ImportFrom) and (node.module in TEST_MODULES or node.module in self.module_texts):  # the course's test code: read it too
            names = self.module(node.module)
            for alias in node.names:
                scope[alias.asname or alias.name] = names.get(alias.name, CLEAN)
            return CLEAN
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                scope[(alias.asname or alias.name).split(".")[0]] = CLEAN
            return CLEAN
        if isinstance(node, ast.Assign):
            taint = self.expr(node.value, scopes)
            if isinstance(node.value, ast.Lambda):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        scope[target.id] = Function(node.value, cell, scopes[-1] if scopes else None)
                return CLEAN
            for target in node.targets:
                self.bind(target, taint, scopes)
            return CLEAN
        if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            taint = self.expr(node.value, scopes)
            if isinstance(node, ast.AugAssign):
                taint |= self.expr(node.target, scopes)
            self.bind(node.target, taint, scopes)
            return CLEAN
        if isinstance(node, ast.Return):
            return self.expr(node.value, scopes)
        if isinstance(node, (ast.For, ast.AsyncFor)):
            iterated = self.items(node.iter, scopes)
            returned = CLEAN
            for _ in range(2):  # twice: what one pass taints reaches the next
                self.bind(node.target, iterated, scopes)
                returned = join(returned, self.block(node.body, scopes, cell))
            return join(returned, self.block(node.orelse, scopes, cell))
        if isinstance(node, ast.While):
            returned = CLEAN
            for _ in range(2):
                self.expr(node.test, scopes)
                returned = join(returned, self.block(node.body, scopes, cell))
            return join(returned, self.block(node.orelse, scopes, cell))
        if isinstance(node, ast.If):
            self.expr(node.test, scopes)
            return join(self.block(node.body, scopes, cell), self.block(node.orelse, scopes, cell))
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                taint = self.expr(item.context_expr, scopes)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, taint, scopes)
            return self.block(node.body, scopes, cell)
        if isinstance(node, ast.Try):
            returned = self.block(node.body, scopes, cell)
            for handler in node.handlers:
                if handler.name:
                    scope[handler.name] = CLEAN
                returned = join(returned, self.block(handler.body, scopes, cell))
            return join(join(returned, self.block(node.orelse, scopes, cell)), self.block(node.finalbody, scopes, cell))
        for child in ast.iter_child_nodes(node):  # Expr, Assert, Raise, Delete, ...
            if isinstance(child, ast.expr):
                self.expr(child, scopes)
        return CLEAN

    def module(self, name: str) -> dict:
        """The names a test module defines: its functions (read when a cell calls them), everything else clean."""
        if name not in self.modules:
            text = self.module_texts.get(name) or (ROOT / (name.replace(".", "/") + ".py")).read_text()
            lines, names = text.splitlines(), {}
            self.lines[name] = lines  # for the markers' reasons
            for node in ast.parse(text).body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names[node.name] = Function(node, None, names, lines)
                elif isinstance(node, ast.ImportFrom) and (node.module in TEST_MODULES or node.module in self.module_texts):
                    other = self.module(node.module)  # a test module's own: the grader's references call the checks
                    names.update({alias.asname or alias.name: other.get(alias.name, CLEAN) for alias in node.names})
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    names.update(dict.fromkeys(((a.asname or a.name).split(".")[0] for a in node.names), CLEAN))
                elif isinstance(node, ast.ClassDef):
                    names[node.name] = CLEAN  # a test's own class: instances get their arguments' taint
                else:
                    for target in getattr(node, "targets", [getattr(node, "target", None)]):
                        for leaf in ast.walk(target) if target is not None else ():
                            if isinstance(leaf, ast.Name):
                                names[leaf.id] = CLEAN  # a constant of the module
            self.modules[name] = names
        return self.modules[name]

    # ------------------------------------------------------------ findings

    def flag(self, node: ast.AST, why: str) -> None:
        where = self.cell if self.source is None else f"{self.cell}, in the test module it calls,"
        finding = Finding(where, node.lineno, self.line(node), why)
        if all((f.cell, f.line, f.why) != (finding.cell, finding.line, finding.why) for f in self.findings):
            self.findings.append(finding)

    def line(self, node: ast.AST) -> str:
        lines = self.source if self.source is not None else self.lines.get(self.cell, [])
        return lines[node.lineno - 1] if 0 < node.lineno <= len(lines) else ""

    def compared(self, node: ast.AST, left: Taint, right: Taint) -> None:
        """A comparison of `left` with `right`: a reference (one side the grader's), a property of one output
        (both sides from the same call: `J` against `J.T`), or two student outputs."""
        if bool(left) != bool(right):
            self.reference(node)
        elif left and len({call for _, call in left | right}) > 1:
            self.pairwise(node, left | right)

    def pairwise(self, node: ast.AST, taint: Taint) -> None:
        lines = self.source if self.source is not None else self.lines.get(self.cell, [])
        span = lines[node.lineno - 1:getattr(node, "end_lineno", node.lineno)]
        if any(marker in text for text in span for marker in MARKERS):
            self.excused.setdefault(self.cell, []).append((node.lineno, lines[node.lineno - 1]))
            return
        self.flag(node, f"both sides derive from the student's {_names(taint)}, from different calls")

    def reference(self, node: ast.AST) -> None:
        self.references[self.cell] = self.references.get(self.cell, 0) + 1


def _parameters(args: ast.arguments) -> list:
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    names += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    return names


def _callee_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _names(taint: Taint) -> str:
    return ", ".join(sorted({student for student, _ in taint}))


def finish(analysis: Analysis) -> Analysis:
    """Add what only the whole cell tells: an excused comparison needs a reference beside it, a marker a reason."""
    # a message-only comparison is excused only in a cell that also compares with a reference
    for gid, lines in analysis.excused.items():
        if not analysis.references.get(gid):
            for line, text in lines:
                analysis.findings.append(Finding(gid, line, text,
                                                 "marked message only or precondition, but the cell compares "
                                                 "nothing with a reference"))
    for gid, lines in analysis.lines.items():  # a marker says why
        for number, text in enumerate(lines, 1):
            for marker in MARKERS:
                if marker in text and not re.search(re.escape(marker) + r"\s*\S{3,}", text):
                    analysis.findings.append(Finding(gid, number, text, f"a `{marker}` marker says why"))
    return analysis


def analyse(assignment: str) -> Analysis:
    """Run the chapter's provided and graded test cells, in order, through the analysis."""
    analysis = Analysis(own_parts=frozenset(OWN_PARTS.get(assignment, {})))
    for cell in source_nb(assignment).cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("locked") or meta.get("solution"):
            continue
        source = cell.source.lstrip()
        if not meta.get("grade") and source.startswith((KERNEL_ONLY, DEMO_ONLY)):
            continue  # it runs in the kernel only: what it defines is the kernel's (the student's side)
        gid = meta.get("grade_id")
        analysis.lines[gid] = cell.source.splitlines()
        analysis.gradients = CLEAN  # a cell's gradients are its own
        analysis.block(ast.parse(cell.source).body, [], gid)
    return finish(analysis)


@pytest.mark.parametrize("assignment", [pytest.param(a, id=a) for a in ASSIGNMENTS])
def test_expected_values_are_the_graders(assignment):
    """No expected value derives from the student's code; no check compares two student outputs to award a point."""
    pending = PENDING.get(assignment, {})
    findings = [f for f in analyse(assignment).findings if f.cell not in pending]
    assert not findings, "\n".join(map(str, findings))


def test_pending_cells_are_still_flagged():
    """Every cell PENDING excuses exists and is still flagged: a fixed cell leaves the list, and the check holds it."""
    for assignment, cells in PENDING.items():
        assert assignment in ASSIGNMENTS
        flagged = {f.cell for f in analyse(assignment).findings}
        assert not set(cells) - flagged, f"{assignment}: no longer flagged, remove from PENDING: {set(cells) - flagged}"


def test_own_parts_are_checked():
    """Every OWN_PARTS helper is defined in a graded cell of its chapter or in a test module it imports, and refuses a
    degenerate part: it (or the functions and classes of its module that it reaches by name) runs the student's part through
    `attempt` and fails the test with 'make the test of ... pass first' where that part gives every input the same
    answer, or does more than rearrange its input."""
    modules = {name: (ROOT / (name.replace(".", "/") + ".py")).read_text() for name in TEST_MODULES}
    for assignment, helpers in OWN_PARTS.items():
        assert assignment in ASSIGNMENTS
        sources = [cell.source for cell in source_nb(assignment).cells
                   if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade")]
        imported = [text for name, text in modules.items() if any(f"from {name} import" in cell for cell in sources)]
        for helper in helpers:
            body = next((ast.get_source_segment(text, node) for text in [*sources, *imported]
                         for node in ast.walk(ast.parse(text))
                         if isinstance(node, ast.FunctionDef) and node.name == helper), None)
            assert body is not None, f"{assignment}: no graded cell or imported test module defines {helper}"
            defined = {node.name: ast.get_source_segment(text, node) for text in imported  # the modules' functions
                       for node in ast.parse(text).body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
            named, grown = {helper}, True  # those the helper names, and those they name, in any module imported
            while grown:
                found = {name for name in defined if re.search(rf"\b{name}\b", body)} - named
                grown = bool(found)
                named |= found
                body += "".join("\n" + defined[name] for name in sorted(found))
            assert "attempt(" in body and "make the test of" in body, body
            assert "same" in body or "does more than rearrange" in body, body


def _analyse_source(cells: list, modules: dict | None = None) -> Analysis:
    """The analysis over cells given as (grade id, source); the first is the provided imports cell. `modules`:
    test modules' sources by name."""
    analysis = Analysis(module_texts=modules or {})
    for gid, source in cells:
        analysis.lines[gid] = source.splitlines()
        analysis.gradients = CLEAN
        analysis.block(ast.parse(source).body, [], gid)
    return finish(analysis)


PAIR = "def pair(n):\n    return M(n), torch.nn.Linear(n, n)\n"  # the student's block and the grader's layer
IMPORTS = ("imports", "import torch\nfrom course import attempt, check_close, matches, check_true\n"
           "from nboracle.kernel import draw_parameters\nx, y = torch.ones(3), torch.zeros(3)\n")


@pytest.mark.parametrize("source, flagged", [
    ("out = f(x)\ncheck_close('f', out, torch.zeros(3))", False),  # a reference
    ("check_close('f', f(x), f(y))", True),  # student against student
    ("a = f(x)\nb = g(x)\ncheck_true(torch.allclose(a, b), 'm')", True),
    ("a = f(x)\ncheck_true(a == f(x), 'm')", True),
    ("m = M(3)\np = draw_parameters(m, torch.Generator())\ncheck_close('m', m(x), p['w'] * 2)", False),
    ("def ref(v):\n    return v * 2\ncheck_close('f', f(x), ref(x))", False),
    ("def run(m):\n    return m(x)\ncheck_close('f', f(x), run(M()))", True),
    ("outs = []\nfor t in range(2):\n    outs.append(f(t))\ncheck_close('f', outs[0], outs[1])", True),
    ("a, b = f(x), torch.ones(2)\ncheck_close('f', a, b)", False),
    ("m = M(2)\ncheck_close('m', m(x), m(y))", True),  # two outputs of one object
    ("a = attempt('f', f, x)\nb = attempt('f', f, y)\ncheck_close('f', a, b)", True),
    ("j = f(x)\ncheck_true(torch.allclose(j, j.T), 'm')", False),  # a property of one output
    ("s = f(x)\ncheck_true(s['a'] < s['b'], 'm')", False),  # an order, not a reference
    ("a, b = f(x), g(x)\nif not matches(a, b):  # message only: names the mistake before the reference check\n"
     "    check_true(False, 'm')\ncheck_close('f', a, torch.ones(2))", False),
    ("a, b = f(x), g(x)\ncheck_true(matches(a, b), 'm')  # message only: but no reference", True),
    ("check_true(f(x).shape == f(y).shape, 'm')  # precondition: one layout for any input\n"
     "check_close('f', f(x), torch.ones(2))", False),
    ("check_true(f(x).shape == f(y).shape, 'm')  # precondition: but no reference", True),
    ("check_true(f(x).shape == f(y).shape, 'm')  # precondition:\ncheck_close('f', f(x), y)", True),
    ("from nboracle import probed_points\nfor point, out in probed_points(M(2)):\n    check_close('m', out, torch.nn.Linear(2, 2)(point['w']))",
     False),  # the probed point is the grader's choice, the output the student's
    ("from nboracle import probed_points\nfor point, out in probed_points(M(2)):\n    check_close('m', out, M(2)(point['w']))", True),
    # a tuple's items keep their own taints, through a helper's `return a, b` too
    (PAIR + "block, layer = pair(2)\ncheck_close('m', block(x), layer(x))", False),  # the grader's item stays clean
    (PAIR + "block, layer = pair(2)\ncheck_close('m', M(2)(x), block(x))", True),  # the student's stays tainted
    (PAIR + "both = pair(2)\ncheck_close('m', M(2)(x), both)", True),  # a tuple used whole: the union
    (PAIR + "check_close('m', M(2)(x), pair(2)[1](x))", False),  # an item read by its index
    (PAIR + "check_close('m', M(2)(x), pair(2)[0](x))", True),
    (PAIR + "def judge(block, layer, v):\n    check_close('m', block(v), layer(x))\njudge(*pair(2), f(x))",
     False),  # `*pair(2)` fills two parameters, `f(x)` the third
    (PAIR + "def judge(layer, block):\n    check_close('m', block(x), layer(x))\njudge(*pair(2))", True),
    ("def pick(c):\n    if c:\n        return f(x), torch.ones(3)\n    return g(x), torch.zeros(3)\n"
     "out, want = pick(True)\ncheck_close('f', out, want)", False),  # every return a pair: item by item
    ("outs = (f(x), f(y))\nfor out, want in zip(outs, (torch.ones(3), torch.zeros(3))):\n"
     "    check_close('f', out, want)", False),  # zip's items, one of each
    ("outs = (f(x), f(y))\nfor out, other in zip(outs, outs[::-1]):\n    check_close('f', out, other)", True),
    ("for what, out, want in (('x', f(x), torch.ones(3)), ('y', f(y), torch.zeros(3))):\n"
     "    check_close(what, out, want)", False),  # a literal of tuples: column by column
    ("a, b = (f(t) for t in (x, y))\ncheck_true(torch.allclose(a, b), 'm')", True),  # one call, many outputs
    # a backward pass leaves its taint in the gradients
    ("ref = torch.nn.Linear(3, 3)\n(ref(x) * f(x)).sum().backward()\ncheck_close('g', g(x), ref.weight.grad)", True),
    ("ref = torch.nn.Linear(3, 3)\n(ref(x) * y).sum().backward()\ncheck_close('g', g(x), ref.weight.grad)", False),
    # a container a nested function fills is the enclosing function's
    ("def run():\n    got = {}\n    def keep(k):\n        got[k] = f(x)\n    keep('a')\n"
     "    check_close('f', f(y), got['a'])\nrun()", True),
])
def test_the_analysis_flags_student_references(source, flagged):
    analysis = _analyse_source([IMPORTS, ("test", source)])
    assert bool(analysis.findings) == flagged, analysis.findings


CHECKS = ("import torch\nfrom course.checks import attempt, check_close\nLIMIT = 1e-5\n\n\n"
          "def check_f(f, x):\n    check_close('f', attempt('f', f, x), torch.ones(3), atol=LIMIT)\n\n\n"
          "def check_against_itself(f, x):\n    check_close('f', f(x), f(x + 1))\n\n\n"
          "def excused(f, x):\n    check_close('f', f(x), f(x + 1))  # message only: names the mistake\n")


@pytest.mark.parametrize("source, flagged", [
    ("from chapter_checks import check_f\ncheck_f(f, x)", False),
    ("from chapter_checks import check_against_itself\ncheck_against_itself(f, x)", True),
    ("from chapter_checks import check_f as judge\njudge(f, x)", False),
    # a message-only comparison in the module counts for the cell that calls it, which needs a reference too
    ("from chapter_checks import excused\nexcused(f, x)", True),
    ("from chapter_checks import excused, check_f\nexcused(f, x)\ncheck_f(f, x)", False),
])
def test_the_analysis_reads_the_test_modules_a_cell_imports(source, flagged):
    """A check a test cell imports from the course's test code is analysed as if the cell held it."""
    analysis = _analyse_source([IMPORTS, ("test", source)], {"chapter_checks": CHECKS})
    assert bool(analysis.findings) == flagged, analysis.findings
    if flagged:
        assert all(f.cell.startswith("test") for f in analysis.findings), analysis.findings


def test_the_chapters_test_modules_are_read():
    """Every test module nbgrader_config.py names exists, and the cells that import from it compare with references
    through it (chapter 09's checks: each of its Part A and B test cells holds references)."""
    assert TEST_MODULES, "nbgrader_config.py names no c.OracleExecute.test_modules"
    for name in TEST_MODULES:
        assert (ROOT / (name.replace(".", "/") + ".py")).is_file(), name
    analysis = analyse("09_decoder")
    assert "course.decoder_checks" in analysis.modules
    for cell in ("test_cross_attention_shapes", "test_cross_attention_padding", "test_decoder_modules",
                 "test_decoder_causal", "test_decoder_sees_all_memory", "test_decoder_memory_padding",
                 "test_model_masks", "test_model_block_weights"):
        assert analysis.references.get(cell), f"{cell}: no reference comparison found through the module"
