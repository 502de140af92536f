"""The class report counts mistakes: a generated class of known make-up gives exactly its counts.

Twelve students of chapter 01, graded by the class batch (two worker processes): two hand in
the solution, one the released notebook, six one zoo mistake each (three of the same), one a
bug no zoo variant describes, one only the first exercise. The record, the page and the CSVs
must say exactly that. Counting across the term is checked on records written by hand.
"""

from __future__ import annotations

import csv
import json

import pytest
from nboracle.classroom import batch, class_report
from nboracle.classroom import mistakes as M
from nboracle.classroom import pipeline as P

from instructor.mistakes import FAMILIES, catalogue
from instructor.repository import REPOSITORY
from instructor.zoo import chapter_modules, variants_for

pytestmark = pytest.mark.pipeline

A = "01_two_keys"
PLANTED = {"attention_no_scale": 3, "softmax_axis0": 2, "attention_divides_by_dk": 1, "hand_answers_swapped": 1}
SOFTMAX_TESTS = {"test_softmax_rows", "test_softmax_stable", "test_softmax_values"}
UNKNOWN_BUG = ("return output, weights", "return 2 * output, weights")  # in no zoo variant


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = REPOSITORY.scratch_copy(tmp_path_factory.mktemp("report"), [A])
    release, answers = root.release_and_answers(A)
    zoo = {v.name: v for v in variants_for(A)}
    handed_in = {"correct-0": answers, "correct-1": answers, "empty-0": {},
                 "unknown-bug": {**answers, "attention": answers["attention"].replace(*UNKNOWN_BUG)},
                 "only-softmax": {"softmax": answers["softmax"]}}
    for name, count in PLANTED.items():
        handed_in.update({f"{name}-{i}": zoo[name].answers(answers) for i in range(count)})
    for student, cells in handed_in.items():
        root.submit(A, student, P.fill(release, cells))
    reports = batch.grade_class(root, A, jobs=2, progress=False)
    assert {r.status for r in reports.values()} == {"graded"}, {s: r.problems for s, r in reports.items()}
    return root, reports, M.read_record(root, A), batch.write_class_report(root, A)


def test_each_student_and_test_cell_is_classified(graded):
    root, reports, record, _ = graded
    cells = {s: data["cells"] for s, data in record["students"].items()}
    tests = set(M.released(root, A)["two_keys"].tests)
    assert set(cells) == set(reports) and all(set(c) == tests for c in cells.values())
    outcome = {s: {t: c["outcome"] for t, c in cs.items()} for s, cs in cells.items()}
    assert set(outcome["correct-0"].values()) == {M.PASSED}
    assert set(outcome["empty-0"].values()) == {M.NOT_ATTEMPTED}
    # the first exercise done, the rest as released: the rest is "not attempted", not failed
    assert {t: o for t, o in outcome["only-softmax"].items() if t in SOFTMAX_TESTS} == dict.fromkeys(SOFTMAX_TESTS, M.PASSED)
    assert {o for t, o in outcome["only-softmax"].items() if t not in SOFTMAX_TESTS} == {M.NOT_ATTEMPTED}
    assert M.UNRECOGNISED in outcome["unknown-bug"].values() and M.MISTAKE not in outcome["unknown-bug"].values()
    unknown = [c["message"] for c in cells["unknown-bug"].values() if c["outcome"] == M.UNRECOGNISED]
    assert all(unknown), "an unrecognised failure keeps its message for the report"
    zoo = {v.name: v for v in variants_for(A)}
    for name, count in PLANTED.items():
        for i in range(count):
            named = {t: c["mistakes"] for t, c in cells[f"{name}-{i}"].items() if c["outcome"] == M.MISTAKE}
            assert named == dict.fromkeys(zoo[name].expect, [name]), (name, named)
    # the record stands beside the gradebook, never where a student is served from
    assert M.record_path(root, A).parent == root.path / "mistakes"


def test_counts_per_test_cell_are_the_planted_ones(graded):
    root, reports, record, pages = graded
    counts = class_report.cell_counts(record)
    zoo = {v.name: v for v in variants_for(A)}
    for test, c in counts.items():
        assert c[M.PASSED] + c[M.MISTAKE] + c[M.UNRECOGNISED] + c[M.NOT_ATTEMPTED] == len(reports) == 12, test
        expected = {m: n for m, n in PLANTED.items() if test in zoo[m].expect}
        assert dict(c["mistakes"]) == expected, test
        assert c[M.MISTAKE] == sum(expected.values()), test
        assert c[M.NOT_ATTEMPTED] == (1 if test in SOFTMAX_TESTS else 2), test
    rows = {r["test"]: r for r in csv.DictReader(pages["csv"].open())}
    assert rows["test_attention_scaling"]["mistakes"] == "attention_no_scale=3; attention_divides_by_dk=1"
    assert rows["test_hand_answers"]["not_attempted"] == "2" and rows["test_hand_answers"]["named_mistake"] == "1"
    # the one bug no zoo variant describes is the only failure without a named mistake beside it
    unknown = {t for t, c in record["students"]["unknown-bug"]["cells"].items() if c["outcome"] == M.UNRECOGNISED}
    for test, c in counts.items():
        assert c[M.UNRECOGNISED] - c["alongside"] == (test in unknown), test


def test_mistakes_are_ranked_by_students_with_the_section_to_reteach(graded):
    _, _, record, pages = graded
    ranking = class_report.ranked(record)
    assert [(m["id"], len(m["students"])) for m in ranking] == sorted(
        PLANTED.items(), key=lambda item: (-item[1], item[0]))
    assert ranking[0]["section"].startswith("Part B") and ranking[0]["family"] == "no-sqrt-scaling"
    rows = list(csv.DictReader(pages["ranked"].open()))
    assert rows[0]["mistake"] == "attention_no_scale" and rows[0]["students"] == "3"
    assert rows[0]["who"] == "attention_no_scale-0 attention_no_scale-1 attention_no_scale-2"
    page = pages["html"].read_text()
    assert "data:image/png;base64," in page and "Part B" in page and "unknown-bug" in page
    assert pages["term-html"].exists() and A in pages["term-csv"].read_text()
    assert "<p>Extensions: none.</p>" in page


def test_the_report_says_who_has_an_extension(graded):
    """An extension given before or after a submission (nboracle.grader.extensions) is on the page."""
    from datetime import datetime

    from nbgrader.api import Gradebook
    from nboracle.grader.extensions import grant

    root = graded[0]
    with Gradebook(root.gradebook_url) as gb:
        gb.update_or_create_assignment(A, duedate=datetime(2099, 1, 1))
        grant(gb, A, "empty-0", 48)
    try:
        page = class_report.write_assignment(root, A)["html"].read_text()
        assert "<p>Extensions: empty-0 48 h (hours after the due date).</p>" in page
        assert "<td>empty-0</td>" in page and "<td>48 h</td>" in page
    finally:
        with Gradebook(root.gradebook_url) as gb:
            grant(gb, A, "empty-0", 0)
            gb.update_or_create_assignment(A, duedate=None)
        class_report.write_assignment(root, A)


def test_nothing_of_it_reaches_students(graded):
    root, *_ = graded
    for folder in ("release", "feedback", "autograded"):
        found = [p for p in (root.path / folder).rglob("*") if "mistakes" in p.parts or p.suffix == ".json"
                 and p.name != ".batch-state.json"]
        assert not found, found
    feedback = "".join(p.read_text() for p in (root.path / "feedback").rglob("*.html"))
    assert "attention_no_scale" not in feedback, "a mistake id is the instructor's word, not in feedback"


def test_a_regrade_keeps_unchanged_students_and_replaces_a_resubmission(graded):
    root, _, first, _ = graded
    release, answers = root.release_and_answers(A)
    root.submit(A, "softmax_axis0-1", P.fill(release, answers))  # fixed it and handed in again
    batch.grade_class(root, A, jobs=1, progress=False)
    again = M.read_record(root, A)
    assert {t: c["outcome"] for t, c in again["students"]["softmax_axis0-1"]["cells"].items()} == \
        dict.fromkeys(first["students"]["softmax_axis0-1"]["cells"], M.PASSED)
    assert {s: d for s, d in again["students"].items() if s != "softmax_axis0-1"} == \
        {s: d for s, d in first["students"].items() if s != "softmax_axis0-1"}


def test_a_lost_record_is_rebuilt_from_the_gradebook_without_grading(graded):
    root, *_ = graded
    before = M.read_record(root, A)
    M.record_path(root, A).unlink()
    reports = batch.grade_class(root, A, jobs=1, progress=False)
    assert {r.status for r in reports.values()} == {"unchanged"}
    assert M.read_record(root, A)["students"] == before["students"]


def test_the_catalogue_follows_the_zoo_and_its_families_exist():
    for assignment, modules in chapter_modules().items():
        names = {v.name for m in modules for v in m.VARIANTS}
        found = catalogue(REPOSITORY, assignment)
        assert set(found) == names
        assert all(entry["section"] and entry["cells"] for entry in found.values()), assignment
    for family, (_, members) in FAMILIES.items():
        for assignment, variants in members.items():
            stale = set(variants) - {v.name for v in variants_for(assignment)}
            assert not stale, f"{family}: {assignment} has no variants {sorted(stale)}"
        assert len(members) > 1, f"{family} is met in one chapter only"


def test_the_term_shows_a_returning_mistake_as_one_row(tmp_path):
    class Root:
        path = tmp_path

    def record(assignment, made):
        tests = {f"test_{i}": {"points": 1.0, "section": "S"} for i in range(2)}
        students = {s: {"score": 1.0, "max_score": 2.0, "cells": {
            "test_0": {"outcome": M.MISTAKE, "mistakes": [m]}, "test_1": {"outcome": M.PASSED}}} for s, m in made.items()}
        cat = {m: {"why": m, "section": "S", "family": "mask-convention" if "invert" in m else "",
                   "family_why": "the other convention" if "invert" in m else ""} for m in made.values()}
        M.save_record(Root, assignment, {"assignment": assignment, "tests": tests, "catalogue": cat, "students": students})

    record("03_masks", {"ann": "mask_inverted", "bob": "padding_inverted", "cy": "quiz_wrong"})
    record("04_encoder_block", {"ann": "padding_mask_inverted", "dee": "padding_mask_inverted", "ed": "quiz_wrong"})
    pages = class_report.write_term(Root)
    rows = {r["mistake"]: r for r in csv.DictReader(pages["csv"].open())}
    assert rows["mask-convention"]["assignments"] == "2" and rows["mask-convention"]["students"] == "3"
    assert (rows["mask-convention"]["03_masks"], rows["mask-convention"]["04_encoder_block"]) == ("2", "2")
    assert rows["03_masks/quiz_wrong"]["students"] == "1" and "04_encoder_block/quiz_wrong" in rows
    assert list(rows)[0] == "mask-convention", "a mistake met in more assignments comes first"
    assert rows["mask-convention"]["why"] == "the other convention" and rows["03_masks/quiz_wrong"]["why"] == "quiz_wrong"
    assert json.loads((tmp_path / "mistakes" / "03_masks.json").read_text())["assignment"] == "03_masks"
