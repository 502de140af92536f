"""The package's layout: no import cycles, nothing of a course, every module says what it is for."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "nboracle"
MODULES = sorted(PACKAGE.rglob("*.py"))


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports, at module level or inside a function, by its full name."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # from . import wire
    return found


def graph() -> dict[str, set[str]]:
    names = {module_name(p) for p in MODULES}
    return {module_name(p): {n for n in imported(p) if n in names and n != module_name(p)} for p in MODULES}


def test_the_import_graph_has_no_cycle():
    edges = graph()
    # a package's __init__ re-exports its modules: an edge into a package is an edge into its __init__ only
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                pytest.fail("import cycle: " + " -> ".join([*path[path.index(nxt):], nxt]))
            if nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for start in sorted(edges):
        if start not in state:
            visit(start, [start])


def test_the_package_imports_nothing_of_a_course():
    for path in MODULES:
        for name in imported(path):
            top = name.split(".")[0]
            assert top not in ("course", "instructor"), f"{module_name(path)} imports {name}"


def test_the_phases_depend_one_way():
    """What runs in the kernel needs nothing of the grader; the grader nothing of the class pipeline."""
    for source, target in graph().items():
        for name in target:
            if source.startswith("nboracle.kernel"):
                assert not name.startswith(("nboracle.grader", "nboracle.classroom")), f"{source} imports {name}"
            if source.startswith("nboracle.grader"):
                assert not name.startswith("nboracle.classroom"), f"{source} imports {name}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_every_module_opens_with_one_line_on_what_it_is_for(path):
    doc = ast.get_docstring(ast.parse(path.read_text()), clean=False)
    assert doc, f"{module_name(path)} has no docstring"
    first = doc.splitlines()[0]
    assert first.strip() and len(first) <= 110, f"{module_name(path)}: {first!r}"
    if len(doc.splitlines()) > 1:
        assert not doc.splitlines()[1].strip(), f"{module_name(path)}: its first line is not a sentence of its own"


def test_the_test_cells_api_is_exported():
    import nboracle

    for name in ("fresh", "draw_parameters", "parameter_gradients", "input_gradients",
                 "parameter_and_input_gradients", "call_keeping_arguments", "module_tensors", "read_tensors",
                 "read_state", "load_tensors", "largest_tensor"):
        assert callable(getattr(nboracle, name)) and name in nboracle.__all__


@pytest.mark.parametrize("folder", [PACKAGE.parent, PACKAGE.parent.parent], ids=["its folder", "the folder above"])
def test_the_package_imports_as_itself_wherever_python_runs(folder):
    """Run from the distribution's folder or the one holding it (a course's root), ``nboracle`` is the
    installed package, never a namespace made of a folder that happens to carry its name."""
    import subprocess
    import sys

    code = "import nboracle; print(nboracle.__file__); from nboracle import fresh"
    done = subprocess.run([sys.executable, "-c", code], cwd=folder, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert Path(done.stdout.split()[0]).resolve() == PACKAGE / "__init__.py"
