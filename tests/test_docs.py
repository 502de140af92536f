"""What README.md counts is what the code has: chapters, zoo entries, tests and the demo table."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from nboracle.classroom import pipeline as P
from support import graded_chapter

from instructor.repository import REPO, REPOSITORY
from instructor.zoo import alternatives_for, variants_for

README = (REPO / "README.md").read_text()
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
           "ten": 10, "eleven": 11, "twelve": 12}
DEMO_ROW = re.compile(r"^(\d\d_[a-z0-9_]+)\s+(demo-[a-z]+)\s+(\d+)/(\d+)\s+(.*)$", re.MULTILINE)


def _automatic_points(assignment: str) -> float:
    nb = P.read_nb(REPOSITORY.notebook("source", assignment))
    return sum(float(c.metadata["nbgrader"].get("points", 0)) for c in nb.cells
               if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")
               and not c.metadata["nbgrader"].get("solution"))


def _one(pattern: str) -> re.Match:
    found = list(re.finditer(pattern, README, re.MULTILINE))
    assert len(found) == 1, f"README.md should say {pattern!r} once, found {len(found)}"
    return found[0]


def test_chapter_and_zoo_counts():
    chapters = REPOSITORY.assignments()
    opening = _one(r"^([A-Z][a-z]+) chapters, from attention")
    assert NUMBERS[opening.group(1).lower()] == len(chapters), "the opening line counts the chapters wrongly"
    table = re.findall(r"^\| `(\d\d_[a-z0-9_]+)` \|", README, re.MULTILINE)
    assert table == chapters, "the Chapters table lists other chapters than source/ has"
    zoo = _one(r"(\d+)\s+bug-zoo variants and (\d+) alternatives across the (\w+) chapters")
    variants = sum(len(variants_for(a)) for a in chapters)
    alternatives = sum(len(alternatives_for(a)) for a in chapters)
    assert (int(zoo.group(1)), int(zoo.group(2)), NUMBERS[zoo.group(3)]) == (variants, alternatives, len(chapters)), (
        f"README says {zoo.group(0)!r}; the code has {variants} variants and {alternatives} alternatives "
        f"across {len(chapters)} chapters")


def test_test_count():
    said = int(_one(r"The suite has (\d+) tests").group(1))
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "--ignore=tests/browser",
                           "-p", "no:cacheprovider"], cwd=REPO, capture_output=True, text=True)
    collected = re.search(r"(\d+) tests? collected", proc.stdout)
    assert collected, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert said == int(collected.group(1)), f"README says {said} tests, pytest collects {collected.group(1)}"


def test_demo_table_rows_match_the_chapters():
    rows = DEMO_ROW.findall(README)
    assert rows, "no demo table in README.md"
    for assignment, student, score, top, what in rows:
        assert assignment in REPOSITORY.assignments(), f"the demo table names {assignment}"
        assert float(top) == _automatic_points(assignment), (
            f"{assignment}: the demo table says {top} automatic points, the source has {_automatic_points(assignment):g}")
        if student == "demo-correct":
            assert score == top and what == "the instructor's solution"
        elif student == "demo-empty":
            assert score == "0" and what == "the released notebook, untouched"
        else:
            assert what == f"a bug: {variants_for(assignment)[0].why}", f"{assignment}: the demo's bug is another"


def _buggy_rows():
    return [pytest.param(a, int(score), marks=pytest.mark.pipeline, id=a)
            for a, student, score, _, _ in DEMO_ROW.findall(README) if student == "demo-buggy"]


@pytest.mark.parametrize("assignment,score", _buggy_rows())
def test_demo_buggy_scores_are_what_the_bug_earns(assignment, score, scratch_root):
    """The demo's buggy student is the chapter's first zoo variant: its score, from the chapter's grading run."""
    chapter = graded_chapter(scratch_root, assignment)  # the chapter's one nbgrader run on this worker
    result = chapter.variant_result(chapter.variants[variants_for(assignment)[0].name])
    assert result.auto_score == score, f"{assignment}: README's demo table says {score}, the bug earns {result.auto_score:g}"
