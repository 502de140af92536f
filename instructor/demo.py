"""The whole instructor loop on three sample students, from release to the grade table.

``demo-correct`` hands in the instructor's solutions, ``demo-empty`` the released notebook
untouched, ``demo-buggy`` one plausible mistake from the bug zoo. Only students whose id
starts with ``demo-`` exist there, in ``.build/demo/``: real submissions are left alone. Each
chapter's sample class is graded by the class batch (``grade-class``'s path, in this process),
which also writes what the class got wrong (``mistakes/`` beside the demo's ``grades.csv``).
"""

from __future__ import annotations

import shutil
import time

from nboracle.classroom import batch
from nboracle.classroom import pipeline as P
from nboracle.classroom.class_report import ranked
from nboracle.classroom.course_root import CourseRoot
from nboracle.classroom.mistakes import read_record

from .zoo import variants_for

DEMO_PREFIX = "demo-"


def make_demo_submissions(root: CourseRoot, assignment: str) -> dict[str, str]:
    """Write the three demo students' notebooks; return {student: what they handed in}."""
    release_nb, answers = root.release_and_answers(assignment)
    handed_in = {
        "demo-correct": ("the instructor's solution", P.fill(release_nb, answers)),
        "demo-empty": ("the released notebook, untouched", release_nb),
    }
    variants = variants_for(assignment)
    if variants:
        bug = variants[0]
        handed_in["demo-buggy"] = (f"a bug: {bug.why}", P.fill(release_nb, bug.answers(answers)))
    for student, (_, nb) in handed_in.items():
        root.submit(assignment, student, nb)
    return {student: what for student, (what, _) in handed_in.items()}


def run_demo(root: CourseRoot, names: list[str]) -> int:
    """Grade the demo students in a course root of their own, ``.build/demo/`` under ``root``.

    The instructor's own gradebook, ``submitted/`` and ``feedback/`` are never touched.
    """
    start = time.time()
    demo_path = root.path / ".build" / "demo"
    print(f"== build {len(names)} assignment(s) and release them into {demo_path}")
    for name in names:
        root.sync(name)
    if demo_path.exists():
        shutil.rmtree(demo_path)
    demo = root.scratch_copy(demo_path, names)
    rows, pages = [], {}
    for name in names:
        described = make_demo_submissions(demo, name)
        print(f"== autograde {name} ({len(described)} demo students)")
        batch.grade_class(demo, name, runner=batch.InProcess(), progress=False)  # grade-class's path
        pages[name] = batch.write_class_report(demo, name)
        graded = demo.results(name)
        for student, what in described.items():
            result = graded[student]
            rows.append((name, student, result.auto_score, result.auto_max, what, result))
    csv = demo.export(demo.path / "grades.csv")

    print("\n== grade table (automatic points)")
    print(f"{'assignment':<26}{'student':<15}{'score':>9}  handed in")
    for name, student, score, top, what, _ in rows:
        print(f"{name:<26}{student:<15}{score:>5g}/{top:<3g}  {what}")
    for name, student, _, _, _, result in rows:
        if student == "demo-buggy":
            print(f"\n== what demo-buggy reads in its feedback for {name}")
            for gid in result.failed():
                print(f"  {gid}: {result.cells[gid].error}")
    print("\n== what the class got wrong (named mistakes; the instructor's report, never the students')")
    for name in names:
        found = ranked(read_record(demo, name))
        print(f"{name:<26}" + ("; ".join(f"{m['id']} ({len(m['students'])}): {m['why']}" for m in found) or "none named"))
    print(f"\nfeedback HTML: {demo.path / 'feedback'}/<student>/<assignment>/")
    print(f"grades CSV:    {csv}")
    if pages:
        term = next(iter(pages.values()))["term-html"]
        print(f"mistakes:      {term.parent}/<assignment>.html (and .csv); the term: {term}")
    print(f"done in {time.time() - start:.0f} s")
    return 0
