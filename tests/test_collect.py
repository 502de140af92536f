"""Collecting a class drops no submission silently (issue 22).

A class zip as an LMS export makes it: folder names with spaces and accents, a folder with
only notes, two notebooks in one folder, a notebook one folder down or in a zip of its own,
macOS junk, a stray file at the top and an unsafe zip member. Every entry ends up collected
(under a safe, stable, reversible id) or refused by name; the batch shows the names as handed
in, exits non-zero when anyone was not graded, and leaves nothing untracked that git does not
ignore.
"""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
import unicodedata
import zipfile

import nbformat
import pytest
from nboracle.classroom import batch
from nboracle.classroom import collect as C
from nboracle.classroom import pipeline as P
from support import CLASS_ASSIGNMENT as A
from support import CLASS_NOTEBOOK as NB

from instructor.repository import REPOSITORY

SPACE, ACCENTS = "carl von space", "zoë-ñ"


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = REPOSITORY.scratch_copy(tmp_path_factory.mktemp("collect"), [A])
    release, answers = root.release_and_answers(A)
    return root, nbformat.writes(release), nbformat.writes(P.fill(release, answers))


def lms_zip(path, stub: str, solved: str):
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as zf:
        zf.writestr(f"{NB}.ipynb", solved)
    with zipfile.ZipFile(path, "w") as zf:
        w = "export-2026/"  # one wrapping folder, as LMS downloads have
        zf.writestr(f"{w}alice/{NB}.ipynb", solved)
        zf.writestr(f"{w}{SPACE}/{NB}.ipynb", solved)
        zf.writestr(f"{w}{unicodedata.normalize('NFD', ACCENTS)}/{NB}.ipynb", solved)  # as macOS zips it
        zf.writestr(f"{w}notes-only/notes.txt", "I could not finish, sorry")
        zf.writestr(f"{w}two/{NB}.ipynb", stub)
        zf.writestr(f"{w}two/{NB}-Copy1.ipynb", solved)
        zf.writestr(f"{w}nested/{NB}/{NB}.ipynb", solved)
        zf.writestr(f"{w}zipped/work.zip", inner.getvalue())
        zf.writestr(f"{w}shadow/{NB}.ipynb", solved)
        zf.writestr(f"{w}shadow/numpy.py", "raise SystemExit('shadowed')")
        zf.writestr(f"{w}__MACOSX/alice/._{NB}.ipynb", "junk")
        zf.writestr(f"{w}.DS_Store", "junk")
        zf.writestr(f"{w}{NB}.ipynb", solved)  # whose?
        zf.writestr(f"{w}evil/../../escape.ipynb", solved)
    return path


@pytest.fixture(scope="module")
def collected(course, tmp_path_factory):
    root, stub, solved = course
    found = C.collect_class(root, A, lms_zip(tmp_path_factory.mktemp("zips") / "class.zip", stub, solved))
    return root, found


def test_ids_are_safe_stable_and_reversible():
    assert C.student_id("s1234567") == "s1234567" and C.student_id("ann.lee@uni.example") == "ann.lee@uni.example"
    space = C.student_id(SPACE)
    assert space.startswith("carl-von-space-") and C.SAFE_ID.match(space)
    assert C.student_id(ACCENTS).startswith("zoe-n-")
    assert C.student_id(unicodedata.normalize("NFD", ACCENTS)) == C.student_id(ACCENTS)
    assert C.student_id("Carl von Space") != space  # a different name, a different id
    assert C.SAFE_ID.match(C.student_id("李 小龍")) and C.student_id("李 小龍") != C.student_id("王 小明")
    assert C.SAFE_ID.match(C.student_id("../x")) and C.student_id("..") != ".."


def test_every_student_folder_is_collected_under_an_id_that_names_it(collected):
    root, found = collected
    by_name = {name: sid for sid, name in found.students.items()}
    assert set(by_name) == {"alice", SPACE, ACCENTS, "notes-only", "two", "nested", "zipped", "shadow"}
    assert by_name["alice"] == "alice"
    assert set(root.students(A)) == set(found.students)
    assert C.folder_names(root) == {by_name[SPACE]: SPACE, by_name[ACCENTS]: ACCENTS}
    for name in ("alice", SPACE, ACCENTS, "nested", "zipped", "shadow"):
        assert root.notebook("submitted", A, by_name[name]).exists(), name


def test_nothing_is_dropped_silently(collected):
    root, found = collected
    assert found.ignored == [".DS_Store", "__MACOSX"]
    assert f"{NB}.ipynb" in found.refused and "not in a student folder" in found.refused[f"{NB}.ipynb"]
    assert any("escape.ipynb" in entry and "outside the zip" in why for entry, why in found.refused.items())
    assert not (root.path / "downloaded" / "escape.ipynb").exists()
    assert list(root.folder("submitted", A, "notes-only").iterdir()) == []
    assert "notes.txt" in " ".join(found.notes["notes-only"])
    assert sorted(p.name for p in root.folder("submitted", A, "two").iterdir()) == [f"{NB}-Copy1.ipynb", f"{NB}.ipynb"]
    assert f"found in {NB}/" in " ".join(found.notes["nested"])
    # a student's module next to the notebook would shadow the real one in the grading kernel
    assert not (root.folder("submitted", A, "shadow") / "numpy.py").exists()
    assert "numpy.py" in " ".join(found.notes["shadow"])
    # the zip and everything it held stay in downloaded/
    assert (root.archive(A) / "class.zip").exists()
    assert (root.archive(A).parent / "extracted" / "export-2026" / "notes-only" / "notes.txt").exists()


def test_the_batch_accounts_for_every_entry_and_exits_non_zero(collected):
    root, found = collected
    reports = {sid: batch.StudentReport(sid, status="graded") for sid in found.students}
    reports["notes-only"].status = "skipped"
    batch.account(root, A, reports, found)
    table = batch.format_table(A, reports)
    assert f"folder {SPACE!r}" in table and f"folder {ACCENTS!r}" in table
    assert f"refused: {NB}.ipynb" in reports and reports[f"refused: {NB}.ipynb"].status == "refused"
    assert table.splitlines()[-1].startswith(f"{A}: 7 graded, 0 unchanged, 1 skipped, 0 failed, 2 refused")
    status, line = C.exit_status(A, reports)
    assert status == 1 and "3 of 10 submission(s) not graded (1 skipped, 2 refused)" in line
    assert C.exit_status(A, {"a": batch.StudentReport("a", status="unchanged")}) == (0, None)
    report = batch.write_report(root.path / "r.txt", A, reports).read_text()
    assert f"folder {SPACE!r}" in report and "## notes-only (skipped)" in report
    # a later run without --from still names what the last collection refused
    again = batch.account(root, A, {}, None)
    assert set(again) == {f"refused: {entry}" for entry in found.refused}


def test_a_class_folder_and_links_in_it(course, tmp_path):
    root, _, solved = course
    cls = tmp_path / "class"
    (cls / "bob").mkdir(parents=True)
    (cls / "bob" / f"{NB}.ipynb").write_text(solved)
    (cls / "eve").mkdir()
    (cls / "eve" / f"{NB}.ipynb").symlink_to("/etc/passwd")
    (cls / "mallory").symlink_to(tmp_path)
    found = C.collect_class(root, A, cls)
    assert set(found.students) == {"bob", "eve"}
    assert found.refused == {"mallory": "a link, not a student folder"}
    assert not root.notebook("submitted", A, "eve").exists() and "is a link" in found.notes["eve"][0]
    with pytest.raises(P.PipelineError, match="which collection empties first"):
        C.collect_class(root, A, root.archive(A).parent / "extracted")
    assert (root.archive(A).parent / "extracted" / "class" / "bob").is_dir(), "the source is never emptied"
    with pytest.raises(P.PipelineError, match="neither a folder nor a zip"):
        C.collect_class(root, A, cls / "bob" / f"{NB}.ipynb")


# ---------------------------------------------------------------- graded end to end


@pytest.mark.pipeline
def test_grade_class_shows_names_exits_non_zero_and_leaves_nothing_unignored(course, tmp_path, monkeypatch, capsys):
    from instructor import __main__ as cli

    _, stub, solved = course
    root = REPOSITORY.scratch_copy(tmp_path / "course", [A])  # a class of its own
    shutil.copy2(REPOSITORY.path / ".gitignore", root.path / ".gitignore")
    shutil.copy2(REPOSITORY.path / "Makefile", root.path / "Makefile")
    archive = tmp_path / "small.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(f"{SPACE}/{NB}.ipynb", solved)
        zf.writestr(f"{ACCENTS}/{NB}.ipynb", stub)
        zf.writestr(f"{ACCENTS}/{NB}-Copy1.ipynb", solved)
        zf.writestr("readme.txt", "from the LMS")
    monkeypatch.setattr(cli, "ROOT", root)
    status = cli.main(["grade-class", A, "--from", str(archive), "--jobs", "2", "--to", str(root.path / "grades.csv")])
    out = capsys.readouterr()
    assert status == 1, out
    assert f"grade-class {A}: 1 of 3 submission(s) not graded (1 refused)" in out.err
    space, accents = C.student_id(SPACE), C.student_id(ACCENTS)
    lines = {line.split()[0]: line for line in out.out.splitlines() if line.split()}
    assert "12/12" in lines[space] and f"folder {SPACE!r}" in lines[space]
    assert "0/12" in lines[accents] and "REVIEW" in lines[accents] and f"folder {ACCENTS!r}" in lines[accents]
    report = (root.path / f"report-{A}.txt").read_text()
    assert f"{NB}-Copy1.ipynb (4 of 5 answers filled in)" in report and "## refused: readme.txt (refused)" in report
    assert f"mistakes: {root.path / 'mistakes' / A}.html" in out.out  # the class report (issue 40)
    assert (root.path / "mistakes" / f"{A}.csv").is_file() and (root.path / "mistakes" / "term.html").is_file()
    rows = {r["student_id"]: r for r in csv.DictReader((root.path / "grades.csv").open())}
    assert rows[space]["folder"] == SPACE and rows[accents]["folder"] == ACCENTS and rows[accents]["needs_review"]

    def untracked():
        subprocess.run(["git", "init", "-q"], cwd=root.path, check=True)
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=root.path,
                             capture_output=True, text=True, check=True).stdout
        return {line[3:].split("/")[0] for line in out.splitlines()}

    # what a clone tracks (the scratch copy is no clone: its own config, sources and release)
    assert untracked() <= {".gitignore", "Makefile", "nbgrader_config.py", "source", "release"}
    proc = subprocess.run(["make", "clean"], cwd=root.path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert not (root.path / "downloaded").exists() and not (root.path / f"report-{A}.txt").exists()
    assert not (root.path / "mistakes").exists()
    assert root.notebook("submitted", A, space).exists(), "make clean never removes students' work"


def test_a_zip_bomb_is_refused_by_name_and_the_rest_collected(course, tmp_path, monkeypatch):
    root, _, solved = course
    monkeypatch.setattr(C, "MEMBER_LIMIT", 2**20)
    monkeypatch.setattr(C, "ZIP_LIMIT", 3 * 2**20)
    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"alice/{NB}.ipynb", solved)
        zf.writestr("bob/huge.bin", b"\0" * (2**20 + 1))  # compresses to about 1 KB
        for i in range(4):
            zf.writestr(f"fill-{i}/{NB}.ipynb", solved + " " * (2**20 - len(solved) - 10))
    found = C.collect_class(root, A, bomb)
    assert "alice" in found.students
    refused = {key.split(":", 1)[1]: why for key, why in found.refused.items()}
    assert "more than 1 MB" in refused["bob/huge.bin"]
    assert any("in all" in why for why in refused.values()), "the zip's total is capped too"
    extracted = root.archive(A).parent / "extracted"
    assert sum(p.stat().st_size for p in extracted.rglob("*") if p.is_file()) <= 3 * 2**20
