"""A class of honest, lazy, buggy and adversarial students, graded by the batch command.

Every student gets exactly what they earned (tampering earns the same as the bug it hides),
broken submissions are reported and skipped, and the batch never stops. Then the batch is run
again: nothing changes, manual grades survive.
"""

from __future__ import annotations

import json
import zipfile

import nbformat
import pytest

from instructor import batch
from instructor import pipeline as P
from instructor.zoo import variants_for

A, NB = "01_two_keys", "two_keys"
pytestmark = pytest.mark.pipeline

PATCH_CHECKS = '''
import numpy, torch, torch.testing, course, course.checks
numpy.allclose = lambda *a, **k: True
torch.allclose = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None
for _name in ["check_close", "check_shape", "check_rows_sum_to_one", "check_finite", "check_true"]:
    setattr(course.checks, _name, lambda *a, **k: None)
    setattr(course, _name, lambda *a, **k: None)
    globals()[_name] = lambda *a, **k: None
'''


def build_class(root):
    """{student: notebook or raw text}; plus what we expect of each."""
    release = P.read_nb(root / "release" / A / f"{NB}.ipynb")
    answers = P.solution_answers(P.read_nb(root / "source" / A / f"{NB}.ipynb"))
    zoo = {v.name: v for v in variants_for(A)}
    axis0 = zoo["softmax_axis0"].answers(answers)

    def with_(cells, edit=None):
        nb = P.fill(release, cells)
        if edit:
            edit(nb)
        return nb

    def blank_tests(nb):
        for cell in nb.cells:
            if (P.grade_id(cell) or "").startswith("test_"):
                cell.source = "pass  # I trust my code"

    def drop_tests(nb):
        nb.cells = [c for c in nb.cells if not (P.grade_id(c) or "").startswith("test_softmax")]

    def duplicate_ids(nb):
        nb.cells[3].id = nb.cells[2].id

    hand = answers["hand_answers"]
    cls = {f"correct-{i}": with_(answers) for i in range(3)}
    cls.update({f"empty-{i}": release for i in range(2)})
    cls.update({f"bug-{name}": with_(zoo[name].answers(answers))
                for name in ("softmax_axis0", "attention_no_scale", "attention_hardcoded_two_keys")})
    cls.update({
        "adv-blanked-tests": with_(axis0, blank_tests),
        "adv-deleted-tests": with_(axis0, drop_tests),
        "adv-patched-checks": with_({**axis0, "softmax": axis0["softmax"] + PATCH_CHECKS}),
        "adv-sys-exit": with_({**answers, "hand_answers": "import sys\nsys.exit(0)\n" + hand}),
        "adv-raise-systemexit": with_({**answers, "hand_answers": "raise SystemExit\n" + hand}),
        "adv-os-exit": with_({**answers, "hand_answers": "import os\nos._exit(0)"}),
        "adv-infinite-loop": with_({**answers, "hand_answers": "while True:\n    pass"}),
        "adv-megabytes": with_({**answers, "hand_answers": hand + "\nprint('x' * 5_000_000)"}),
        "adv-duplicate-ids": with_(answers, duplicate_ids),
        "adv-not-json": "{ this is not a notebook",
    })
    return cls


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    root = P.make_scratch_course(tmp_path_factory.mktemp("class"), [A])
    # grade infinite loops quickly in the test; the course's own limit is 120 s per cell
    with open(root / "nbgrader_config.py", "a") as config:
        config.write("\nc.Execute.timeout = 20\n")
    archive = root.parent / "class.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for student, nb in build_class(root).items():
            text = nb if isinstance(nb, str) else nbformat.writes(nb)
            zf.writestr(f"{student}/{NB}.ipynb", text)
        zf.writestr(f"adv-renamed/my_{NB}.ipynb", nbformat.writes(P.read_nb(root / "release" / A / f"{NB}.ipynb")))
    batch.collect(root, A, archive)
    (root / "submitted" / "adv-missing" / A).mkdir(parents=True)  # handed in an empty folder
    first = batch.grade_class(root, A, jobs=2, progress=False)
    return root, first


def test_every_student_is_accounted_for(graded_class):
    root, reports = graded_class
    assert len(reports) == 20
    assert {s for s, r in reports.items() if r.status == "skipped"} == {"adv-not-json", "adv-renamed", "adv-missing"}
    assert {s for s, r in reports.items() if r.status == "failed"} == {"adv-os-exit"}


def test_honest_students_get_what_they_earned(graded_class):
    _, reports = graded_class
    for i in range(3):
        assert reports[f"correct-{i}"].score == reports[f"correct-{i}"].max_score == 11
    for i in range(2):
        assert reports[f"empty-{i}"].score == 0 and reports[f"empty-{i}"].max_score == 11
    for bug in ("softmax_axis0", "attention_no_scale", "attention_hardcoded_two_keys"):
        assert 0 < reports[f"bug-{bug}"].score < 11


def test_tampering_earns_nothing_more_than_the_bug_it_hides(graded_class):
    _, reports = graded_class
    honest_bug = reports["bug-softmax_axis0"].score
    for student in ("adv-blanked-tests", "adv-deleted-tests", "adv-patched-checks"):
        assert reports[student].status == "graded"
        assert reports[student].max_score == 11, f"{student}: deleted tests must not shrink the maximum"
        assert reports[student].score == honest_bug, student
    assert "replaced the grader's check functions" in "; ".join(reports["adv-patched-checks"].problems)


def test_exits_loops_and_floods_cost_only_their_own_cells(graded_class):
    root, reports = graded_class
    for student in ("adv-sys-exit", "adv-raise-systemexit", "adv-infinite-loop"):
        assert reports[student].score == 9, student  # everything but the 2-point hand answers
        assert list(reports[student].failed_cells) == ["test_hand_answers"], student
    assert reports["adv-megabytes"].score == 11 and reports["adv-duplicate-ids"].score == 11
    flooded = root / "autograded" / "adv-megabytes" / A / f"{NB}.ipynb"
    assert flooded.stat().st_size < 300_000, "a 5 MB print must be cut in the autograded notebook"
    assert "kernel died" in reports["adv-os-exit"].problems[0]


def test_broken_submissions_are_reported_by_name(graded_class):
    root, reports = graded_class
    assert "renamed?" in reports["adv-renamed"].problems[0] and f"my_{NB}.ipynb" in reports["adv-renamed"].problems[0]
    assert "is missing" in reports["adv-missing"].problems[0]
    assert "not a readable notebook" in reports["adv-not-json"].problems[0]
    report = batch.write_report(root / "report.txt", A, reports).read_text()
    for student in ("adv-renamed", "adv-missing", "adv-not-json", "adv-os-exit"):
        assert f"## {student}" in report


def test_feedback_and_csv_for_every_graded_student(graded_class):
    root, reports = graded_class
    graded = {s for s, r in reports.items() if r.status == "graded"}
    for student in graded:
        assert (root / "feedback" / student / A / f"{NB}.html").exists(), student
    csv = P.export_grades(root, root / "grades.csv").read_text().splitlines()
    assert {line.split(",")[3] for line in csv[1:]} >= graded


def test_rerun_is_idempotent_and_keeps_manual_grades(graded_class):
    from nbgrader.api import Gradebook

    root, first = graded_class
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        grade = gb.find_grade("equal_keys_answer", NB, A, "correct-0")
        grade.manual_score = 2.0
        gb.db.commit()
    again = batch.grade_class(root, A, jobs=2, progress=False)
    assert {s for s, r in again.items() if r.status == "graded"} == set(), "unchanged work is not regraded"
    assert {s: r.score for s, r in again.items()} == {s: r.score for s, r in first.items()}
    regraded = batch.grade_class(root, A, jobs=2, regrade=True, progress=False)
    assert regraded["correct-0"].score == 11
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        assert gb.find_grade("equal_keys_answer", NB, A, "correct-0").manual_score == 2.0
    state = json.loads((root / "autograded" / batch.STATE_FILE).read_text())
    assert "adv-os-exit" not in state[A] and "correct-0" in state[A]
