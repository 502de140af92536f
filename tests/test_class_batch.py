"""A class of honest, lazy, buggy and adversarial students, graded by the batch command.

Every student gets exactly what they earned (tampering earns the same as the bug it hides),
broken submissions are reported and skipped, and the batch never stops. Every attack on the
grading kernel's machinery is flagged for review with a reason; no honest student is. Then
the batch is run again: nothing changes, manual grades survive.
"""

from __future__ import annotations

import json
import zipfile

import nbformat
import pytest
from nboracle.classroom import batch
from nboracle.classroom import pipeline as P
from support import ATTACKS, CLASS_POINTS, build_class
from support import CLASS_ASSIGNMENT as A
from support import CLASS_NOTEBOOK as NB

from instructor.repository import REPOSITORY

pytestmark = pytest.mark.pipeline


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    root = REPOSITORY.scratch_copy(tmp_path_factory.mktemp("class"), [A])
    # grade infinite loops quickly in the test; the course's own limit is 120 s per cell
    with open(root.config, "a") as config:
        config.write("\nc.Execute.timeout = 20\n")
    archive = root.path.parent / "class.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for student, nb in build_class(root).items():
            text = nb if isinstance(nb, str) else nbformat.writes(nb)
            zf.writestr(f"{student}/{NB}.ipynb", text)
        zf.writestr(f"adv-renamed/my_{NB}.ipynb", nbformat.writes(P.read_nb(root.notebook("release", A))))
    batch.collect(root, A, archive)
    root.folder("submitted", A, "adv-missing").mkdir(parents=True)  # handed in an empty folder
    first = batch.grade_class(root, A, jobs=2, progress=False)
    return root, first


def test_every_student_is_accounted_for(graded_class):
    root, reports = graded_class
    assert len(reports) == 20 + len(ATTACKS) + 1
    assert {s for s, r in reports.items() if r.status == "skipped"} == {"adv-not-json", "adv-renamed", "adv-missing"}
    failed = {s for s, r in reports.items() if r.status == "failed"}
    assert failed == {"adv-os-exit"}, {s: reports[s].problems for s in failed}


def test_honest_students_get_what_they_earned(graded_class):
    _, reports = graded_class
    for i in range(3):
        assert reports[f"correct-{i}"].score == reports[f"correct-{i}"].max_score == CLASS_POINTS
    for i in range(2):
        assert reports[f"empty-{i}"].score == 0 and reports[f"empty-{i}"].max_score == CLASS_POINTS
    for bug in ("softmax_axis0", "attention_no_scale", "attention_hardcoded_two_keys"):
        assert 0 < reports[f"bug-{bug}"].score < CLASS_POINTS
    assert all(reports[f"correct-{i}"].sandboxed is True for i in range(3)), "each kernel says it was sandboxed"


def test_tampering_earns_nothing_more_than_the_bug_it_hides(graded_class):
    _, reports = graded_class
    honest_bug = reports["bug-softmax_axis0"].score
    for student in ("adv-blanked-tests", "adv-deleted-tests", "adv-patched-checks"):
        assert reports[student].status == "graded"
        assert reports[student].max_score == CLASS_POINTS, f"{student}: deleted tests must not shrink the maximum"
        assert reports[student].score == honest_bug, student
    assert any("replaces numpy.allclose" in reason for reason in reports["adv-patched-checks"].review)


HONEST = ["correct-0", "correct-1", "correct-2", "empty-0", "empty-1", "bug-softmax_axis0",
          "bug-attention_no_scale", "bug-attention_hardcoded_two_keys"]


def test_attacks_on_the_kernel_earn_what_the_wrong_code_earns_and_are_flagged(graded_class):
    _, reports = graded_class
    honest_bug = reports["bug-softmax_axis0"].score
    assert 0 < honest_bug < CLASS_POINTS
    for name in ATTACKS:
        report = reports[f"atk-{name}"]
        assert report.status == "graded", (name, report.problems)
        assert (report.score, report.max_score) == (honest_bug, CLASS_POINTS), (name, report.failed_cells)
        assert report.review, f"atk-{name} is not flagged for review"
    in_call = reports["atk-in-call"]
    assert in_call.score <= honest_bug and in_call.review
    assert any(".settrace" in reason for reason in in_call.review), in_call.review
    reasons = {name: " ".join(reports[f"atk-{name}"].review) for name in ATTACKS}
    # what the static scan says (instructor.scan): the in-kernel guard's reports were retired (issue 31)
    assert "input_transformers_cleanup" in reasons["input-transformer"] and "get_ipython" in reasons["input-transformer"]
    assert "ast_transformers" in reasons["ast-transformer"]
    assert "set_custom_exc" in reasons["custom-exc"]
    assert "showtraceback" in reasons["showtraceback"]
    assert ".events" in reasons["cleared-events"] and "numpy.allclose" in reasons["cleared-events"]
    assert "writes globals()[...]" in reasons["course-noop"]
    assert ".settrace" in reasons["settrace"]
    assert "sys.excepthook" in reasons["excepthook"]
    assert "builtins.isinstance" in reasons["builtins"] and "builtins.AssertionError" in reasons["builtins"]
    assert "3 messages that the grader could not verify or read" in reasons["forged-messages"]


def test_no_honest_student_is_flagged(graded_class):
    _, reports = graded_class
    for student in HONEST:
        assert reports[student].review == [], (student, reports[student].review)
    flagged = {s for s, r in reports.items() if r.review}
    assert flagged >= {"adv-patched-checks"} | {f"atk-{name}" for name in ATTACKS}


def test_review_reaches_csv_report_and_formgrader(graded_class):
    import csv

    from nbgrader.api import Gradebook

    root, reports = graded_class
    report = batch.write_report(root.path / "report.txt", A, reports).read_text()
    assert "## atk-settrace (graded) FOR REVIEW" in report and "  review: " in report
    table = batch.format_table(A, reports)
    assert f"{batch.REVIEW_MARK}" in [line.split()[3] for line in table.splitlines() if line.startswith("atk-builtins")][0]
    assert "for review" in table.splitlines()[-1]
    rows = {r["student_id"]: r for r in csv.DictReader(root.export(root.path / "review.csv").open())}
    assert rows["atk-settrace"]["needs_review"] == "yes" and ".settrace" in rows["atk-settrace"]["review_reasons"]
    assert rows["correct-0"]["needs_review"] == "" and rows["correct-0"]["score"] == f"{CLASS_POINTS:.1f}"
    with Gradebook(root.gradebook_url) as gb:
        assert gb.find_submission(A, "atk-settrace").needs_manual_grade
        flagged = gb.find_submission_notebook(NB, A, "atk-settrace")
        assert any(g.needs_manual_grade for g in flagged.grades if g.name.startswith("test_"))
        honest = gb.find_submission_notebook(NB, A, "correct-1")
        assert not any(g.needs_manual_grade for g in honest.grades if g.name.startswith("test_"))
    # what the formgrader's submission list reads
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    api = NbGraderAPI(CourseDirectory(root=str(root.path)))
    assert api.get_submission(A, "atk-settrace")["needs_manual_grade"] is True


def test_exits_loops_and_floods_cost_only_their_own_cells(graded_class):
    root, reports = graded_class
    for student in ("adv-sys-exit", "adv-raise-systemexit", "adv-infinite-loop"):
        assert reports[student].score == CLASS_POINTS - 2, student  # everything but the 2-point hand answers
        assert list(reports[student].failed_cells) == ["test_hand_answers"], student
    assert reports["adv-megabytes"].score == CLASS_POINTS and reports["adv-duplicate-ids"].score == CLASS_POINTS
    flooded = root.notebook("autograded", A, "adv-megabytes")
    assert flooded.stat().st_size < 300_000, "a 5 MB print must be cut in the autograded notebook"
    assert "kernel died" in reports["adv-os-exit"].problems[0]


def test_broken_submissions_are_reported_by_name(graded_class):
    root, reports = graded_class
    assert "renamed?" in reports["adv-renamed"].problems[0] and f"my_{NB}.ipynb" in reports["adv-renamed"].problems[0]
    assert "is missing" in reports["adv-missing"].problems[0]
    assert "not a readable notebook" in reports["adv-not-json"].problems[0]
    report = batch.write_report(root.path / "report.txt", A, reports).read_text()
    for student in ("adv-renamed", "adv-missing", "adv-not-json", "adv-os-exit"):
        assert f"## {student}" in report


def test_feedback_and_csv_for_every_graded_student(graded_class):
    root, reports = graded_class
    graded = {s for s, r in reports.items() if r.status == "graded"}
    for student in graded:
        assert root.notebook("feedback", A, student).exists(), student
    csv = root.export(root.path / "grades.csv").read_text().splitlines()
    assert {line.split(",")[3] for line in csv[1:]} >= graded


def test_rerun_is_idempotent_and_keeps_manual_grades(graded_class):
    from nbgrader.api import Gradebook

    root, first = graded_class
    with Gradebook(root.gradebook_url) as gb:
        grade = gb.find_grade("equal_keys_answer", NB, A, "correct-0")
        grade.manual_score = 2.0
        gb.db.commit()
    # correct-0 hands in again (the same answers, saved once more): only that student is regraded
    resubmitted = root.notebook("submitted", A, "correct-0")
    nb = P.read_nb(resubmitted)
    nb.metadata["saved_again"] = True
    P.write_nb(nb, resubmitted)
    again = batch.grade_class(root, A, jobs=2, progress=False)
    assert {s for s, r in again.items() if r.status == "graded"} == {"correct-0"}, "unchanged work is not regraded"
    assert {s: r.score for s, r in again.items()} == {s: r.score for s, r in first.items()}
    assert {s: r.review for s, r in again.items()} == {s: r.review for s, r in first.items()}
    assert again["correct-0"].score == CLASS_POINTS
    with Gradebook(root.gradebook_url) as gb:
        assert gb.find_grade("equal_keys_answer", NB, A, "correct-0").manual_score == 2.0
    state = json.loads((root.path / "autograded" / batch.STATE_FILE).read_text())
    assert "adv-os-exit" not in state[A] and "correct-0" in state[A]
