"""The class report: what a class got wrong, per assignment and across the term, as HTML and CSV.

From the records of :mod:`nboracle.classroom.mistakes` (``mistakes/<assignment>.json``):

* ``mistakes/<assignment>.html``: each test cell with how many students passed it, failed
  it on each named mistake, failed it otherwise or did not attempt it; the named mistakes
  ranked by how many students made them, each with the section to re-teach; a plot of the
  scores and the top mistakes; the messages of unrecognised failures; who made which.
* ``mistakes/<assignment>.csv`` (one row per test cell) and
  ``mistakes/<assignment>-ranked.csv`` (one row per mistake, with its students).
* ``mistakes/term.html`` and ``term.csv``: every assignment recorded so far, one row per
  mistake *family* (the same misconception in several assignments) or per mistake.

For the instructor only: the folder is in the course root (git-ignored), never in ``release/``
or ``feedback/``, and grading kernels never see the course root.
"""

from __future__ import annotations

import base64
import csv
import html
import io
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

from .mistakes import MISTAKE, NOT_ATTEMPTED, PASSED, REPORT_FOLDER, UNRECOGNISED, read_record

TOP = 10  # mistakes in the plot


# ---------------------------------------------------------------- counting


def cell_counts(record: dict) -> dict[str, dict]:
    """{test: {"passed", "mistake", "unrecognised", "not attempted": students, "mistakes": Counter,
    "alongside": of the unrecognised, students with a named mistake in another cell, "messages": Counter}}."""
    def empty():
        return {PASSED: 0, MISTAKE: 0, UNRECOGNISED: 0, NOT_ATTEMPTED: 0, "alongside": 0,
                "mistakes": Counter(), "messages": Counter()}

    counts = {t: empty() for t in record.get("tests", {})}
    for student in record["students"].values():
        named = any(c.get("mistakes") for c in student["cells"].values())
        for test, cell in student["cells"].items():
            row = counts.setdefault(test, empty())
            row[cell["outcome"]] += 1
            row["mistakes"].update(cell.get("mistakes", []))
            if cell["outcome"] == UNRECOGNISED:
                row["alongside"] += named  # failed otherwise by a student who made a named mistake elsewhere
                row["messages"][cell.get("message", "").splitlines()[0] if cell.get("message") else "(no message)"] += 1
    return counts


def who_made(record: dict) -> dict[str, dict[str, list[str]]]:
    """{mistake id: {student: the test cells it was recognised in}}."""
    found: dict[str, dict[str, list[str]]] = {}
    for student, data in sorted(record["students"].items()):
        for test, cell in data["cells"].items():
            for mistake in cell.get("mistakes", []):
                found.setdefault(mistake, {}).setdefault(student, []).append(test)
    return found


def ranked(record: dict) -> list[dict]:
    """The named mistakes, most students first: id, why, section, family, students, cells."""
    made, catalogue = who_made(record), record.get("catalogue", {})
    rows = [{"id": m, **{k: catalogue.get(m, {}).get(k, "") for k in ("why", "section", "family", "family_why")},
             "students": sorted(by), "cells": sorted({t for tests in by.values() for t in tests})}
            for m, by in made.items()]
    return sorted(rows, key=lambda r: (-len(r["students"]), r["id"]))


# ---------------------------------------------------------------- one assignment


def _plot(scores: list[float], top: float, mistakes: list[dict]) -> str:
    """A PNG (base64) of the score distribution and the most frequent mistakes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = mistakes[:TOP][::-1]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.6), gridspec_kw={"width_ratios": [1, 1.4]})
    left.hist(scores, bins=min(20, max(1, int(top) + 1)), range=(0, max(top, 1)), color="#4c72b0", edgecolor="white")
    left.set(title=f"scores ({len(scores)} students)", xlabel=f"points of {top:g}", ylabel="students")
    right.barh([m["id"] for m in shown], [len(m["students"]) for m in shown], color="#dd8452")
    right.set(title="most frequent mistakes", xlabel="students")
    right.xaxis.get_major_locator().set_params(integer=True)
    left.yaxis.get_major_locator().set_params(integer=True)
    if not shown:
        right.text(0.5, 0.5, "no named mistake", ha="center", va="center", transform=right.transAxes)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


STYLE = """body{font-family:system-ui,sans-serif;margin:1.5em;max-width:75em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.25em .5em;
text-align:left;vertical-align:top;max-width:30em}th{background:#f2f2f2}td.n{text-align:right}.muted{color:#777}
.bar{display:inline-block;height:.8em;background:#dd8452;margin-right:.3em}"""


def _table(head: list[str], rows: list[list], numeric: set[int] = frozenset()) -> str:
    out = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"]
    for row in rows:
        out.append("<tr>" + "".join(f"<td class=n>{v}</td>" if i in numeric else f"<td>{v}</td>"
                                    for i, v in enumerate(row)) + "</tr>")
    return "\n".join(out) + "</table>"


def _e(text) -> str:
    return html.escape(str(text))


def render_html(record: dict, extensions: dict[str, float] | None = None) -> str:
    """The assignment's page; ``extensions``: {student: hours} the instructor gave (the gradebook's)."""
    a, students = record["assignment"], record["students"]
    extensions = extensions or {}
    counts, mistakes = cell_counts(record), ranked(record)
    scores = [s["score"] for s in students.values()]
    top = max([s["max_score"] for s in students.values()] or [0.0])
    n = len(students)
    mean = f"{sum(scores) / n:.1f}" if n else "-"
    parts = [f"<!doctype html><html><head><meta charset=utf-8><title>What {_e(a)} got wrong</title>"
             f"<style>{STYLE}</style></head><body>",
             f"<h1>What the class got wrong: {_e(a)}</h1>",
             f"<p>{n} students graded, mean {mean} of {top:g} points; {len(mistakes)} named mistakes. "
             f"<span class=muted>Written {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; for the instructor "
             "only (names students).</span></p>",
             f'<img alt="scores and the most frequent mistakes" src="data:image/png;base64,{_plot(scores, top, mistakes)}">']
    parts.append("<p>Extensions: " + (", ".join(f"{_e(s)} {h:g} h" for s, h in sorted(extensions.items()))
                                      + " (hours after the due date)" if extensions else "none") + ".</p>")
    parts.append("<h2>Mistakes to re-teach, most students first</h2>")
    if mistakes:
        width = max(len(m["students"]) for m in mistakes)
        parts.append(_table(["#", "students", "mistake", "id", "section to re-teach", "seen in tests"], [
            [i + 1, f'<span class=bar style="width:{4 * len(m["students"]) / width:.1f}em"></span>'
                    f'{len(m["students"])} ({100 * len(m["students"]) / max(n, 1):.0f}%)',
             _e(m["why"]), f"<code>{_e(m['id'])}</code>", _e(m["section"]),
             ", ".join(f"<code>{_e(t)}</code>" for t in m["cells"])] for i, m in enumerate(mistakes)], {0}))
    else:
        parts.append("<p>No failure matched a known mistake.</p>")
    parts.append("<h2>Each test</h2>")
    tests = record.get("tests", {})
    parts.append("<p class=muted>Failed otherwise: lost points with no known mistake's whole signature; "
                 "in brackets, how many of them made a named mistake elsewhere (often its consequence).</p>")
    parts.append(_table(["test", "points", "passed", "named mistakes", "failed otherwise", "not attempted", "section"], [
        [f"<code>{_e(t)}</code>", f"{tests.get(t, {}).get('points', 0):g}", c[PASSED],
         "<br>".join(f"{k}: <code>{_e(m)}</code>" for m, k in c["mistakes"].most_common()) or "",
         f"{c[UNRECOGNISED]}" + (f" <span class=muted>({c['alongside']} with a named mistake)</span>"
                                  if c["alongside"] else ""),
         c[NOT_ATTEMPTED], _e(tests.get(t, {}).get("section", ""))]
        for t, c in counts.items()], {1, 2, 4, 5}))
    unknown = [(t, msg, k) for t, c in counts.items() for msg, k in c["messages"].most_common()]
    if unknown:
        parts.append("<h2>Failures no known mistake explains</h2><p class=muted>The first line of each "
                     "message, with how many students saw it: candidates for a new entry of the catalogue.</p>")
        parts.append(_table(["test", "students", "message"], [[f"<code>{_e(t)}</code>", k, _e(msg)]
                                                              for t, msg, k in unknown], {1}))
    parts.append("<h2>Who made which</h2>")
    made = who_made(record)
    parts.append(_table(["mistake", "students"], [[f"<code>{_e(m['id'])}</code>", _e(", ".join(made[m["id"]]))]
                                                  for m in mistakes]))
    rows = []
    for student, data in sorted(students.items()):
        cells = data["cells"].values()
        named = sorted({m for c in cells for m in c.get("mistakes", [])})
        rows.append([_e(student), f"{data['score']:g}/{data['max_score']:g}", _e(", ".join(named)),
                     sum(c["outcome"] == UNRECOGNISED for c in cells), sum(c["outcome"] == NOT_ATTEMPTED for c in cells),
                     f"{extensions[student]:g} h" if student in extensions else ""])
    parts.append(_table(["student", "score", "named mistakes", "failed otherwise", "not attempted", "extension"],
                        rows, {3, 4}))
    parts.append("</body></html>")
    return "\n".join(parts)


def _extensions(root, assignment: str) -> dict[str, float]:
    """{student: hours} of the extensions given on ``assignment`` (nboracle.grader.extensions), given
    before a submission too; none when the course root has no gradebook."""
    from nbgrader.api import Gradebook

    from ..grader.extensions import granted

    if str(root.gradebook_url).startswith("sqlite:///") and not Path(str(root.gradebook_url)[10:]).exists():
        return {}
    with Gradebook(root.gradebook_url) as gradebook:
        return {student: hours for (a, student), hours in granted(gradebook).items() if a == assignment}


def write_assignment(root, assignment: str) -> dict[str, Path]:
    """``mistakes/<assignment>.html``, ``.csv`` and ``-ranked.csv`` from its record."""
    record = read_record(root, assignment)
    folder = Path(root.path) / REPORT_FOLDER
    folder.mkdir(exist_ok=True)
    paths = {"html": folder / f"{assignment}.html", "csv": folder / f"{assignment}.csv",
             "ranked": folder / f"{assignment}-ranked.csv"}
    paths["html"].write_text(render_html(record, _extensions(root, assignment)))
    counts, tests = cell_counts(record), record.get("tests", {})
    with paths["csv"].open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["test", "points", "passed", "named_mistake", "failed_otherwise", "not_attempted", "mistakes",
                      "failed_otherwise_with_a_named_mistake"])
        for t, c in counts.items():
            out.writerow([t, tests.get(t, {}).get("points", ""), c[PASSED], c[MISTAKE], c[UNRECOGNISED],
                          c[NOT_ATTEMPTED], "; ".join(f"{m}={k}" for m, k in c["mistakes"].most_common()),
                          c["alongside"]])
    with paths["ranked"].open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["rank", "mistake", "students", "why", "section", "family", "tests", "who"])
        for i, m in enumerate(ranked(record)):
            out.writerow([i + 1, m["id"], len(m["students"]), m["why"], m["section"], m["family"],
                          " ".join(m["cells"]), " ".join(m["students"])])
    return paths


# ---------------------------------------------------------------- the term


def term_rows(root) -> tuple[list[str], list[dict]]:
    """Every recorded assignment, and one row per mistake family (or lone mistake) across them."""
    folder = Path(root.path) / REPORT_FOLDER
    assignments = sorted(p.stem for p in folder.glob("*.json"))
    rows: dict[str, dict] = {}
    for a in assignments:
        record = read_record(root, a)
        for m in ranked(record):
            key = m["family"] or f"{a}/{m['id']}"
            row = rows.setdefault(key, {"id": key, "family": bool(m["family"]), "why": m["family_why"] or m["why"],
                                        "sections": {}, "per": {}, "students": set(), "ids": []})
            row["per"][a] = row["per"].get(a, 0) + len(m["students"])
            row["students"].update(m["students"])
            row["ids"].append(f"{a}/{m['id']}")
            row["sections"].setdefault(a, m["section"])
    order = sorted(rows.values(), key=lambda r: (-len(r["per"]), -len(r["students"]), r["id"]))
    return assignments, order


def write_term(root) -> dict[str, Path]:
    """``mistakes/term.html`` and ``term.csv``: every assignment recorded so far."""
    assignments, rows = term_rows(root)
    folder = Path(root.path) / REPORT_FOLDER
    folder.mkdir(exist_ok=True)
    paths = {"html": folder / "term.html", "csv": folder / "term.csv"}
    with paths["csv"].open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["mistake", "assignments", "students", *assignments, "why", "ids"])
        for r in rows:
            out.writerow([r["id"], len(r["per"]), len(r["students"]), *[r["per"].get(a, "") for a in assignments],
                          r["why"], " ".join(r["ids"])])
    graded = {a: len(read_record(root, a)["students"]) for a in assignments}
    body = _table(["mistake", "in assignments", "students", *[f"{a} ({graded[a]})" for a in assignments],
                   "what", "sections to re-teach"],
                  [[("<b>" if r["family"] else "") + f"<code>{_e(r['id'])}</code>" + ("</b>" if r["family"] else ""),
                    len(r["per"]), len(r["students"]), *[r["per"].get(a, "") for a in assignments], _e(r["why"]),
                    "<br>".join(f"{_e(a)}: {_e(s)}" for a, s in r["sections"].items())] for r in rows],
                  set(range(1, 3 + len(assignments))))
    links = " ".join(f'<a href="{_e(a)}.html">{_e(a)}</a>' for a in assignments)
    paths["html"].write_text(
        f"<!doctype html><html><head><meta charset=utf-8><title>What the class got wrong this term</title>"
        f"<style>{STYLE}</style></head><body><h1>What the class got wrong this term</h1>"
        f"<p>{len(assignments)} assignments graded so far: {links}. A family (bold) is one misconception "
        "met in several assignments; the columns count students per assignment (graded in brackets).</p>"
        f"{body}</body></html>")
    return paths


def write_all(root, assignment: str) -> dict[str, Path]:
    """The assignment's pages and the term's, after a batch."""
    return {**write_assignment(root, assignment), **{f"term-{k}": p for k, p in write_term(root).items()}}
