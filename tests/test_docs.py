"""What README.md and docs/ say is what the code has.

The README's chapters and demo table, docs/TESTING.md's zoo and test counts, the make targets
every page names, every relative link, the index of docs/, and docs/SPEED.md's table, which
bench/benchmark.py writes.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import automatic_points, graded_chapter

from instructor.repository import REPO, REPOSITORY
from instructor.zoo import alternatives_for, variants_for

README = (REPO / "README.md").read_text()
DOCS = REPO / "docs"
TESTING = (DOCS / "TESTING.md").read_text()
PAGES = [REPO / "README.md", *sorted(DOCS.glob("*.md"))]
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
           "ten": 10, "eleven": 11, "twelve": 12}
DEMO_ROW = re.compile(r"^(\d\d_[a-z0-9_]+)\s+(demo-[a-z]+)\s+(\d+)/(\d+)\s+(.*)$", re.MULTILINE)


def _one(pattern: str, text: str = README, page: str = "README.md") -> re.Match:
    found = list(re.finditer(pattern, text, re.MULTILINE))
    assert len(found) == 1, f"{page} should say {pattern!r} once, found {len(found)}"
    return found[0]


def test_chapter_and_zoo_counts():
    chapters = REPOSITORY.assignments()
    opening = _one(r"^([A-Z][a-z]+) chapters, from attention")
    assert NUMBERS[opening.group(1).lower()] == len(chapters), "the opening line counts the chapters wrongly"
    table = re.findall(r"^\| `(\d\d_[a-z0-9_]+)` \|", README, re.MULTILINE)
    assert table == chapters, "the Chapters table lists other chapters than source/ has"
    zoo = _one(r"(\d+)\s+bug-zoo variants and (\d+) alternatives across the (\w+) chapters", TESTING, "docs/TESTING.md")
    variants = sum(len(variants_for(a)) for a in chapters)
    alternatives = sum(len(alternatives_for(a)) for a in chapters)
    assert (int(zoo.group(1)), int(zoo.group(2)), NUMBERS[zoo.group(3)]) == (variants, alternatives, len(chapters)), (
        f"docs/TESTING.md says {zoo.group(0)!r}; the code has {variants} variants and {alternatives} alternatives "
        f"across {len(chapters)} chapters")


def test_test_count():
    said = int(_one(r"The suite has (\d+) tests", TESTING, "docs/TESTING.md").group(1))
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "--ignore=tests/browser",
                           "-p", "no:cacheprovider"], cwd=REPO, capture_output=True, text=True)
    collected = re.search(r"(\d+) tests? collected", proc.stdout)
    assert collected, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert said == int(collected.group(1)), f"docs/TESTING.md says {said} tests, pytest collects {collected.group(1)}"


def test_demo_table_rows_match_the_chapters():
    rows = DEMO_ROW.findall(README)
    assert rows, "no demo table in README.md"
    for assignment, student, score, top, what in rows:
        assert assignment in REPOSITORY.assignments(), f"the demo table names {assignment}"
        assert float(top) == automatic_points(assignment), (
            f"{assignment}: the demo table says {top} automatic points, the source has {automatic_points(assignment):g}")
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


# --- every page: links, make targets, the index of docs/, no module paths in the README -------

FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")


def _prose(text: str) -> str:
    """The page without its fenced code blocks (a heading or a link in code is neither)."""
    return FENCE.sub("", text)


def _anchors(text: str) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    anchors: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+?)\s*$", _prose(text), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        anchor, n = slug, 0
        while anchor in anchors:
            n += 1
            anchor = f"{slug}-{n}"
        anchors.add(anchor)
    return anchors


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page):
    text = page.read_text()
    broken = []
    for target in LINK.findall(_prose(text)):
        if re.match(r"[a-z][a-z+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no file {linked}")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked.read_text()):
            broken.append(f"{target}: no heading #{anchor} in {linked.relative_to(REPO)}")
    assert not broken, f"{page.relative_to(REPO)}: broken links\n" + "\n".join(broken)


def test_every_make_target_named_exists():
    makefile = (REPO / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][\w-]*)\s*:(?!=)", makefile, re.MULTILINE))
    named = {}
    for page in PAGES:
        text = page.read_text()
        found = re.findall(r"`make ([a-z][\w-]*)", text) + re.findall(r"^\s*make ([a-z][\w-]*)", text, re.MULTILINE)
        for target in found:
            named.setdefault(target, page.relative_to(REPO))
    assert "test" in named and "demo" in named and "lab" in named, "the README names make lab, demo and test"
    missing = {t: str(p) for t, p in named.items() if t not in targets}
    assert not missing, f"make targets named in the docs that the Makefile does not have: {missing}"


def test_ci_runs_make_test_first():
    stages = re.findall(r"^stage (.+)$", (REPO / ".ci" / "run").read_text(), re.MULTILINE)
    assert stages and stages[0] == "make test", f".ci/run's first stage is {stages[:1]}, the README says make test"


def test_docs_index_lists_every_page():
    index = (DOCS / "README.md").read_text()
    listed = set(re.findall(r"^\| \[([A-Z_]+\.md)\]\(\1\) \|", index, re.MULTILINE))
    pages = {p.name for p in DOCS.glob("*.md")} - {"README.md"}
    assert listed == pages, f"docs/README.md lists {sorted(listed)}, docs/ has {sorted(pages)}"
    linked = set(re.findall(r"\]\(docs/([A-Z_]+\.md)", README))
    assert linked == pages | {"README.md"}, f"the README links to {sorted(linked)} of docs/"


def test_readme_names_no_module_paths():
    """Module paths change when code moves; the README names commands and pages, the docs name modules."""
    paths = re.findall(r"\b(?:instructor|course|nboracle)[./][a-z_]\w*|python -m (?:instructor|course|nboracle)\b", README)
    assert not paths, f"README.md names modules: {paths}"


# --- docs/SPEED.md: its table is written by bench/benchmark.py -------------------------------

def _benchmark():
    spec = importlib.util.spec_from_file_location("course_benchmark", REPO / "bench" / "benchmark.py")
    module = importlib.util.module_from_spec(spec)
    backend = os.environ.get("MPLBACKEND")
    try:
        spec.loader.exec_module(module)
    finally:  # the benchmark sets a headless backend for itself
        if backend is None:
            os.environ.pop("MPLBACKEND", None)
    return module


def test_speed_table_has_one_short_row_per_bench_section():
    bench = _benchmark()
    text = (DOCS / "SPEED.md").read_text()
    table = text.split(bench.BEGIN)[1].split(bench.END)[0]
    rows = [line for line in table.splitlines() if bench.ROW.match(line)]
    assert [bench.ROW.match(r).group(1) for r in rows] == list(bench.WHAT), "one row per section, in WHAT's order"
    anchors = _anchors(text)
    for row in rows:
        section, what, figure, run = [c.strip() for c in row.strip("|").split(" | ")]
        name = bench.ROW.match(row).group(1)
        assert name in anchors, f"docs/SPEED.md: no notes under the table for section {name}"
        assert len(figure) <= 100 and len(run) <= 70, f"docs/SPEED.md: the {name} row is long; prose goes below"


def test_bench_writes_its_figures_between_the_markers(tmp_path: Path):
    bench = _benchmark()
    page = tmp_path / "SPEED.md"
    kept = bench.speed_row("class", "**1.59x** (old)", "session 31")
    page.write_text(f"# Speed\n\nprose above\n\n{bench.BEGIN}\n{bench.HEADER}\n{kept}\n"
                    f"{bench.speed_row('startup', 'old', 'session 1')}\n{bench.END}\n\n### startup\n\nprose below\n")
    written = bench.write_docs({"startup": "**0.80 s**", "autograde": "**1.71** (4.6 s / 2.7 s)", "lab": None},
                               "2026-12-03, 2 cores, load 1.0, `--only startup`", page)
    assert written == ["startup", "autograde"], "a skipped section (None) is not written"
    text = page.read_text()
    assert text.startswith("# Speed\n\nprose above\n\n") and text.endswith("\n\n### startup\n\nprose below\n")
    table = text.split(bench.BEGIN)[1].split(bench.END)[0].strip().splitlines()
    assert table[:2] == bench.HEADER.splitlines()
    assert table[2:] == [  # in WHAT's order; the row of a section not run stays as it was
        bench.speed_row("autograde", "**1.71** (4.6 s / 2.7 s)", "2026-12-03, 2 cores, load 1.0, `--only startup`"),
        kept,
        bench.speed_row("startup", "**0.80 s**", "2026-12-03, 2 cores, load 1.0, `--only startup`")]
    before = page.read_text()
    bench.write_docs({}, "unused", page)
    assert page.read_text() == before, "writing nothing changes nothing"
    page.write_text("# Speed\n\nno markers\n")
    with pytest.raises(SystemExit, match="bench:begin"):
        bench.write_docs({"startup": "x"}, "run", page)


def test_bench_run_column_names_the_arguments():
    run = _benchmark().describe_run(["--only", "startup", "--no-write-docs"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\d, \d+ cores, load [\d.]+, `--only startup`", run), run
