"""A static scan of what a student typed, for things no exercise of this course needs.

``scan_notebook(nb)`` reads the student's code cells only (solution cells and cells the
student added; test cells and locked cells are the instructor's) with Python's ``ast`` and
returns one reason per finding, for example ``"cell 7 (softmax): uses sys.settrace (the
kernel's execution machinery)"``. It looks for

* the kernel's execution machinery: ``get_ipython``, input/AST transformers, events,
  ``set_custom_exc``, ``showtraceback``, ``sys.settrace``/``setprofile``/``excepthook``,
  ``builtins``, frames and closures, ``gc.get_referrers``, ``ctypes``, ...;
* replacing attributes of modules (``np.allclose = ...``, ``setattr(course, ...)``);
* the gradebook, other processes and the network (``subprocess``, ``os.fork``, ``socket``,
  shell escapes ``!cmd``);
* paths outside the notebook's folder (absolute paths, ``..``, ``~``).

``refusals(nb)`` reads error outputs for what an OS sandbox says when it refuses something
(``PermissionError``, a read-only file system, an unreachable network, a missing file
outside the folder).

A finding only marks the submission for review (see ``instructor.nbgrader_ext.ReviewFlags``);
it never changes a score. The course's own solutions and released notebooks produce none
(``tests/test_scan.py``).
"""

from __future__ import annotations

import ast
import re
from typing import Any

MACHINERY = "the kernel's execution machinery"

_DYNAMIC = "exec/eval/compile (running code built at run time)"
# bare names -> why they are suspicious
NAMES = {
    "get_ipython": MACHINERY, "InteractiveShell": MACHINERY, "__import__": MACHINERY, "__builtins__": MACHINERY,
    "_grader_guard_": MACHINERY, "exec": _DYNAMIC, "eval": _DYNAMIC, "compile": _DYNAMIC,
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
    "get_referents": MACHINERY, "get_objects": MACHINERY, "_grader_guard_": MACHINERY,
    "fork": "other processes", "forkpty": "other processes", "system": "other processes",
    "popen": "other processes", "spawnv": "other processes", "spawnl": "other processes",
    "execv": "other processes", "execve": "other processes", "execvp": "other processes", "kill": "other processes",
    "chdir": "paths outside the notebook's folder", "expanduser": "paths outside the notebook's folder",
    "home": "paths outside the notebook's folder",
}
MODULES = {
    "builtins": MACHINERY, "IPython": MACHINERY, "ipykernel": MACHINERY, "gc": MACHINERY,
    "ctypes": MACHINERY, "inspect": MACHINERY, "traceback": MACHINERY, "importlib": MACHINERY,
    "course.integrity": MACHINERY, "signal": MACHINERY, "threading": "other processes or threads",
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
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in PLAIN_FUNCTIONS:
                    names[alias.asname or alias.name] = alias.name
    return names


def _other_uses(tree: ast.AST, names: dict[str, str]) -> list[tuple[str, str]]:
    """``(module, what)`` for each use of a PLAIN_FUNCTIONS module other than one of its plain functions."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    uses = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in names and isinstance(node.ctx, ast.Load):
            module, parent = names[node.id], parents.get(node)
            if isinstance(parent, ast.Attribute) and parent.value is node:
                if parent.attr not in PLAIN_FUNCTIONS[module]:
                    uses.append((module, f"{module}.{parent.attr}"))
            else:
                uses.append((module, f"the module {module} itself"))
    return uses


def scan_source(source: str, modules: set[str] | frozenset[str] = frozenset(),
                plain_names: dict[str, str] | None = None) -> list[str]:
    """Findings in one cell's source; ``modules`` are names bound to modules in the notebook,
    ``plain_names`` the names bound to a PLAIN_FUNCTIONS module anywhere in it (``gc``, ``ins``)."""
    code, found = _magics(source)
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return found  # it cannot run either (a transformer that would make it run is found elsewhere)
    plain_names = {**(plain_names or {}), **plain_module_names(tree)}
    other_uses = _other_uses(tree, plain_names)
    misused = {module for module, _ in other_uses}
    found += [f"uses {what} ({MACHINERY})" for _, what in other_uses if what.rpartition(".")[2] not in ATTRS]
    modules = set(modules) | {"np", "numpy", "torch", "F", "nn", "math", "course", "checks", "sys", "os",
                              "builtins", "plt", "matplotlib", "IPython"}
    for node in ast.walk(tree):
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
                for module, why in MODULES.items():
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
                for part in ast.walk(target):
                    if isinstance(part, ast.Attribute) and _root(part) in modules:
                        found.append(f"replaces {ast.unparse(part)} (an attribute of a module)")
                    elif isinstance(part, ast.Subscript) and isinstance(part.value, ast.Call) \
                            and _root(part.value) in ("globals", "vars"):
                        found.append(f"writes {ast.unparse(part.value)}[...] (the notebook's names)")
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
                trees.append(ast.parse(_magics(cell.source)[0]))
            except SyntaxError:
                continue
    return trees


def notebook_modules(nb: Any, trees: list[ast.AST] | None = None) -> set[str]:
    """Names bound by import statements anywhere in the notebook (test and locked cells too)."""
    names = set()
    for tree in _code_trees(nb) if trees is None else trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                names.update(alias.asname or alias.name for alias in node.names
                             if alias.name[:1].islower() and "." not in alias.name and alias.name != "*")
    return names


def scan_notebook(nb: Any) -> list[tuple[int, str]]:
    """``(cell index, reason)`` for every finding in the student's cells, in order, without repeats."""
    trees = _code_trees(nb)  # parsed once for both notebook-wide lookups
    modules = notebook_modules(nb, trees)
    plain_names = {name: module for tree in trees for name, module in plain_module_names(tree).items()}
    out: list[tuple[int, str]] = []
    for index, label, source in student_cells(nb):
        seen = set()
        for finding in scan_source(source, modules, plain_names):
            if finding not in seen:
                seen.add(finding)
                out.append((index, f"cell {index} ({label}): {finding}"))
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
