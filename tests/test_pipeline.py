"""The instructor tooling: clear errors on bad input, and no solution in the student package."""

from __future__ import annotations

import subprocess
import sys

import pytest
from nboracle.classroom import pipeline as P
from nboracle.classroom.course_root import CourseRoot
from support import ASSIGNMENTS, solution_lines, source_nb

from instructor.repository import REPOSITORY


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "instructor", *args], cwd=REPOSITORY.path,
                          capture_output=True, text=True, env=P.tool_env())


def test_cli_rejects_an_unknown_assignment():
    proc = run_cli("build", "99_nope")
    assert proc.returncode == 2
    assert "no assignment '99_nope'" in proc.stderr and "01_two_keys" in proc.stderr


def test_every_cli_command_and_option_has_help():
    import argparse

    from instructor.__main__ import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help for choice in sub._choices_actions}
    for command, subparser in sub.choices.items():
        assert helps.get(command), f"`{command}` has no help text"
        for action in subparser._actions:
            assert action.help, f"`{command} {'/'.join(action.option_strings) or action.dest}` has no help text"
    assert "build" in run_cli("--help").stdout


def test_course_root_layout():
    root = CourseRoot(REPOSITORY.path)
    assert root.notebook("source", "01_two_keys") == REPOSITORY.path / "source/01_two_keys/two_keys.ipynb"
    assert root.notebook("feedback", "01_two_keys", "ann") == REPOSITORY.path / "feedback/ann/01_two_keys/two_keys.html"
    assert root.script("01_two_keys").name == "two_keys.py"
    with pytest.raises(P.PipelineError, match="one folder per student"):
        root.folder("submitted", "01_two_keys")
    with pytest.raises(P.PipelineError, match="shared by all students"):
        root.folder("release", "01_two_keys", "ann")
    with pytest.raises(P.PipelineError, match="no course folder"):
        root.folder("graded", "01_two_keys")


def test_every_chapter_states_its_budget():
    """source/budgets.txt gives every assignment, and only those, a positive budget."""
    budgets = REPOSITORY.budgets()
    assert set(budgets) == set(ASSIGNMENTS), (
        f"source/budgets.txt: missing {sorted(set(ASSIGNMENTS) - set(budgets))}, "
        f"unknown {sorted(set(budgets) - set(ASSIGNMENTS))}")
    assert all(seconds > 0 for seconds in budgets.values())


def test_a_malformed_budget_line_is_a_clear_error(tmp_path):
    (tmp_path / "source").mkdir()
    (tmp_path / "source" / "budgets.txt").write_text("# comment\n01_two_keys 15\n02_scaling fifteen\n")
    with pytest.raises(P.PipelineError, match="budgets.txt:3"):
        CourseRoot(tmp_path).budgets()
    with pytest.raises(P.PipelineError, match="no budget"):
        CourseRoot(tmp_path / "elsewhere").budget("01_two_keys")


def test_fill_rejects_unknown_cells():
    nb = P.read_nb(REPOSITORY.notebook("release", "01_two_keys"))
    with pytest.raises(P.PipelineError, match="no cells with grade_id"):
        P.fill(nb, {"not_a_cell": "x = 1"})


def test_solution_answers_drop_the_markers():
    answers = P.solution_answers(source_nb("01_two_keys"))
    assert set(answers) >= {"softmax", "attention", "hand_answers"}
    assert not any("BEGIN SOLUTION" in a or "END SOLUTION" in a for a in answers.values())


def test_a_broken_config_is_an_error_not_a_warning(tmp_path):
    (tmp_path / "nbgrader_config.py").write_text("raise RuntimeError('broken on purpose')\n")
    with pytest.raises(P.PipelineError, match="failed to load"):
        P.nbgrader("db", "assignment", "list", cwd=tmp_path)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_course_package_contains_no_solution(assignment):
    """course/ ships to students: no line of any solution may appear in it."""
    package = "\n".join(p.read_text() for p in (REPOSITORY.path / "course").rglob("*.py"))
    shipped = {line.strip() for line in package.splitlines()}
    leaked = [line for line in solution_lines(source_nb(assignment)) if line in shipped]
    assert not leaked, f"course/ contains solution lines of {assignment}: {leaked[:3]}"


def test_test_modules_share_helpers_only_through_support():
    """A test module imports shared helpers from support.py, never from another test module."""
    tests = REPOSITORY.path / "tests"
    local = {p.stem for p in tests.glob("*.py")} - {"support"}
    for module in sorted(tests.glob("test_*.py")):
        for line in module.read_text().splitlines():
            words = line.split()
            if len(words) >= 2 and words[0] in ("import", "from"):
                assert words[1].split(".")[0] not in local, f"{module.name}: {line.strip()}"


def test_the_feedback_exporter_writes_what_nbconvert_writes():
    """Same text and the same default alt text on images as nbconvert's HTML exporter."""
    import re

    import nbformat
    from nbconvert.exporters import HTMLExporter
    from nboracle.grader.nbgrader_ext import FeedbackExporter

    nb = source_nb(ASSIGNMENTS[0])
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    nb.cells.append(nbformat.v4.new_code_cell("plot()", outputs=[nbformat.v4.new_output(
        "display_data", data={"image/png": png, "text/plain": "<Figure>"})]))
    ours, _ = FeedbackExporter(template_name="classic").from_notebook_node(nb)
    theirs, _ = HTMLExporter(template_name="classic").from_notebook_node(nb)

    def text(page):
        from bs4 import BeautifulSoup

        return BeautifulSoup(page, "html.parser").get_text()

    assert text(ours) == text(theirs)
    images = re.findall(r"<img[^>]*>", ours)
    assert images and all('alt="No description has been provided for this image"' in tag for tag in images)


def test_nbgraders_metadata_check_refuses_what_it_refused_with_each_schema_checked_once():
    """nboracle.grader.nbgrader_ext.OnceCheckedSchemas: the same verdict and error as jsonschema.validate."""
    import copy

    import jsonschema
    from nbgrader.nbgraderformat import MetadataValidator, common
    from nboracle.grader import nbgrader_ext

    assert isinstance(common.jsonschema, nbgrader_ext.OnceCheckedSchemas)  # what nbgrader_config.py loads
    schema = MetadataValidator().schema
    nb = P.read_nb(REPOSITORY.notebook("release", ASSIGNMENTS[0]))
    good = next(c.metadata["nbgrader"] for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade"))
    bad = [{**good, "points": "two"}, {**good, "grade": "yes"}, {k: v for k, v in good.items() if k != "locked"},
           {**good, "grade_id": "a b"}, {**good, "points": -1}, {**good, "shiny": True}]
    once = nbgrader_ext.OnceCheckedSchemas()
    for _ in range(2):  # the second time from the cached validator
        once.validate(copy.deepcopy(good), schema)
        for metadata in bad:
            with pytest.raises(jsonschema.ValidationError) as stock:
                jsonschema.validate(metadata, schema)
            with pytest.raises(jsonschema.ValidationError) as cached:
                once.validate(metadata, MetadataValidator().schema)  # as nbgrader: the schema read afresh
            assert cached.value.message == stock.value.message and list(cached.value.path) == list(stock.value.path)
    assert len(once._validators) == 1, "a schema read afresh for every notebook must not be checked again"
    broken = {**schema, "type": "no such type"}
    with pytest.raises(jsonschema.SchemaError):
        once.validate(good, broken)
