"""A static scan of what a student typed, for things no exercise of a course needs.

``scan_notebook(nb)`` reads the student's code cells only (solution cells and cells the
student added; test cells and locked cells are the instructor's) with Python's ``ast`` and
returns one reason per finding, for example ``"cell 7 (softmax): uses sys.settrace (the
kernel's execution machinery)"``. It looks for

* the kernel's execution machinery: ``get_ipython``, input/AST transformers, events,
  ``set_custom_exc``, ``showtraceback``, ``sys.settrace``/``setprofile``/``excepthook``,
  ``builtins``, frames and closures, ``gc.get_referrers``, ``ctypes``, ...;
* replacing attributes of modules (``np.allclose = ...``, ``setattr(course, ...)``);
* rebinding a name that a locked cell binds (:func:`locked_rebindings`: ``check_close = ...``,
  ``F = ...``, ``def pytorch_twin(...)``; importing the same thing again is fine);
* the gradebook, other processes and the network (``subprocess``, ``os.fork``, ``socket``,
  shell escapes ``!cmd``);
* paths outside the notebook's folder (absolute paths, ``..``, ``~``);
* given the assignment's table of substitutes, a library entry point doing an exercise's work
  (:func:`library_findings`: ``F.scaled_dot_product_attention`` as the body of an exercise that
  asks for attention; the table is the course's, ``c.ReviewFlags.substitutes``).

``refusals(nb)`` reads error outputs for what an OS sandbox says when it refuses something
(``PermissionError``, a read-only file system, an unreachable network, a missing file
outside the folder).

A finding only marks the submission for review (see ``nboracle.grader.nbgrader_ext.ReviewFlags``);
it never changes a score. A course checks that its own solutions and released notebooks
produce none.
"""

from __future__ import annotations

import ast
import copy
import functools
import re
import sys
from typing import Any

MACHINERY = "the kernel's execution machinery"

_DYNAMIC = "exec/eval/compile (running code built at run time)"
# bare names -> why they are suspicious
NAMES = {
    "get_ipython": MACHINERY, "InteractiveShell": MACHINERY, "__import__": MACHINERY, "__builtins__": MACHINERY,
    "exec": _DYNAMIC, "eval": _DYNAMIC, "compile": _DYNAMIC,
}
# attributes (and names imported with ``from x import name``) -> why they are suspicious
ATTRS = {
    "get_ipython": MACHINERY, "InteractiveShell": MACHINERY, "input_transformers_cleanup": MACHINERY,
    "input_transformers_post": MACHINERY, "input_transformer_manager": MACHINERY,
    "line_transforms": MACHINERY, "cleanup_transforms": MACHINERY, "token_transformers": MACHINERY,
    "ast_transformers": MACHINERY, "set_custom_exc": MACHINERY, "CustomTB": MACHINERY,
    "custom_exceptions": MACHINERY, "showtraceback": MACHINERY, "_showtraceback": MACHINERY,
    "showsyntaxerror": MACHINERY, "events": MACHINERY, "register_magic_function": MACHINERY,
    "settrace": MACHINERY, "setprofile": MACHINERY, "gettrace": MACHINERY, "excepthook": MACHINERY,
    "displayhook": MACHINERY, "addaudithook": MACHINERY, "_getframe": MACHINERY, "currentframe": MACHINERY,
    "f_trace": MACHINERY, "f_lineno": MACHINERY, "f_back": MACHINERY, "f_globals": MACHINERY,
    "f_locals": MACHINERY, "f_builtins": MACHINERY, "tb_frame": MACHINERY, "__closure__": MACHINERY,
    "cell_contents": MACHINERY, "__code__": MACHINERY, "__globals__": MACHINERY, "__builtins__": MACHINERY,
    "__subclasses__": MACHINERY, "__import__": MACHINERY, "get_referrers": MACHINERY,
    "get_referents": MACHINERY, "get_objects": MACHINERY,
    # a tensor's count of in-place writes: no exercise needs it, and a module that reads it learns that its
    # weights were written since it was built (a load, a training step, a test's drawn weights)
    "_version": MACHINERY,
    "fork": "other processes", "forkpty": "other processes", "system": "other processes",
    "popen": "other processes", "spawnv": "other processes", "spawnl": "other processes",
    "execv": "other processes", "execve": "other processes", "execvp": "other processes", "kill": "other processes",
    "chdir": "paths outside the notebook's folder", "expanduser": "paths outside the notebook's folder",
    "home": "paths outside the notebook's folder",
}
MODULES = {
    "builtins": MACHINERY, "IPython": MACHINERY, "ipykernel": MACHINERY, "gc": MACHINERY,
    "ctypes": MACHINERY, "inspect": MACHINERY, "traceback": MACHINERY, "importlib": MACHINERY,
    "signal": MACHINERY, "threading": "other processes or threads",
    "_thread": "other processes or threads", "subprocess": "other processes", "multiprocessing": "other processes",
    "pty": "other processes", "socket": "the network", "urllib": "the network", "http": "the network",
    "requests": "the network", "ftplib": "the network", "smtplib": "the network", "ssl": "the network",
    "sqlite3": "the gradebook", "nbgrader": "the gradebook", "sqlalchemy": "the gradebook",
    "shutil": "files outside the notebook",
}
# Honest notebook habits, never flagged: timing, plotting, printing, listing names, reloading edited
# modules, capturing a cell's output. ``%load_ext`` is allowed for ``autoreload`` only (an extension
# is arbitrary code); ``%xmode``, ``%debug``, ``%pdb`` and the rest stay flagged.
ALLOWED_MAGICS = {"time", "timeit", "matplotlib", "config", "precision", "pprint", "who", "whos", "who_ls",
                  "autoreload", "capture"}
ALLOWED_EXTENSIONS = {"autoreload"}
# IPython's rich display (``from IPython.display import display, Math, Markdown``): how notebooks show
# formulas, tables and images; the kernel's machinery lives elsewhere in IPython and stays flagged.
DISPLAY_MODULES = {"IPython.display", "IPython.core.display"}
# Modules of the kernel's machinery with a few plain functions honest notebooks use: importing
# them is not a finding; every other use of the module (``gc.get_objects``, ``inspect.stack``,
# ``traceback.print_stack``, ``getattr(gc, ...)``, handing the module around) is, and then so is the import.
PLAIN_FUNCTIONS = {
    "gc": {"collect", "isenabled"},
    "traceback": {"print_exc", "format_exc", "print_exception", "format_exception", "format_exception_only"},
    "inspect": {"signature", "Signature", "Parameter", "getdoc", "cleandoc", "isclass", "isfunction", "ismethod",
                "isroutine"},
}
# an absolute path is a finding, except under /tmp (the sandbox's private tmpfs: plt.savefig("/tmp/x.png"));
# ``..`` anywhere (``/tmp/../etc``) still is
PATH = re.compile(r"^(?:/(?!tmp/)[A-Za-z0-9_.~-]|~[/A-Za-z]|[A-Za-z]:\\)|(?:^|[/\\])\.\.(?:[/\\]|$)")
GRADEBOOK = re.compile(r"gradebook|\.db\b|\.sqlite", re.IGNORECASE)


def student_cells(nb: Any) -> list[tuple[int, str, str]]:
    """``(index, label, source)`` of the code cells a student wrote: solution cells and added cells."""
    cells = []
    for index, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code":
            continue
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution"):
            cells.append((index, meta.get("grade_id", "solution"), cell.source))
        elif not (meta.get("grade") or meta.get("locked") or meta.get("task")):
            cells.append((index, meta.get("grade_id") or "a cell the student can edit", cell.source))
    return cells


@functools.lru_cache(maxsize=512)
def _parse(code: str) -> ast.Module:
    """``ast.parse(code)``, once per distinct source in this process (the 512 last used, so that a long batch
    holds a chapter's worth of trees, not a class's): the locked and test cells are the same in every student's
    notebook. The trees are shared, so the scan only reads them (``_same_code`` changes a copy)."""
    return ast.parse(code)


def _per_node(cache: dict, node: ast.AST, compute) -> tuple:
    """``compute(node)``, once per node while ``cache`` holds it (at most 20,000 nodes, then it starts over). The
    cache keeps the node beside its answer, so its id is not reused by another node while the answer is there."""
    cached = cache.get(id(node))
    if cached is None or cached[0] is not node:
        if len(cache) >= 20000:
            cache.clear()
        cached = cache[id(node)] = (node, compute(node))
    return cached[1]


_WALKS: dict[int, tuple[ast.AST, tuple]] = {}  # id(node) -> (the node, every node under it, ast.walk's order)


def _walk(node: ast.AST) -> tuple:
    """``tuple(ast.walk(node))``, once per node: the scan's lookups walk the same (shared, :func:`_parse`)
    trees again and again."""
    return _per_node(_WALKS, node, lambda n: tuple(ast.walk(n)))


def _magics(source: str) -> tuple[str, list[str]]:
    """The source with IPython magics and shell escapes blanked out, and what they were."""
    found, lines = [], []
    for line in source.splitlines():
        stripped = line.lstrip()
        indent = line[: len(line) - len(stripped)]
        escape = re.match(r"^(?:[A-Za-z_][A-Za-z0-9_, ]*=\s*)?([!%]{1,2})\s*([A-Za-z_]*)(.*)$", stripped)
        if escape:
            kind, name, rest = escape.groups()
            if "!" in kind or name in ("system", "sx", "bash", "sh", "script", "writefile", "run", "load"):
                found.append(f"runs a shell command or script ({stripped[:40]})")
            elif name == "load_ext" and set(rest.split()) <= ALLOWED_EXTENSIONS and rest.split():
                pass
            elif name not in ALLOWED_MAGICS:
                found.append(f"uses the IPython magic {kind}{name} ({MACHINERY})")
            lines.append(indent + "pass")
        else:
            lines.append(line)
    return "\n".join(lines), found


def _root(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def plain_module_names(tree: ast.AST) -> dict[str, str]:
    """``{name: module}`` for the names ``import gc``, ``import inspect as ins`` bind (PLAIN_FUNCTIONS)."""
    names = {}
    for node in _walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in PLAIN_FUNCTIONS:
                    names[alias.asname or alias.name] = alias.name
    return names


def _other_uses(tree: ast.AST, names: dict[str, str]) -> list[tuple[str, str]]:
    """``(module, what)`` for each use of a PLAIN_FUNCTIONS module other than one of its plain functions."""
    parents = {child: node for node in _walk(tree) for child in ast.iter_child_nodes(node)}
    uses = []
    for node in _walk(tree):
        if isinstance(node, ast.Name) and node.id in names and isinstance(node.ctx, ast.Load):
            module, parent = names[node.id], parents.get(node)
            if isinstance(parent, ast.Attribute) and parent.value is node:
                if parent.attr not in PLAIN_FUNCTIONS[module]:
                    uses.append((module, f"{module}.{parent.attr}"))
            else:
                uses.append((module, f"the module {module} itself"))
    return uses


def scan_source(source: str, modules: set[str] | frozenset[str] = frozenset(),
                plain_names: dict[str, str] | None = None, machinery: tuple[str, ...] = ()) -> list[str]:
    """Findings in one cell's source; ``modules`` are names bound to modules in the notebook,
    ``plain_names`` the names bound to a PLAIN_FUNCTIONS module anywhere in it (``gc``, ``ins``),
    ``machinery`` more modules of the kernel's machinery (a course's kernel guard)."""
    code, found = _magics(source)
    try:
        tree = _parse(code)
    except SyntaxError:
        return found  # it cannot run either (a transformer that would make it run is found elsewhere)
    plain_names = {**(plain_names or {}), **plain_module_names(tree)}
    other_uses = _other_uses(tree, plain_names)
    misused = {module for module, _ in other_uses}
    found += [f"uses {what} ({MACHINERY})" for _, what in other_uses if what.rpartition(".")[2] not in ATTRS]
    modules = set(modules) | {"np", "numpy", "torch", "F", "nn", "math", "course", "checks", "sys", "os",
                              "builtins", "plt", "matplotlib", "IPython"}
    for node in _walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if isinstance(node, ast.ImportFrom) and node.module == "IPython" \
                    and all(alias.name == "display" for alias in node.names):
                names = ["IPython.display"]  # from IPython import display
            for name in names:
                if name in DISPLAY_MODULES:
                    continue
                if name in PLAIN_FUNCTIONS:  # import gc, from inspect import signature: their plain functions only
                    imported = {alias.name for alias in node.names} if isinstance(node, ast.ImportFrom) else set()
                    if name not in misused and imported <= PLAIN_FUNCTIONS[name]:
                        continue
                for module, why in [*MODULES.items(), *((extra, MACHINERY) for extra in machinery)]:
                    if name == module or name.startswith(module + "."):
                        found.append(f"imports {name} ({why})")
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    why = NAMES.get(alias.name) or ATTRS.get(alias.name)
                    if why:
                        found.append(f"imports {alias.name} ({why})")
        elif isinstance(node, ast.Name) and node.id in NAMES:
            found.append(f"uses {node.id} ({NAMES[node.id]})")
        elif isinstance(node, ast.Attribute) and node.attr in ATTRS:
            found.append(f"uses .{node.attr} ({ATTRS[node.attr]})")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if GRADEBOOK.search(text):
                found.append(f"mentions {text[:60]!r} (the gradebook)")
            elif len(text) < 300 and PATH.search(text):
                found.append(f"names the path {text[:60]!r} (outside the notebook's folder)")
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                for part in _walk(target):
                    if isinstance(part, ast.Attribute) and _root(part) in modules:
                        found.append(f"replaces {ast.unparse(part)} (an attribute of a module)")
                    elif isinstance(part, ast.Subscript) and isinstance(part.value, ast.Call) \
                            and _root(part.value) in ("globals", "vars"):
                        found.append(f"writes {ast.unparse(part.value)}[...] (the notebook's names)")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _namespace_call(node.func.value) \
                and node.func.attr in _MUTATORS | {"pop", "popitem", "clear", "__delitem__"}:
            found.append(f"calls {ast.unparse(node.func)}(...) (writes the notebook's names)")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("setattr", "delattr") and node.args \
                and (_root(node.args[0]) in modules or not isinstance(node.args[0], ast.Name)):
            found.append(f"calls {node.func.id}({ast.unparse(node.args[0])}, ...) (replacing what a module holds)")
    return found


def _code_trees(nb: Any) -> list[ast.AST]:
    """The syntax tree of every code cell of the notebook that parses (test and locked cells too)."""
    trees = []
    for cell in nb.cells:
        if cell.get("cell_type") == "code":
            try:
                trees.append(_parse(_magics(cell.source)[0]))
            except SyntaxError:
                continue
    return trees


def notebook_modules(nb: Any, trees: list[ast.AST] | None = None) -> set[str]:
    """Names bound by import statements anywhere in the notebook (test and locked cells too)."""
    names = set()
    for tree in _code_trees(nb) if trees is None else trees:
        for node in _walk(tree):
            if isinstance(node, ast.Import):
                names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                names.update(alias.asname or alias.name for alias in node.names
                             if alias.name[:1].islower() and "." not in alias.name and alias.name != "*")
    return names


def scan_notebook(nb: Any, exercises: dict[str, tuple[str, ...]] | None = None,
                 helper_attributes: set[str] | frozenset[str] = frozenset(),
                 machinery: tuple[str, ...] = (), allowed: dict[str, Any] | None = None) -> list[tuple[int, str]]:
    """``(cell index, reason)`` for every finding in the student's cells, in order, without repeats.

    With ``exercises`` (the substitutes of the assignment the grader grades, never the notebook's
    word: ``{name an exercise defines: entry points}``), the library entry points that would do
    one of its exercises' work are findings too (:func:`library_findings`; ``helper_attributes``: attributes
    that continue an entry point without using its work). With ``allowed`` (the calls each exercise's
    text permits, :func:`allowed_call_findings`), every other call an exercise's definition makes is one."""
    trees = _code_trees(nb)  # parsed once for all notebook-wide lookups
    modules = notebook_modules(nb, trees)
    plain_names = {name: module for tree in trees for name, module in plain_module_names(tree).items()}
    library: dict[int, list[str]] = {}
    substituted = set()  # exercises a library entry point already does: under review as a whole, one reason
    for index, finding in library_findings(nb, exercises or {}, trees, helper_attributes):
        library.setdefault(index, []).append(finding)
        substituted.add(finding.split(" ", 1)[0])
    for index, finding in locked_rebindings(nb):
        library.setdefault(index, []).append(finding)
    for index, finding in allowed_call_findings(nb, allowed or {}, trees, exercises, helper_attributes, substituted):
        library.setdefault(index, []).append(finding)
    out: list[tuple[int, str]] = []
    for index, label, source in student_cells(nb):
        seen = set()
        for finding in scan_source(source, modules, plain_names, tuple(machinery)) + library.get(index, []):
            if finding not in seen:
                seen.add(finding)
                out.append((index, f"cell {index} ({label}): {finding}"))
    return out


def _bound_names(body: list[ast.stmt]):
    """``(name, what it is bound to)`` for every name a cell binds at module level (not inside a
    def or class): the dotted source of an import, else None (a definition or an assignment)."""
    for name, stmt in _top_bindings(body):
        if isinstance(stmt, ast.Import):
            yield name, next((a.name if a.asname else a.name.split(".")[0]) for a in stmt.names
                             if (a.asname or a.name.split(".")[0]) == name)
        elif isinstance(stmt, ast.ImportFrom):
            yield name, next(f"{'.' * stmt.level}{stmt.module}.{a.name}" for a in stmt.names if (a.asname or a.name) == name)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield name, None
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            if any(isinstance(part, ast.Name) and part.id == name and isinstance(part.ctx, ast.Store)
                   for target in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])
                   for part in _walk(target)) or any(
                    isinstance(part, ast.Subscript) and _namespace_call(part.value) and _fold(part.slice) == name
                    for target in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])
                    for part in _walk(target)):
                yield name, None  # (``Block.forward = f`` replaces an attribute: scan_source says so)
        elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)) or name in _walrus_names(stmt) \
                or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and _root(stmt.value.func) != name):
            yield name, None  # a for or with target, :=, globals().update, setattr(module, "name", ...)


def _same_code(a: ast.AST, b: ast.AST) -> bool:
    """Two definitions that do the same thing as written: equal syntax trees once docstrings are left out."""
    def plain(node: ast.AST) -> str:
        node = copy.deepcopy(node)
        for part in ast.walk(node):  # (a copy of its own, changed here: never cached)
            body = getattr(part, "body", None)
            if isinstance(part, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body \
                    and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                part.body = body[1:] or [ast.Pass()]
        return ast.dump(node, annotate_fields=False)

    return plain(a) == plain(b)


def _reads(tree: ast.AST) -> set[str]:
    """The names a cell reads (any scope): what of the notebook's names its code may use."""
    return {node.id for node in _walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}


def locked_rebindings(nb: Any) -> list[tuple[int, str]]:
    """``(cell index, finding)`` for each name a student cell rebinds that a locked cell binds:
    the imports cell's modules and checks (``check_close = lambda *a: None``, ``F = ...``) and
    the chapter's provided helpers (``def pytorch_twin(...)``). Under the oracle the tests use
    the grader's own names, so this costs no points; it is a reason for review. It is what an
    earlier in-kernel guard alone used to flag ("the notebook name 'check_close'",
    the attack ``shadowed-names`` of tests/test_oracle_attacks.py), found before the notebook runs.

    Only a rebinding that can change what the instructor's code does is a finding: one that a
    later locked or test cell reads before a locked cell binds the name again. The same import
    again, or an identical copy of a provided definition, changes nothing; nor does a debugging
    helper that happens to share a provided name and is bound again by the locked cell after it.
    """
    students = {index for index, _, _ in student_cells(nb)}
    locked: dict[str, set] = {}  # name -> import sources a locked cell binds it to
    provided: dict[str, list] = {}  # name -> the locked cells' definitions of it
    order = []  # (index, is the student's, tree), in the notebook's order
    for index, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code":
            continue
        meta = cell.get("metadata", {}).get("nbgrader", {})
        mine = index in students
        if not mine and not (meta.get("locked") or meta.get("grade")):  # a test cell is locked (nbgrader)
            continue
        try:
            tree = _parse(_magics(cell.source)[0])
        except SyntaxError:
            continue
        order.append((index, mine, tree))
        if not mine:
            for name, stmt in _top_bindings(tree.body):  # imports, definitions: not the demos' variables
                if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    locked.setdefault(name, set()).update(src for n, src in _bound_names([stmt]) if n == name)
                    provided.setdefault(name, []).append(stmt)
    found: dict[tuple[int, str], str] = {}
    current: dict[str, int] = {}  # name -> the student cell whose binding of it holds now
    for index, mine, tree in order:
        if mine:
            definitions = {stmt.name: stmt for stmt in tree.body
                           if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
            for name, bound_to in _bound_names(tree.body):
                if name not in locked or (bound_to is not None and bound_to in locked[name]):
                    continue
                if name in definitions and any(_same_code(definitions[name], p) for p in provided.get(name, ())):
                    continue  # an identical copy of the provided definition
                current[name] = index
            continue
        for name in _reads(tree) & set(current):
            found.setdefault((current[name], name),
                             f"rebinds {name}, a name a locked cell binds (the notebook's tests and tools)")
        for name, _ in _bound_names(tree.body):
            current.pop(name, None)
    return sorted(found.items(), key=lambda item: item[0][0]) and [(index, reason) for (index, _), reason in
                                                                   sorted(found.items(), key=lambda item: item[0])]


# ---------------------------------------------------------------- library entry points doing an exercise's work

# A finding is one of these sentences (``str.format`` templates), never words glued around a value: a
# course's message catalog (nboracle.grader.messages) translates a reason template by template.
LIBRARY_FINDING = {"calls": "{exercise} calls {hit}", "uses": "{exercise} uses {hit}",
                   "imports": "{exercise} imports {hit}", "looks up": "{exercise} looks up {hit}",
                   "names": "{exercise} names {hit}"}
IN_HELPER = "{finding} (in {helper}, cell {where})"
LIBRARY_REASON = "{finding}, which does this exercise's work (review: correct, but is it the student's?)"
DYNAMIC_REASON = "{finding}, which may do this exercise's work (review: correct, but is it the student's?)"
_DEFAULT_PATHS = {"torch": "torch", "nn": "torch.nn", "F": "torch.nn.functional"}  # the imports cell's names


def _chain(node: ast.AST) -> tuple[str, list[str]] | None:
    """``("F", ["scaled_dot_product_attention"])`` for a chain of names and attributes, else None."""
    attrs = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    return (node.id, attrs[::-1]) if isinstance(node, ast.Name) else None


def _fold(node: ast.AST) -> str | None:
    """The string a constant expression spells (``"Transformer" + "DecoderLayer"``), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _fold(node.left), _fold(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.JoinedStr):
        parts = [_fold(value) for value in node.values]
        return None if None in parts else "".join(parts)
    return None


def _is_method(entry: str) -> bool:
    """``torch.Tensor.softmax``: a method of a class, called on values of that class."""
    parts = entry.split(".")
    return len(parts) >= 3 and parts[-2][:1].isupper()


def _entry_match(path: str, entries: tuple[str, ...], helper_attributes: set[str] | frozenset[str] = frozenset()) -> str | None:
    """The part of ``path`` that reaches one of ``entries`` (same package, same name), else None:
    ``torch.softmax`` for ``torch.nn.functional.softmax``, ``torch.nn.Transformer`` of
    ``torch.nn.Transformer.forward`` but not of its helper ``generate_square_subsequent_mask``."""
    parts = path.split(".")
    for entry in entries:
        top, name = entry.split(".")[0], entry.rsplit(".", 1)[-1]
        if parts[0] != top:
            continue
        for i in range(1, len(parts)):
            if parts[i] == name and not set(parts[i + 1:]) & helper_attributes:
                return ".".join(parts[: i + 1])
    return None


# methods that change a container in place: ``fns.append(F.softmax)`` binds what ``fns[0]`` will be
_MUTATORS = {"append", "extend", "insert", "update", "setdefault", "add", "appendleft", "extendleft", "__setitem__"}


def _stored_names(node: ast.AST):
    """The plain names a target (``a``, ``(a, b)``, ``[*a]``) binds."""
    for part in _walk(node):
        if isinstance(part, ast.Name) and isinstance(part.ctx, ast.Store):
            yield part.id


def _namespace_call(node: ast.AST) -> bool:
    """``globals()`` or ``vars()`` (the notebook's own names)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("globals", "vars") \
        and not node.args


def _walrus_names(stmt: ast.stmt):
    """Names bound by ``(name := ...)`` in a statement, outside the definitions and lambdas it holds."""
    todo = [stmt]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            yield node.target.id
        todo += [child for child in ast.iter_child_nodes(node)
                 if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda))]


_BINDINGS: dict[int, tuple[ast.stmt, tuple]] = {}  # id(statement) -> (the statement, its bindings)


def _top_bindings(body: list[ast.stmt]):
    """``(name, statement)`` for every name a cell binds at module level (not inside a def or
    class): definitions, assignments (``Block.forward = f`` binds ``Block``), imports, setattr,
    ``for`` and ``with ... as`` targets, ``:=``, a container changed in place (``fns.append(f)``),
    ``globals()["name"] = ...`` and ``setattr(module, "name", ...)`` with a name the scan can spell.

    Each statement's are found once (several lookups ask for the same cells, and :func:`_parse` shares the
    trees of the cells every notebook has)."""
    for stmt in body:
        yield from _per_node(_BINDINGS, stmt, lambda s: tuple(_statement_bindings(s)))


def _statement_bindings(stmt: ast.stmt):
    """:func:`_top_bindings` of one statement."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield stmt.name, stmt
        return
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        for target in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
            for part in _walk(target):
                if isinstance(part, ast.Name) and isinstance(part.ctx, ast.Store):
                    yield part.id, stmt
                elif isinstance(part, ast.Subscript) and _namespace_call(part.value) \
                        and (name := _fold(part.slice)) is not None:
                    yield name, stmt  # globals()["MultiHeadSelfAttention"] = ...
                elif isinstance(part, (ast.Attribute, ast.Subscript)) and _root(part):
                    yield _root(part), stmt
    elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
        for alias in stmt.names:
            if alias.name != "*":
                yield alias.asname or alias.name.split(".")[0], stmt
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call, func = stmt.value, stmt.value.func
        if isinstance(func, ast.Name) and func.id == "setattr" and call.args:
            if _root(call.args[0]):
                yield _root(call.args[0]), stmt
            if len(call.args) > 1 and (name := _fold(call.args[1])) is not None:
                yield name, stmt  # setattr(sys.modules[__name__], "name", ...)
        elif isinstance(func, ast.Attribute) and func.attr in _MUTATORS:
            if _namespace_call(func.value):  # globals().update({"name": ...})
                for arg in call.args:
                    for key in arg.keys if isinstance(arg, ast.Dict) else []:
                        if key is not None and (name := _fold(key)) is not None:
                            yield name, stmt
                for keyword in call.keywords:
                    if keyword.arg:
                        yield keyword.arg, stmt
            elif _root(func.value):
                yield _root(func.value), stmt
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        for name in _stored_names(stmt.target):
            yield name, stmt
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        for item in stmt.items:
            for name in _stored_names(item.optional_vars) if item.optional_vars is not None else ():
                yield name, stmt
    for name in _walrus_names(stmt):
        yield name, stmt
    for field in ("body", "orelse", "finalbody", "handlers"):  # if, for, while, with, try
        inner = getattr(stmt, field, None)
        if isinstance(inner, list):
            yield from _top_bindings([s for s in inner if isinstance(s, ast.stmt)]
                                     + [s for h in inner if isinstance(h, ast.ExceptHandler) for s in h.body])


class _Names:
    """What the names of a notebook stand for: modules and library objects bound by imports in
    any cell, and aliases (``sdpa = F.scaled_dot_product_attention``) bound at module level of the
    student's cells."""

    def __init__(self, all_trees: list[ast.AST], student_trees: list[ast.AST]):
        self.paths: dict[str, set[str]] = {}
        self.stars: set[str] = set()  # modules imported with ``from m import *``
        for tree in all_trees:
            for node in _walk(tree):
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        name = alias.asname or alias.name.split(".")[0]
                        self.paths.setdefault(name, set()).add(alias.name if alias.asname else name)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    for alias in node.names:
                        if alias.name == "*":
                            self.stars.add(node.module)
                        else:
                            self.paths.setdefault(alias.asname or alias.name, set()).add(f"{node.module}.{alias.name}")
        for name, path in _DEFAULT_PATHS.items():
            self.paths.setdefault(name, {path})
        aliases = [stmt for tree in student_trees for _, stmt in _top_bindings(tree.body) if isinstance(stmt, ast.Assign)]
        self.paths.update(self._aliases(aliases, {}))

    def _aliases(self, statements: list[ast.Assign], local: dict[str, set[str]]) -> dict[str, set[str]]:
        """``{name: paths}`` bound by ``name = chain`` among ``statements`` (followed until stable)."""
        found: dict[str, set[str]] = {}
        for _ in range(3):
            for stmt in statements:
                if len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                    paths = self.resolve(stmt.value, {**local, **found}, set())
                    if paths:
                        found.setdefault(stmt.targets[0].id, set()).update(paths)
        return found

    def resolve(self, node: ast.AST, local: dict[str, set[str]], stored: set[str], names: set[str] = frozenset()) -> set[str]:
        """The dotted paths a chain may stand for. ``local`` are the aliases of the scope read,
        ``stored`` its other local variables (never a module); a bare name of ``names`` (the
        entry points sought) may come from a star import."""
        chain = _chain(node)
        if chain is None:
            return set()
        root, attrs = chain
        if root in local:
            bases = local[root]
        elif root in stored:
            return set()
        elif root in self.paths:
            bases = self.paths[root]
        elif root in names:
            bases = {f"{module}.{root}" for module in self.stars}
        else:
            return set()
        return {".".join([base, *attrs]) for base in bases}


def _local_names(scope: ast.AST) -> set[str]:
    """Parameters and variables a definition assigns inside itself (they shadow notebook names)."""
    stored = set()
    for node in _walk(scope):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            stored.add(node.id)
        elif isinstance(node, ast.arg):
            stored.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not scope:
            stored.add(node.name)
    return stored


def _library_uses(scope: ast.AST, entries: tuple[str, ...], names: _Names,
                  helper_attributes: set[str] | frozenset[str] = frozenset()) -> tuple[list[tuple[str, str]], set[str]]:
    """What ``scope`` (one definition) does with ``entries`` (``("calls", "torch.softmax")``), and
    the notebook names it reads (for the helpers it may call)."""
    tops = {entry.split(".")[0] for entry in entries}
    wanted = {entry.rsplit(".", 1)[-1] for entry in entries}
    methods = {entry.rsplit(".", 1)[-1]: entry for entry in entries if _is_method(entry)}
    # a distinctive name (a class, or a name with an underscore) read from any value: the module
    # may come from where no chain leads (``sys.modules["torch.nn"].TransformerDecoderLayer``)
    methods.update({name: entry for entry in entries
                    if (name := entry.rsplit(".", 1)[-1]) not in methods and (name[:1].isupper() or "_" in name)})
    stored = _local_names(scope)
    local = names._aliases([n for n in _walk(scope) if isinstance(n, ast.Assign)], {})
    stored -= set(local)
    parents = {child: node for node in _walk(scope) for child in ast.iter_child_nodes(node)}
    skip: set[int] = set()  # isinstance(x, nn.MultiheadAttention) is no use of its work
    for node in _walk(scope):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("isinstance", "issubclass") and len(node.args) == 2:
            skip.update(id(n) for n in _walk(node.args[1]))
    found: list[tuple[str, str]] = []
    reads: set[str] = set()

    def resolve(node):
        return names.resolve(node, local, stored, wanted)

    for node in _walk(scope):
        if id(node) in skip:
            continue
        parent = parents.get(node)
        verb = "calls" if isinstance(parent, ast.Call) and parent.func is node else "uses"
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in stored:
            reads.add(node.id)
        if isinstance(node, (ast.Name, ast.Attribute)) \
                and not (isinstance(parent, ast.Attribute) and parent.value is node):  # a whole chain
            hits = {hit for path in resolve(node) if (hit := _entry_match(path, entries, helper_attributes))}
            found += [(verb, hit) for hit in sorted(hits)]
        if isinstance(node, ast.Attribute) and node.attr in methods and not resolve(node.value) \
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            entry = methods[node.attr]
            found.append((verb, f".{node.attr} ({entry})" if _is_method(entry) else entry))
        if isinstance(node, (ast.Import, ast.ImportFrom)) and not getattr(node, "level", 0):
            for alias in node.names:
                path = alias.name if isinstance(node, ast.Import) else f"{node.module}.{alias.name}"
                if (hit := _entry_match(path, entries, helper_attributes)):
                    found.append(("imports", hit))
        looked_up = None  # getattr(obj, name), vars(obj)[name], obj.__dict__[name]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
                and len(node.args) >= 2:
            looked_up = node.args[0], node.args[1]
        elif isinstance(node, ast.Subscript):
            value = node.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "vars" \
                    and len(value.args) == 1:
                looked_up = value.args[0], node.slice
            elif isinstance(value, ast.Attribute) and value.attr == "__dict__":
                looked_up = value.value, node.slice
        if looked_up:
            obj, key = looked_up
            skip.update(id(n) for n in _walk(key))
            paths, name = resolve(obj), _fold(key)
            if name is not None:
                hits = {hit for path in paths if (hit := _entry_match(f"{path}.{name}", entries, helper_attributes))}
                if not paths and name in wanted:
                    hits = {entry for entry in entries if entry.rsplit(".", 1)[-1] == name}
                found += [("uses", hit) for hit in sorted(hits)]
            elif any(path.split(".")[0] in tops for path in paths):
                module = sorted(paths)[0]
                found.append(("looks up", f"an attribute of {module} by a name computed at run time "
                                          f"({ast.unparse(node)[:60]})"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in wanted:
            entry = next(entry for entry in entries if entry.rsplit(".", 1)[-1] == node.value)
            found.append(("names", f"{node.value!r} ({entry})"))
    return found, reads


def _student_trees(nb: Any) -> list[tuple[int, ast.AST]]:
    """``(cell index, syntax tree)`` of every student cell that parses."""
    cells = []
    for index, _, source in student_cells(nb):
        try:
            cells.append((index, _parse(_magics(source)[0])))
        except SyntaxError:
            continue
    return cells


def library_findings(nb: Any, exercises: dict[str, tuple[str, ...]], trees: list[ast.AST] | None = None,
                     helper_attributes: set[str] | frozenset[str] = frozenset()) -> list[tuple[int, str]]:
    """``(cell index, finding)`` for every student cell that defines one of ``exercises``' names
    (``{"MultiHeadSelfAttention": ("torch.nn.functional.scaled_dot_product_attention", ...)}``)
    with code that reaches one of its entry points: in the definition itself, or in a function,
    class or alias the student defined at module level of any of their cells and the definition
    reads. Only the definitions are read: a student's cell that compares their block with
    ``nn.MultiheadAttention`` is checking their work, not handing in the library's.
    """
    if not exercises:
        return []
    cells = _student_trees(nb)
    names = _Names(_code_trees(nb) if trees is None else trees, [tree for _, tree in cells])
    helpers: dict[str, list[tuple[int, ast.AST]]] = {}
    definitions: list[tuple[int, str, ast.AST]] = []
    for index, tree in cells:
        for name, stmt in _top_bindings(tree.body):
            if name in exercises:
                definitions.append((index, name, stmt))
            elif not isinstance(stmt, (ast.Import, ast.ImportFrom)):
                helpers.setdefault(name, []).append((index, stmt))
    out: list[tuple[int, str]] = []
    for index, exercise, stmt in definitions:
        entries = exercises[exercise]
        found, reads = _library_uses(stmt, entries, names, helper_attributes)
        findings: dict[str, tuple[str, str]] = {}  # each entry point once per definition, at its first use: (verb, said)
        for verb, hit in found:
            findings.setdefault(hit, (verb, LIBRARY_FINDING[verb].format(exercise=exercise, hit=hit)))
        queue, seen = sorted(reads & set(helpers)), set()
        while queue:
            helper = queue.pop(0)
            if helper in seen:
                continue
            seen.add(helper)
            for where, node in helpers[helper]:
                used, more = _library_uses(node, entries, names, helper_attributes)
                for verb, hit in used:
                    findings.setdefault(hit, (verb, IN_HELPER.format(
                        finding=LIBRARY_FINDING[verb].format(exercise=exercise, hit=hit), helper=helper, where=where)))
                queue += sorted(more & set(helpers) - seen)
        for verb, finding in findings.values():
            out.append((index, (DYNAMIC_REASON if verb == "looks up" else LIBRARY_REASON).format(finding=finding)))
    return out


# ---------------------------------------------------------------- review by allow-list
#
# Where an exercise is to write a computation by hand, the instructor lists the calls its text
# permits (``c.ReviewFlags.allowed_calls``: ``{assignment: {name the exercise defines: entries}}``).
# An entry is a library callable by its dotted path (``numpy.exp``, ``torch.nn.Linear``: it stands
# for every path of the same package ending in the same name, ``torch.nn.functional.relu`` for
# ``torch.relu``), a method by ``.name`` (``.transpose``, called on any value), or a builtin by its
# bare name (``len``). Every other call the definition makes, or a helper of the student's it reaches
# makes, is a finding with its line, whatever library it comes from: ``torch.softmin``,
# ``torch.distributions.Categorical``, ``torch.func.jvp``, a method ``.softmax``, a function of the
# grader's package. Calls of the student's own functions and classes, of the notebook's provided
# ones and of the definition's own arguments are not; a library callable handed around without a
# call (``fns = [torch.softmin]``) counts as a call.

ALLOWED_REASON = ("line {line}: {exercise} {what}, which its exercise does not list among the calls it allows "
                  "(review: is it the student's work?)")
ALLOWED_REASON_IN = ("line {line}: {exercise} {what} (in {helper}), which its exercise does not list among the calls "
                     "it allows (review: is it the student's work?)")
UNLISTED = {"uses": "uses {path}", "calls": "calls {path}", "builds on": "builds on {path}"}


_MISSING = object()


def _library_object(path: str) -> Any:
    """What ``path`` names among the modules the grader has loaded (``torch.nn.functional.softmin``), or
    :data:`_MISSING` when it cannot be found (then it counts as a callable). Nothing is imported: a
    student's text never makes the grader import a module."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        value: Any = sys.modules.get(".".join(parts[:cut]))
        if value is None:
            continue
        try:
            for part in parts[cut:]:
                value = getattr(value, part)
        except Exception:
            return _MISSING
        return value
    return _MISSING


def _is_data(path: str) -> bool:
    """A library name that is data, not a computation: ``torch.float64``, ``np.pi``, ``np.float32``
    as a dtype, a module."""
    import types as stdlib_types

    value = _library_object(path)
    if value is _MISSING:
        return False
    if isinstance(value, stdlib_types.ModuleType) or not callable(value):
        return True
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, type) and issubclass(value, numpy.generic)


def _allowed(path: str, entries: frozenset[str]) -> bool:
    """``path`` (a library path, ``.method`` or a builtin) is one of ``entries`` (same package, same name)."""
    if path.startswith(".") or "." not in path:
        return path in entries
    top, name = path.split(".")[0], path.rsplit(".", 1)[-1]
    return any(entry.split(".")[0] == top and entry.rsplit(".", 1)[-1] == name for entry in entries if "." in entry[1:])


def _unlisted_calls(scope: ast.AST, entries: frozenset[str], names: _Names, defined: set[str],
                    substitutes: tuple[str, ...], helper_attributes: set[str] | frozenset[str]) -> list[tuple[int, str]]:
    """``(line, what)`` for every call in ``scope`` (one definition) that ``entries`` do not allow."""
    import builtins as builtin_module

    stored = _local_names(scope)
    local = names._aliases([n for n in _walk(scope) if isinstance(n, ast.Assign)], {})
    stored -= set(local)
    parents = {child: node for node in _walk(scope) for child in ast.iter_child_nodes(node)}
    skip: set[int] = set()  # isinstance(x, nn.Module): no call; an annotation: no call
    for node in _walk(scope):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("isinstance", "issubclass") and len(node.args) == 2:
            skip.update(id(n) for n in _walk(node.args[1]))
        for annotation in (getattr(node, "annotation", None), getattr(node, "returns", None)):
            if isinstance(annotation, ast.AST):
                skip.update(id(n) for n in _walk(annotation))
    found: list[tuple[int, str]] = []

    def library(node: ast.AST, path: str, verb: str) -> None:
        if _entry_match(path, substitutes, helper_attributes):
            return  # the table of substitutes names it, with its own reason
        if not _allowed(path, entries) and not (verb == "uses" and _is_data(path)):
            found.append((node.lineno, UNLISTED[verb].format(path=path)))

    def resolve(node: ast.AST) -> set[str]:
        return names.resolve(node, local, stored)

    for node in _walk(scope):
        if id(node) in skip:
            continue
        parent = parents.get(node)
        called = isinstance(parent, ast.Call) and parent.func is node
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                skip.update(id(n) for n in _walk(base))
                for path in sorted(resolve(base)):
                    library(base, path, "builds on")
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
                and len(node.args) >= 2 and resolve(node.args[0]):
            skip.update(id(n) for n in _walk(node.args[0]))
            name = _fold(node.args[1])
            for path in sorted(resolve(node.args[0])):
                if name is None:
                    found.append((node.lineno, f"looks up an attribute of {path} by a name computed at run time"))
                else:
                    library(node, f"{path}.{name}", "uses")
            continue
        if not isinstance(node, (ast.Name, ast.Attribute)) or not isinstance(node.ctx, ast.Load):
            continue
        if isinstance(parent, ast.Attribute) and parent.value is node:
            continue  # not a whole chain
        paths = resolve(node)
        if paths:
            for path in sorted(paths):
                library(node, path, "calls" if called else "uses")
            continue
        if not called:
            continue
        if isinstance(node, ast.Name):
            if node.id in stored or node.id in defined or node.id in names.paths:
                continue  # an argument or local, a function of the notebook, an import of no module
            if hasattr(builtin_module, node.id) and node.id not in entries:
                found.append((node.lineno, f"calls {node.id}"))
            continue
        root = node.value
        if isinstance(root, ast.Name) and root.id in ("self", "cls") or \
                isinstance(root, ast.Call) and isinstance(root.func, ast.Name) and root.func.id == "super":
            continue  # the object's own methods and parts (the parts' construction is a call of its own)
        if f".{node.attr}" not in entries:
            found.append((node.lineno, f"calls .{node.attr}()"))
    return found


def allowed_call_findings(nb: Any, allowed: dict[str, Any], trees: list[ast.AST] | None = None,
                          substitutes: dict[str, tuple[str, ...]] | None = None,
                          helper_attributes: set[str] | frozenset[str] = frozenset(),
                          reviewed: set[str] | frozenset[str] = frozenset()) -> list[tuple[int, str]]:
    """``(cell index, finding)`` for every call that a definition of one of ``allowed``'s names
    (``{"softmax": ("numpy.exp", ".max", "len", ...)}``), or a helper of the student's that it reaches,
    makes and its entries do not list: ``"line 4: softmax calls torch.softmin, which its exercise ..."``.
    Helpers that are themselves exercises are read under their own entries; calls that the table of
    ``substitutes`` names are left to :func:`library_findings`, and so are the exercises of ``reviewed``
    (a substitute already flags their definition: one reason for it)."""
    if not allowed:
        return []
    import importlib

    for top in sorted({entry.split(".")[0] for entries in allowed.values() for entry in entries if "." in entry[1:]}):
        try:  # the packages the instructor's table names (numpy, torch, math): what a library path is read in
            importlib.import_module(top)
        except ImportError:
            continue
    cells = _student_trees(nb)
    all_trees = _code_trees(nb) if trees is None else trees
    names = _Names(all_trees, [tree for _, tree in cells])
    defined = {name for tree in all_trees for name, stmt in _top_bindings(tree.body)
               if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    helpers: dict[str, list[tuple[int, ast.AST]]] = {}
    definitions: list[tuple[int, str, ast.AST]] = []
    for index, tree in cells:
        for name, stmt in _top_bindings(tree.body):
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                continue
            (definitions.append((index, name, stmt)) if name in allowed
             else helpers.setdefault(name, []).append((index, stmt)))
    out: list[tuple[int, str]] = []
    seen_findings: set[tuple[int, int, str]] = set()
    for index, exercise, stmt in definitions:
        if exercise in reviewed:
            continue
        entries = frozenset(allowed[exercise])
        denied = tuple((substitutes or {}).get(exercise, ()))
        queue, seen = [(index, stmt, "")], set()
        while queue:
            where, node, via = queue.pop(0)
            for line, what in _unlisted_calls(node, entries, names, defined | set(helpers), denied, helper_attributes):
                if (where, line, what) not in seen_findings:
                    seen_findings.add((where, line, what))
                    out.append((where, (ALLOWED_REASON_IN if via else ALLOWED_REASON).format(
                        line=line, exercise=exercise, what=what, helper=via)))
            reads = {n.id for n in _walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            reads -= _local_names(node) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                else set()
            for helper in sorted(reads & set(helpers) - seen):
                seen.add(helper)
                queue += [(cell, part, helper) for cell, part in helpers[helper]]
    return out


REFUSALS = [
    (re.compile(r"Read-only file system|EROFS"), "a write the sandbox refused (read-only file system)"),
    (re.compile(r"Network is unreachable|ENETUNREACH|Name or service not known|Temporary failure in name resolution"),
     "a network access the sandbox refused"),
    (re.compile(r"Operation not permitted|EPERM|Permission denied|EACCES"), "an access the sandbox refused"),
    (re.compile(r"Resource temporarily unavailable|EAGAIN|BlockingIOError"), "a process the sandbox refused"),
]


def refusals(nb: Any) -> list[tuple[int, str]]:
    """``(cell index, reason)`` for error outputs that show an OS sandbox refusing something."""
    out = []
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            if output.get("output_type") != "error":
                continue
            ename, evalue = output.get("ename", ""), str(output.get("evalue", ""))
            text = f"{ename}: {evalue}"
            reason = None
            if ename == "PermissionError":
                reason = "an access the sandbox refused"
            elif ename == "FileNotFoundError" and PATH.search(_quoted_path(evalue)):
                reason = "a file outside the notebook's folder"
            else:
                for pattern, why in REFUSALS:
                    if ename in ("OSError", "BlockingIOError", "ConnectionError", "socket.gaierror", "gaierror",
                                 "URLError", "ConnectionRefusedError") and pattern.search(text):
                        reason = why
                        break
            if reason:
                out.append((index, f"cell {index}: {reason} ({text[:120]})"))
    return out


def _quoted_path(evalue: str) -> str:
    match = re.search(r"'([^']*)'", evalue)
    return match.group(1) if match else ""
