"""The optional message catalog (nboracle.grader.messages): any course may translate what its students read.

A toy course's catalog, written here as a module on ``sys.path``, stands for a real one: nothing of
this repository's course is used. The course root's config chooses the language; a notebook that
claims another changes nothing; the scores' text is translated after grading, the English kept
beside it for the instructor's tools; a broken catalog leaves the English.
"""

from __future__ import annotations

import copy
import textwrap
from datetime import datetime

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output
from nboracle.classroom.pipeline import cell_error
from nboracle.grader.messages import NOTEBOOK_METADATA, UNTRANSLATED, translator, untranslated
from nboracle.grader.nbgrader_ext import DueDateCell, TranslateMessages, _due_text
from traitlets.config import Config

TOY = '''
TABLE = {"x is wrong": "x sai", "**Due: {due:%A %d %B %Y, %H:%M} {zone}.** Submit from the Assignment List before "
         "then; a later submission is marked late (the course's late policy says what that costs).":
         "**Hạn: {due:%d/%m/%Y}**", "(demo only: not run while grading; this cell decides no score)": "(minh họa)",
         "Due {when}": "Hạn nộp {when}", "in {days} days": "còn {days} ngày", "after the due date": "sau hạn nộp",
         "in {minutes} min": "còn {phút} phút",  # a translation that renames a field is not used
         "Fetch": "Lấy về", "Released assignments": "Bài tập đã phát", "Fetch Feedback": "Lấy feedback"}

def translator(language):
    if language == "xb":  # a catalog that fails
        return lambda text: 1 / 0
    return lambda text: TABLE.get(text, text) if language == "vi" else text
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    (tmp_path / "toy_catalog.py").write_text(textwrap.dedent(TOY))
    monkeypatch.syspath_prepend(str(tmp_path))
    config = Config()
    config.MessageCatalog.catalog = "toy_catalog:translator"
    config.MessageCatalog.language = "vi"
    return config


def _graded(source: str, locked: bool, outputs) -> nbformat.NotebookNode:
    cell = new_code_cell(source, outputs=outputs)
    cell.metadata.nbgrader = {"grade": locked, "solution": not locked, "locked": locked,
                              "grade_id": f"cell{len(source)}", "schema_version": 3}
    return cell


def _notebook():
    error = new_output("error", ename="AssertionError", evalue="x is wrong", traceback=["AssertionError: x is wrong"])
    return new_notebook(cells=[
        _graded("answer = 1", False, [new_output("stream", name="stdout", text="x is wrong")]),  # the student's print
        _graded("assert answer == 2, 'x is wrong'", True, [error]),
        _graded("print('demo')", True, [new_output("stream", name="stdout",
                                                   text="(demo only: not run while grading; this cell decides no score)\n")]),
    ], metadata={"course_edition": "en", "language": "xx"})


def test_without_a_catalog_nothing_is_translated_nor_imported(toy):
    assert translator(Config()) is untranslated
    only_language = Config()
    only_language.MessageCatalog.language = "vi"
    assert translator(only_language) is untranslated
    nb = _notebook()
    before = nbformat.writes(nb)
    TranslateMessages(config=Config()).preprocess(nb, {})
    assert nbformat.writes(nb) == before


def test_the_course_roots_language_translates_errors_and_its_own_cells_only(toy):
    nb = _notebook()
    TranslateMessages(config=toy).preprocess(nb, {})  # the notebook's metadata names no language that counts
    student, test, demo = nb.cells
    assert student.outputs[0].text == "x is wrong", "a student's own output is never rewritten"
    assert test.outputs[0].evalue == "x sai" and test.outputs[0].traceback == ["AssertionError: x sai"]
    assert test.metadata[NOTEBOOK_METADATA][UNTRANSLATED] == {"AssertionError": "x is wrong"}
    assert cell_error(test) == "AssertionError: x is wrong", "the instructor's tools read the course's English"
    assert demo.outputs[0].text == "(minh họa)\n"
    nbformat.validate(nb)


def test_a_bad_setting_is_refused_and_a_broken_catalog_leaves_the_english(toy):
    for section, value in (("language", "../../etc"), ("catalog", "toy_catalog.translator")):
        config = copy.deepcopy(toy)
        config.MessageCatalog[section] = value
        with pytest.raises(ValueError):
            translator(config)
    broken = copy.deepcopy(toy)
    broken.MessageCatalog.language = "xb"
    assert translator(broken)("x is wrong") == "x is wrong"
    due = datetime(2027, 3, 5, 17, 0)
    assert _due_text(due, "UTC", translator(toy)) == "**Hạn: 05/03/2027**"
    assert _due_text(due, "UTC", lambda text: "{when}").startswith("**Due: Friday 05 March 2027, 17:00 UTC.**"), \
        "a translation with other placeholders falls back to the English"


def test_the_due_date_cell_speaks_the_course_roots_language(toy, tmp_path, monkeypatch):
    import os
    import sys

    from nbgrader.api import Gradebook

    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(url) as gradebook:
        gradebook.add_assignment("ps1", duedate=datetime(2027, 3, 5, 17, 0))
    nb, _ = DueDateCell(config=toy).preprocess(_notebook(), {"nbgrader": {"db_url": url, "assignment": "ps1"}})
    assert any(cell.source == "**Hạn: 05/03/2027**" for cell in nb.cells)


def test_the_assignment_list_gets_the_due_dates_phrases_in_the_course_roots_language(toy, tmp_path, monkeypatch):
    """The release stores the Lab extension's phrases as the course's catalog translates them, with the language;
    the exchange's listing hands them on; a copy whose words were changed to anything but those phrases is English."""
    import json
    import os
    import sys

    from nbgrader.api import Gradebook
    from nboracle.grader.nbgrader_ext import released_words

    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(url) as gradebook:
        gradebook.add_assignment("ps1", duedate=datetime(2027, 3, 5, 17, 0))
    context = {"nbgrader": {"db_url": url, "assignment": "ps1"}}
    nb, _ = DueDateCell(config=toy).preprocess(_notebook(), context)
    ours = nb.metadata[NOTEBOOK_METADATA]
    assert ours["due_words"] == {"Due {when}": "Hạn nộp {when}", "in {days} days": "còn {days} ngày",
                                 "after the due date": "sau hạn nộp", "Fetch": "Lấy về",
                                 "Released assignments": "Bài tập đã phát", "Fetch Feedback": "Lấy feedback"}
    assert ours["due_language"] == "vi"
    folder = tmp_path / "released"
    folder.mkdir()
    (folder / "ps1.ipynb").write_text(json.dumps(nb))
    assert released_words(str(folder)) == (ours["due_words"], "vi")
    english, _ = DueDateCell(config=Config()).preprocess(nb, context)  # released again by a course without a catalog
    assert "due_words" not in english.metadata[NOTEBOOK_METADATA] and "due_language" not in english.metadata[NOTEBOOK_METADATA]
    for words in ({"Due {when}": "x", "<script>": "y"}, {"Due {when}": 3}, ["Due {when}"], {"Due {when}": "z" * 201}):
        ours["due_words"] = words
        (folder / "ps1.ipynb").write_text(json.dumps(nb))
        assert released_words(str(folder)) == (None, None), words


def test_the_panels_own_words_are_released_without_a_due_date_too(toy, tmp_path, monkeypatch):
    """nbgrader's buttons and headings in the course's language need no due date: a course with a catalog
    releases them in every notebook; a course without one releases nothing, as before."""
    import os
    import sys

    from nbgrader.api import Gradebook

    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(url) as gradebook:
        gradebook.add_assignment("ps1")  # no due date
    context = {"nbgrader": {"db_url": url, "assignment": "ps1"}}
    nb, _ = DueDateCell(config=toy).preprocess(_notebook(), context)
    ours = nb.metadata[NOTEBOOK_METADATA]
    assert ours["due_words"]["Fetch"] == "Lấy về" and ours["due_language"] == "vi" and "due_utc" not in ours
    assert not any(cell.get("id") == DueDateCell.cell_id for cell in nb.cells), "no due date: no cell says one"
    english, _ = DueDateCell(config=Config()).preprocess(_notebook(), context)
    assert NOTEBOOK_METADATA not in english.metadata, "a course without a catalog releases the notebook unchanged"
