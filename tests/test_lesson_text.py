"""The notebooks read as lessons: text for students only, chapter openings, no answer printed before its question."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jupytext
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "source").glob("[0-9][0-9]_*/*.py"))
RELEASED = sorted((ROOT / "release").glob("[0-9][0-9]_*/*.ipynb"))

# Words of the course's authoring, which a student has no use for: the lesson texts the chapters
# were written from ("seeds"), their numbering, and talk about them.
AUTHORING = re.compile("|".join([
    r"\bseeds?\s+\d{3}\b", r"\bseed\s+\d{3}'s\b", r"\blesson texts?\b", r"\bthe lesson this chapter follows\b",
    r"\bthe lesson itself\b", r"\bthe lesson's runs\b", r"\bcurriculum\b", r"\bCURRICULUM\.md\b", r"\bcourse authors?\b",
    r"\bauthors? of (this|the) course\b", r"\bPersian\b",
]), re.I)


def _released_text(path: Path) -> list[tuple[int, str]]:
    return [(i, "".join(cell["source"])) for i, cell in enumerate(json.loads(path.read_text())["cells"])]


@pytest.mark.parametrize("path", RELEASED + sorted((ROOT / "course").glob("*.py")), ids=lambda p: p.name)
def test_student_text_has_no_authoring_words(path):
    cells = _released_text(path) if path.suffix == ".ipynb" else [(0, path.read_text())]
    found = [(i, m[0]) for i, text in cells for m in AUTHORING.finditer(text)]
    assert not found, f"{path.relative_to(ROOT)}: words for the course's authors, not its students (cell, words): {found}"


def test_the_authoring_list_finds_what_it_is_for():
    for phrase in ("Seed 002 of this course pictures this", "the lesson this chapter follows fixes the model",
                   "Vietnamese and Persian lesson texts", "seed 002's table"):
        assert AUTHORING.search(phrase), phrase
    for phrase in ("a generator seeded 7", "torch.manual_seed(2024)", "the lesson is the method", "Vietnamese"):
        assert not AUTHORING.search(phrase), phrase


OPENING = re.compile(r"\*\*Time:\*\* about ([\d.]+) hours\b.*?\*\*Assumes:\*\* \S", re.S)


def estimate(notebook) -> tuple[float, int, int]:
    """Hours (to the half hour) a capable student needs, by the rule below; words; points.

    The text is read at about 100 words a minute (model answers excepted) and each graded point
    takes about 6 minutes: an estimate from the chapter's size, not a measurement.
    """
    cells = [c for c in notebook.cells if not c.metadata.get("nbgrader", {}).get("solution")]
    words = sum(len(c.source.split()) for c in cells if c.cell_type == "markdown")
    points = int(sum(c.metadata.get("nbgrader", {}).get("points", 0) for c in notebook.cells))
    return max(1.0, round((words / 100 + 6 * points) / 30) / 2), words, points


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.parent.name)
def test_each_chapter_opens_with_what_it_builds_the_time_and_what_it_assumes(path):
    """The first cell: what the chapter builds, the time it takes by the rule of `estimate` (the rule is the authors'
    business: the opening states the time, not its arithmetic), the chapters it assumes."""
    notebook = jupytext.read(path)
    first = notebook.cells[0]
    match = OPENING.search(first.source)
    assert first.cell_type == "markdown" and match and re.search(r"you will (have )?write|written", first.source, re.I), \
        "the first cell says what you will write, then '**Time:** about N hours ...' and '**Assumes:** ...'"
    hours, words, points = estimate(notebook)
    assert float(match[1]) == hours, \
        f"the opening says {match[1]} hours; by the rule ({words} words, {points} points): {hours}"


def _constant_answers(cells):
    """(index, grade_id, numbers) of each solution cell that only assigns constants (quiz letters excepted)."""
    for index, cell in enumerate(cells):
        meta = cell.metadata.get("nbgrader", {})
        code = cell.source
        if (cell.cell_type != "code" or not meta.get("solution") or meta.get("grade_id", "").startswith("quiz")
                or re.search(r"^\s*(def|class) ", code, re.M)):
            continue
        namespace = {"np": np}
        exec(code.split("### BEGIN SOLUTION")[1].split("### END SOLUTION")[0], namespace)
        numbers = [float(x) for name, value in namespace.items() if name.isupper()
                   for x in np.ravel(np.asarray(value, dtype=float))]
        yield index, meta["grade_id"], numbers


def _text_before(cells, index) -> str:
    """Markdown, code and stored outputs of the cells before ``index``."""
    parts = []
    for cell in cells[:index]:
        parts.append(cell.source)
        for output in cell.get("outputs", []):
            parts.append("".join(output.get("text", "")) + "".join(output.get("data", {}).get("text/plain", "")))
    return "\n".join(parts)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.parent.name)
def test_no_graded_constant_answer_is_printed_before_its_question(path):
    """Each number a hand exercise or a prediction asks for appears nowhere in the cells above it.

    Decimals are looked for to 3 places, whole numbers from 1000 on (with or without thousands separators).

    The cells are read from the paired notebook, outputs included when it stores any.
    """
    cells = jupytext.read(path.with_suffix(".ipynb")).cells
    for index, grade_id, numbers in _constant_answers(cells):
        before = re.sub(r"(?<=\d)(,|\\,|\s)(?=\d{3}\b)", "", _text_before(cells, index))  # 49,984 -> 49984
        for number in numbers:
            if float(number).is_integer() and abs(number) < 1000:
                continue  # small whole numbers occur everywhere for other reasons (widths, counts)
            shown = f"{number:.0f}" if float(number).is_integer() else f"{number:.3f}".rstrip("0").rstrip(".")
            assert not re.search(rf"(?<![\d.]){re.escape(shown)}(?!\d)" if float(number).is_integer()
                                 else rf"(?<![\d.]){re.escape(shown)}", before), \
                f"{grade_id}: its answer {shown} is already in the text or outputs above the question"


def test_the_answer_check_sees_the_old_chapter_01_example():
    """Part B's worked example prints 0.731 and 1.462: a question asking for them would be caught."""
    cells = jupytext.read(ROOT / "source" / "01_two_keys" / "two_keys.ipynb").cells
    hand = next(i for i, c in enumerate(cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "hand_answers")
    before = _text_before(cells, hand)
    assert all(re.search(rf"(?<![\d.]){n}", before) for n in ("0.731", "1.462", "1.076"))


@pytest.mark.parametrize("path", RELEASED, ids=lambda p: p.parent.name)
def test_every_chapter_has_more_prose_than_visible_test_code(path):
    """The released notebook reads as a lesson: its markdown outweighs the visible code of its graded test cells
    (bench/prose_ratio.py prints the table; the chapters' checks live in course/, each test cell imports its own)."""
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    from prose_ratio import measure

    prose, tests, _ = measure(path)
    assert prose > tests, f"{path.parent.name}: {prose} characters of prose, {tests} of visible test code"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.parent.name)
def test_every_chapter_asks_for_a_prediction_before_measuring_it(path):
    """Each chapter has a graded 'Predict, then run' question: a PREDICTED_* constant, its test, and a cell after
    the test that measures the number."""
    cells = jupytext.read(path).cells
    ids = [c.metadata.get("nbgrader", {}).get("grade_id", "") for c in cells]
    asked = [i for i, gid in enumerate(ids) if gid.startswith("predict_")]
    assert asked, f"{path.parent.name}: no solution cell predict_* (a 'Predict, then run' question)"
    for index in asked:
        assert "PREDICTED_" in cells[index].source, ids[index]
        test = index + 1
        assert ids[test] == f"test_{ids[index]}" and cells[test].metadata["nbgrader"].get("points"), ids[index]
        after = next((c for c in cells[test + 1:] if c.cell_type == "code"), None)
        assert after is not None and not after.metadata.get("nbgrader", {}).get("grade"), \
            f"{ids[index]}: a code cell after the test measures the number"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.parent.name)
def test_every_chapter_asks_for_one_written_answer_with_a_rubric(path):
    """Each chapter has one answer in the student's own words: a manually graded markdown cell of 1 or 2 points whose
    source (never released) holds a model answer and a rubric; the released cell is only 'YOUR ANSWER HERE'."""
    written = [c for c in jupytext.read(path).cells if c.cell_type == "markdown"
               and c.metadata.get("nbgrader", {}).get("grade") and c.metadata["nbgrader"].get("solution")]
    assert len(written) == 1, f"{path.parent.name}: {len(written)} written answers"
    assert 1 <= written[0].metadata["nbgrader"]["points"] <= 2
    assert "**Model answer.**" in written[0].source and "**Rubric" in written[0].source
    released = json.loads(next((ROOT / "release" / path.parent.name).glob("*.ipynb")).read_text())
    gid = written[0].metadata["nbgrader"]["grade_id"]
    cell = next(c for c in released["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == gid)
    assert "".join(cell["source"]).strip() == "YOUR ANSWER HERE"
