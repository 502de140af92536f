"""Every chapter, through the real tools: pairs in sync, source runs, release is clean and
current, and the graded tests prove themselves (solution full marks, stub zero, every bug-zoo
variant loses points with the message meant for it, every correct alternative keeps full marks,
feedback without hidden tests).

Tests of one chapter share one scratch course and one autograde run; with pytest-xdist the
scheduler in conftest.py sends all of a chapter's tests to one worker.
"""

from __future__ import annotations

import ast
import html
import inspect
import json
import re

import jupytext
import nbformat
import nboracle
import pytest
from nbclient import NotebookClient
from nboracle.classroom import pipeline as P
from nboracle.grader.oracle import KERNEL_ONLY
from nboracle.grader.sandbox import SandboxedKernelManager
from support import (
    ASSIGNMENTS,
    LIBRARY,
    SOLUTION,
    STUB,
    graded_chapter,
    hidden_lines,
    scratch_course,
    solution_lines,
    source_nb,
    trusted_kernels,
)

from instructor.repository import REPOSITORY
from instructor.zoo import ONE_LOSS_PENDING, alternatives_for, library_for, parts_of, variants_for

# chapters whose every failing test, for every bug of the zoo, speaks through a course check (a crash of the
# student's code comes back from `attempt` as one sentence with the course's hint), never a bare library error:
# every chapter
EXACT_FEEDBACK = set(ASSIGNMENTS)
COURSE_MESSAGE = "CheckFailed: "
# `attempt`'s sentence without the course's hint: "<call> raised <Error> (<the library's words>)[ at <line>]" and
# nothing after it, which names no mistake
BARE_ERROR = re.compile(r" raised [A-Za-z_.]*(Error|Exception)\b(?: \((?:(?!\): ).)*\))?(?: at [^:]*(?::\s*\d+)?)?$")
MAX_TEST_LINES = 5  # what a graded test cell may print when it passes


def by_chapter(values=ASSIGNMENTS):
    return [pytest.param(a, id=a) for a in values]


def zoo_params():
    return [
        pytest.param(a, v.name, marks=pytest.mark.pipeline, id=f"{a}::{v.name}")
        for a in ASSIGNMENTS for v in variants_for(a)
    ]


def alternative_params():
    return [
        pytest.param(a, v.name, marks=pytest.mark.pipeline, id=f"{a}::{v.name}")
        for a in ASSIGNMENTS for v in alternatives_for(a)
    ]


def library_params():
    return [
        pytest.param(a, v.name, marks=pytest.mark.pipeline, id=f"{a}::{v.name}")
        for a in ASSIGNMENTS for v in library_for(a)
    ]


def graded(scratch_root, assignment):
    return graded_chapter(scratch_root, assignment)


# ---------------------------------------------------------------- source and pairs


@pytest.mark.parametrize("assignment", by_chapter())
def test_pair_in_sync(assignment):
    """The .py is what people edit; the .ipynb must carry exactly the same cells."""
    script, notebook = REPOSITORY.script(assignment), REPOSITORY.notebook("source", assignment)
    assert script.exists() and notebook.exists(), f"{assignment}: need both {script.name} and {notebook.name}"
    from_py = jupytext.read(script)
    from_nb = nbformat.read(notebook, as_version=4)

    def cells(nb):
        return [(c.cell_type, c.source, c.metadata.get("nbgrader")) for c in nb.cells]

    assert cells(from_py) == cells(from_nb), (
        f"{script.name} and {notebook.name} differ: run `make build` (jupytext --sync)")


@pytest.mark.parametrize("assignment", by_chapter())
def test_graded_cells_follow_conventions(assignment):
    """schema_version 3, unique ids, solution markers, docstring-first tests with hidden parts."""
    nb = source_nb(assignment)
    ids = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader")
        if not meta:
            continue
        gid = meta.get("grade_id")
        ids.append(gid)
        assert meta.get("schema_version") == 3, f"{gid}: schema_version must be 3"
        if meta.get("solution") and cell.cell_type == "code":
            assert "### BEGIN SOLUTION" in cell.source and "### END SOLUTION" in cell.source, gid
        if meta.get("grade") and not meta.get("solution"):
            assert meta.get("points", 0) > 0 and meta.get("locked"), f"{gid}: graded tests are locked and worth points"
            assert re.match(r'\s*"""[^\n]+"""', cell.source), f"{gid}: a test cell opens with a one-line docstring"
            docstring = cell.source.lstrip().splitlines()[0]
            assert not re.search(r"\bhidden (part|test|reference|block)|\breference|\btest_\w", docstring, re.I), (
                f"{gid}: the docstring speaks to the student (what the test checks), never of hidden parts, "
                f"references or other test cells: {docstring}")
            assert "### BEGIN HIDDEN TESTS" in cell.source, f"{gid}: every graded test has hidden tests"
    assert len(ids) == len(set(ids)), f"duplicate grade ids in {assignment}"
    for cell in nb.cells:  # the marker the oracle reads, and a line that tells the student what it means
        if cell.cell_type == "code" and KERNEL_ONLY in cell.source:
            meta = cell.metadata.get("nbgrader", {})
            lines = cell.source.lstrip().splitlines()
            assert meta.get("locked") and not meta.get("grade") and not meta.get("solution"), (
                f"{meta.get('grade_id')}: `{KERNEL_ONLY}` marks a locked provided cell")
            assert lines[0] == KERNEL_ONLY and lines[1].startswith("# ("), (
                f"{meta.get('grade_id')}: `{KERNEL_ONLY}` is the cell's first line, and the next one explains it to "
                "the student (`# (this cell runs in your notebook only: ...)`)")
    first_code = next(c for c in nb.cells if c.cell_type == "code")
    meta = first_code.metadata.get("nbgrader", {})
    assert "import" in first_code.source and meta.get("locked") and not meta.get("solution"), (
        "the first code cell imports the checks and is locked, so the grader restores it if edited")


@pytest.mark.parametrize("assignment", by_chapter())
def test_source_notebook_executes(assignment, tmp_path):
    """The instructor notebook runs top to bottom with its solutions, hidden tests included."""
    nb = source_nb(assignment)
    # the course's own code: a kernel forked with torch imported; demos of minutes (chapter 10's training) run short
    with trusted_kernels(), P.environment({"COURSE_QUICK_DEMOS": "1"}):
        NotebookClient(nb, timeout=300, kernel_name="python3", kernel_manager_class=SandboxedKernelManager,
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [P.cell_error(c) for c in nb.cells if P.cell_error(c)]
    assert not errors, f"{assignment} raised: {errors}"
    loud = {}
    for cell in nb.cells:  # a graded test cell says little: a failed check's message, not pages of output
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution") and cell.cell_type == "code":
            shown = [o for o in cell.outputs if o.get("output_type") in ("execute_result", "display_data")]
            lines = sum(len(o.get("text", "").splitlines()) for o in cell.outputs if o.get("output_type") == "stream")
            if shown or lines > MAX_TEST_LINES:
                loud[meta["grade_id"]] = f"{len(shown)} displayed values, {lines} printed lines"
    assert not loud, f"graded test cells that flood the page: {loud}"


# ---------------------------------------------------------------- release


@pytest.mark.parametrize("assignment", by_chapter())
def test_release_is_current(assignment, scratch_root):
    """release/ is exactly what nbgrader generates from source/ now (run `make release`)."""
    fresh = scratch_course(scratch_root, assignment).folder("release", assignment)
    committed = REPOSITORY.folder("release", assignment)
    assert committed.is_dir(), f"release/{assignment} is missing: run `make release`"
    fresh_files = sorted(p.relative_to(fresh) for p in fresh.rglob("*") if p.is_file())
    committed_files = sorted(p.relative_to(committed) for p in committed.rglob("*") if p.is_file())
    assert fresh_files == committed_files
    for rel in fresh_files:
        if rel.suffix == ".ipynb":
            assert json.loads((fresh / rel).read_text()) == json.loads((committed / rel).read_text()), (
                f"release/{assignment}/{rel} is stale: run `make release`")


@pytest.mark.parametrize("assignment", by_chapter())
def test_release_leaks_nothing(assignment):
    """No solution code, hidden test, .py twin, gradebook or jupytext pairing in release/."""
    folder = REPOSITORY.folder("release", assignment)
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert not [p for p in files if p.suffix == ".py"], "a .py in release/ hands out the solutions"
    assert not [p for p in files if p.name.startswith("gradebook")], "the gradebook stores hidden tests"
    secret = solution_lines(source_nb(assignment)) + hidden_lines(source_nb(assignment))
    assert secret, "found no solution or hidden lines to look for"
    for path in files:
        text = path.read_text(errors="replace")
        for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN", "HIDDEN TESTS"):
            assert marker not in text, f"{path} contains {marker!r}"
        if path.suffix == ".ipynb":
            nb = json.loads(text)
            assert "jupytext" not in nb["metadata"], f"{path}: Lab would write a .py twin on save"
            body = {line.strip() for c in nb["cells"] for line in "".join(c["source"]).splitlines()}
            leaked = [line for line in secret if line in body]
            assert not leaked, f"{path} contains solution or hidden lines: {leaked[:3]}"


# ---------------------------------------------------------------- grading


@pytest.mark.pipeline
@pytest.mark.parametrize("assignment", by_chapter())
def test_solution_scores_full_marks(assignment, scratch_root):
    result = graded(scratch_root, assignment).results[SOLUTION]
    assert result.auto_max > 0
    assert not result.failed(), {g: result.cells[g].error for g in result.failed()}
    assert result.auto_score == result.auto_max


@pytest.mark.pipeline
@pytest.mark.parametrize("assignment", by_chapter())
def test_honest_work_is_never_flagged_for_review(assignment, scratch_root):
    """The solution, the stub, every bug-zoo variant and alternative: wrong or not, but honest
    (nboracle.grader.scan, the guard). The zoo's answers through a library substitute are flagged by design."""
    from nboracle.grader.nbgrader_ext import review_reasons

    chapter = graded(scratch_root, assignment)
    flagged = {}
    for student in chapter.results:
        if student.startswith(f"{LIBRARY}-"):
            continue
        nb = P.read_nb(chapter.root.notebook("autograded", assignment, student))
        if review_reasons(nb):
            flagged[student] = review_reasons(nb)
    assert not flagged, flagged


@pytest.mark.pipeline
@pytest.mark.parametrize("assignment", by_chapter())
def test_stub_scores_zero(assignment, scratch_root):
    result = graded(scratch_root, assignment).results[STUB]
    earned = {g: c.score for g, c in result.cells.items() if c.score > 0}
    assert not earned, f"the untouched release earns points in {earned}: a test that cannot fail"


@pytest.mark.parametrize("assignment,variant", zoo_params())
def test_bug_zoo_variant_loses_points(assignment, variant, scratch_root):
    chapter = graded(scratch_root, assignment)
    v = chapter.variants[variant]
    result = chapter.variant_result(v)
    assert result.auto_score < result.auto_max, f"{v.why}: earned full marks"
    assert v.expect, f"variant {v.name} names no failing test"
    for gid, fragment in v.expect.items():
        cell = result.cells[gid]
        assert cell.score < cell.max_score, f"{v.why}: {gid} did not fail"
        assert fragment in cell.error, f"{v.why}: {gid} says {cell.error!r}, expected it to mention {fragment!r}"
    if v.only:
        others = {g: result.cells[g].error for g in result.failed() if g not in v.expect}
        assert not others, f"{v.why}: only {sorted(v.expect)} should notice it, but these failed too: {others}"
    if assignment in EXACT_FEEDBACK:
        raw = {g: result.cells[g].error for g in result.failed() if not result.cells[g].error.startswith(COURSE_MESSAGE)}
        assert not raw, f"{v.why}: a raw error, not the course's message with its hint: {raw}"
        bare = {g: result.cells[g].error for g in result.failed() if BARE_ERROR.search(result.cells[g].error)}
        assert not bare, f"{v.why}: a library's error with no word of the course after it: {bare}"
    # one mistake, one loss: every test it fails lies in its own part (the part of the cells it edits, or the one
    # it declares); a cascade the tests cannot avoid yet is declared with its reason, and must still be one
    if assignment in ONE_LOSS_PENDING:
        return
    parts = parts_of(source_nb(assignment))
    own = v.own_parts(parts)
    assert own, f"variant {v.name} edits no cell of a part and declares none"
    elsewhere = {g: result.cells[g].error for g in result.failed() if parts.get(g) not in own}
    if v.crosses:
        assert elsewhere, f"{v.name} is declared to cross parts ({v.crosses}), but loses only Part {sorted(own)}: " \
                          "remove `crosses`"
    else:
        assert not elsewhere, f"{v.why}: a mistake of Part {'/'.join(sorted(own))} also costs {elsewhere}"


@pytest.mark.parametrize("assignment,alternative", alternative_params())
def test_alternative_keeps_full_marks(assignment, alternative, scratch_root):
    """A correct answer written differently from the solution earns every point."""
    chapter = graded(scratch_root, assignment)
    alt = chapter.alternatives[alternative]
    result = chapter.alternative_result(alt)
    assert result.auto_max > 0
    lost = {g: result.cells[g].error for g in result.failed()}
    assert not lost, f"{alt.why}: a correct answer lost points in {lost}"
    assert result.auto_score == result.auto_max


@pytest.mark.parametrize("assignment,answer", library_params())
def test_a_library_substitute_keeps_its_marks_and_is_flagged(assignment, answer, scratch_root):
    """A correct answer that lets the library do the exercise's work (instructor.substitutes) earns
    every point, as before, and is flagged for review with the exercise and the entry point named:
    in the autograded notebook and as nbgrader's needs-manual-grade."""
    from nbgrader.api import Gradebook
    from nboracle.grader.nbgrader_ext import review_reasons

    chapter = graded(scratch_root, assignment)
    lib = chapter.library[answer]
    result = chapter.library_result(lib)
    lost = {g: result.cells[g].error for g in result.failed()}
    assert not lost, f"{lib.why}: lost points in {lost}"
    assert result.auto_max > 0 and result.auto_score == result.auto_max
    student = lib.student_id(LIBRARY)
    reasons = review_reasons(P.read_nb(chapter.root.notebook("autograded", assignment, student)))
    assert lib.flagged and len(reasons) == 1 and lib.flagged in reasons[0], reasons
    with Gradebook(chapter.root.gradebook_url) as gb:
        grades = gb.find_submission_notebook(chapter.root.notebook_name(assignment), assignment, student).grades
        assert any(g.needs_manual_grade for g in grades if g.name.startswith("test_")), "the formgrader does not list it"
        assert sum(g.score for g in grades) == result.auto_max, "the review flag changed a score"


@pytest.mark.pipeline
@pytest.mark.parametrize("assignment", by_chapter())
def test_every_graded_test_is_caught_by_some_bug(assignment, scratch_root):
    """A graded cell that no plausible bug can fail is a defect."""
    chapter = graded(scratch_root, assignment)
    test_ids = set(chapter.results[SOLUTION].cells)
    caught = {g for v in chapter.variants.values() for g in chapter.variant_result(v).failed()}
    assert test_ids - caught == set(), f"no bug-zoo variant fails {sorted(test_ids - caught)}"


@pytest.mark.pipeline
@pytest.mark.parametrize("assignment", by_chapter())
def test_feedback_and_messages_hide_hidden_tests(assignment, scratch_root):
    chapter = graded(scratch_root, assignment)
    secret = hidden_lines(source_nb(assignment))
    pages = list((chapter.root.path / "feedback").rglob("*.html"))
    assert len(pages) == len(chapter.results), "every graded student gets feedback"
    for page in pages:
        text = page.read_text()
        assert "BEGIN HIDDEN" not in text and "HIDDEN TESTS" not in text, page
        # the lines a reader sees: highlighted code is one span per token, entities stand for quotes
        shown = html.unescape(re.sub(r"<[^>]*>", "", text))
        assert "BEGIN HIDDEN" not in shown and "HIDDEN TESTS" not in shown, page
        shown_lines = {line.strip() for line in shown.splitlines()}
        leaked = [line for line in secret if line in shown_lines or html.escape(line, quote=False) in text]
        assert not leaked, f"{page} shows hidden test lines: {leaked[:3]}"
    for result in chapter.results.values():
        for cell in result.cells.values():
            assert not any(line in cell.error for line in secret), f"{cell.grade_id} message shows hidden source"


@pytest.mark.pipeline
@pytest.mark.parametrize("assignment", by_chapter())
def test_demo_cells_are_skipped_while_grading(assignment, scratch_root):
    """A `# demo only` cell decides no score: autograde leaves it unrun, saying so; every other cell runs."""
    from nboracle.grader.nbgrader_ext import SKIPPED_DEMO, is_demo_only

    chapter = graded(scratch_root, assignment)
    nb = P.read_nb(chapter.root.notebook("autograded", assignment, SOLUTION))
    for cell in nb.cells:
        if cell.cell_type != "code" or not cell.source.strip():
            continue
        skipped = [o for o in cell.outputs if o.get("text") == SKIPPED_DEMO]
        gid = cell.metadata.get("nbgrader", {}).get("grade_id", cell.source.splitlines()[0])
        assert bool(skipped) == is_demo_only(cell), f"{assignment}, {gid}: skipped {bool(skipped)}"
        if skipped:
            assert cell.outputs == skipped and cell.execution_count is None


def test_a_student_answer_is_never_a_demo_cell():
    """Graded and solution cells always run, whatever their first line says."""
    from nbformat.v4 import new_code_cell
    from nboracle.grader.nbgrader_ext import is_demo_only

    def cell(nbgrader):
        return new_code_cell("# demo only\nx = 1", metadata={"nbgrader": nbgrader} if nbgrader else {})

    assert is_demo_only(cell(None)) and is_demo_only(cell({"grade": False, "solution": False, "locked": True}))
    assert not is_demo_only(cell({"grade": False, "solution": True}))
    assert not is_demo_only(cell({"grade": True, "solution": False, "locked": True, "points": 1}))
    assert not is_demo_only(new_code_cell("x = 1  # demo only"))


# ---------------------------------------------------------------- what a graded cell shows


def _returns_a_value(function: ast.FunctionDef) -> bool:
    """Whether `function` has a `return <value>` of its own (nested definitions not counted)."""
    todo = list(function.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Return) and node.value is not None:
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))
    return False


def _shows_a_value(last: ast.stmt, defined: dict, course_api) -> str | None:
    """Why a cell whose last statement is `last` would display a value (IPython shows a last expression), or None."""
    if not isinstance(last, ast.Expr):
        return None
    call = last.value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
        return f"it ends with the expression {ast.unparse(call)[:60]!r}, whose value the cell would display"
    name = call.func.id
    if name in defined:
        return f"it ends with a call of {name}, which returns a value" if _returns_a_value(defined[name]) else None
    for api in (course_api, nboracle):  # what the chapters import: the course's checks, the grader's probes
        function = getattr(api, name, None)
        if function is not None and inspect.signature(function).return_annotation in (None, "None"):
            return None
    return f"it ends with a call of {name}, whose value the cell would display"


@pytest.mark.parametrize("assignment", by_chapter())
def test_graded_cells_display_no_value(assignment):
    """A graded test cell never ends with a value: the student's Lab would print it (1,540 lines of gradients,
    once) and nbgrader reads a number it shows as partial credit. Both forms: released and with hidden tests."""
    import course

    nb = source_nb(assignment)
    trees = [ast.parse(cell.source) for cell in nb.cells if cell.cell_type == "code"]
    modules = {node.module for tree in trees for node in ast.walk(tree)  # the chapter's checks in course/, and the
               if isinstance(node, ast.ImportFrom)  # references its hidden parts import (instructor/references/)
               and (node.module or "").startswith(("course.", "instructor.references."))}
    trees += [ast.parse(path.read_text()) for name in sorted(modules)
              if (path := REPOSITORY.path / (name.replace(".", "/") + ".py")).is_file()]
    defined = {node.name: node for tree in trees for node in tree.body if isinstance(node, ast.FunctionDef)}
    problems = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if not (meta.get("grade") and not meta.get("solution")) or cell.cell_type != "code":
            continue
        released = re.sub(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n?", "", cell.source, flags=re.S)
        for form, source in (("released", released), ("with hidden tests", cell.source)):
            why = _shows_a_value(ast.parse(source).body[-1], defined, course)
            if why:
                problems.append(f"{meta['grade_id']} ({form}): {why}")
    assert not problems, problems
