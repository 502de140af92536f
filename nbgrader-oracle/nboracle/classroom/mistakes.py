"""Mistakes as data: each student's outcome on each test cell, and the mistakes the checks named.

A course supplies a *catalogue* of known mistakes through its configuration,
``c.ClassReport.catalogue = "package.module:function"``: ``function(root, assignment)`` returns

    {mistake id: {"why": one sentence, "section": the text's section to re-teach,
                  "family": an id shared by the same mistake in other assignments (or ""),
                  "family_why": that family's misconception in one sentence (or ""),
                  "cells": {test grade id: a fragment of the message that test shows for it}}}

(this course builds it from its bug zoo: ``instructor/mistakes.py``). This package knows no
course. :func:`classify` gives each graded test cell of one student one outcome:

* ``passed``: full points;
* ``not attempted``: every solution cell of the test's exercise is exactly as released
  (whitespace aside). A test's exercise is the run of solution cells that comes before its
  group of tests in the released notebook (:func:`exercises`);
* ``mistake``: lost points, and the student shows a known mistake's whole signature: every
  test cell the catalogue names for it lost points with a message containing its fragment
  (the zoo's proof that the mistake produces exactly these messages). Its id is recorded on
  each of those cells; where several mistakes' signatures are shown, those naming the most
  cells are kept (one mistake is not counted twice through a shared fragment);
* ``unrecognised``: lost points otherwise (its message is kept for the report).

The batch's :class:`~nboracle.classroom.batch.Recorder` classifies every result it records
(plain data from any runner, so the same in this process, a process pool or Dask, and whatever
database holds the gradebook) into ``mistakes/<assignment>.json`` in the course root
(:func:`record_path`), beside the gradebook and never under ``release/`` or ``feedback/``;
:mod:`nboracle.classroom.class_report` turns the records into the instructor's pages.
"""

from __future__ import annotations

import base64
import importlib
import json
import os
import re
from pathlib import Path

import nbformat

from . import pipeline as P

PASSED, MISTAKE, UNRECOGNISED, NOT_ATTEMPTED = "passed", "mistake", "unrecognised", "not attempted"
OUTCOMES = (PASSED, MISTAKE, UNRECOGNISED, NOT_ATTEMPTED)
REPORT_FOLDER = "mistakes"  # in the course root: git-ignored, never served to students
MESSAGE_CHARS = 300  # of an unrecognised failure's message, kept for the report


def record_path(root, assignment: str) -> Path:
    return Path(root.path) / REPORT_FOLDER / f"{assignment}.json"


# ---------------------------------------------------------------- the released notebook


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def is_test(cell) -> bool:
    """An autograded test: a graded code cell that is not a student's answer."""
    meta = _meta(cell)
    return bool(meta.get("grade") and not meta.get("solution") and cell.get("cell_type") == "code")


def _normal(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def exercises(nb) -> dict[str, list[str]]:
    """{test grade id: the solution cells of its exercise}: the run of solution cells before its tests."""
    depends, exercise, fresh = {}, [], []
    for cell in nb.cells:
        if _meta(cell).get("solution"):
            fresh.append(P.grade_id(cell))
        elif is_test(cell):
            if fresh:
                exercise, fresh = fresh, []
            depends[P.grade_id(cell)] = list(exercise)
    return depends


def sections(nb) -> dict[str, str]:
    """{grade id: the last markdown heading above that cell}."""
    found, heading = {}, ""
    for cell in nb.cells:
        if cell.get("cell_type") == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    heading = line.lstrip("#").strip()
        gid = P.grade_id(cell)
        if gid:
            found[gid] = heading
    return found


class Released:
    """What the classifier needs of one released notebook: its tests, their points, the stubs."""

    def __init__(self, nb):
        self.tests = {P.grade_id(c): float(_meta(c).get("points", 0)) for c in nb.cells if is_test(c)}
        self.stubs = {P.grade_id(c): _normal(c.source) for c in nb.cells if _meta(c).get("solution")}
        self.exercise = exercises(nb)
        self.section = sections(nb)


def released(root, assignment: str) -> dict[str, Released]:
    """{notebook name: Released} of ``release/<assignment>/``."""
    folder = root.folder("release", assignment)
    return {p.stem: Released(P.read_nb(p)) for p in sorted(folder.glob("*.ipynb"))}


# ---------------------------------------------------------------- the catalogue


def load_catalogue(root, assignment: str) -> dict:
    """The course's catalogue for ``assignment`` (``c.ClassReport.catalogue``), or {} without one."""
    spec = root._setting("ClassReport", "catalogue")
    if not spec:
        return {}
    module, _, name = str(spec).partition(":")
    return getattr(importlib.import_module(module), name)(root, assignment)


# ---------------------------------------------------------------- one student


def classify(rel: Released, answers: dict[str, str], scores: dict[str, float], errors: dict[str, str],
             catalogue: dict) -> dict[str, dict]:
    """{test grade id: {"outcome", "mistakes", "message"}} of one student's notebook.

    ``answers``: {solution grade id: source as graded}; ``scores``: {test grade id: points};
    ``errors``: {test grade id: its failure message}.
    """
    failed = {gid for gid, top in rel.tests.items() if scores.get(gid, 0.0) < top}
    # a mistake is recognised when every test of its signature failed with its fragment
    made = {m: len(entry["cells"]) for m, entry in catalogue.items()
            if entry["cells"] and all(g in failed and fragment in errors.get(g, "")
                                      for g, fragment in entry["cells"].items() if g in rel.tests)
            and set(entry["cells"]) & set(rel.tests)}
    matched = {gid: [m for m in made if gid in catalogue[m]["cells"]] for gid in failed}
    cells = {}
    for gid in rel.tests:
        exercise = rel.exercise.get(gid, [])
        untouched = exercise and all(_normal(answers.get(s, "")) == rel.stubs.get(s) for s in exercise)
        if gid not in failed:
            cells[gid] = {"outcome": PASSED}
        elif untouched:
            cells[gid] = {"outcome": NOT_ATTEMPTED}
        elif matched[gid]:
            best = max(made[m] for m in matched[gid])  # the signature that explains the most failures
            cells[gid] = {"outcome": MISTAKE, "mistakes": sorted(m for m in matched[gid] if made[m] == best)}
        else:
            cells[gid] = {"outcome": UNRECOGNISED, "message": errors.get(gid, "")[:MESSAGE_CHARS]}
    return cells


def classify_result(rels: dict[str, Released], result: dict, catalogue: dict) -> dict[str, dict]:
    """A grader result's (:data:`nboracle.classroom.grader.RESULT_KEYS`) test cells, classified."""
    cells = {}
    for name, rel in rels.items():
        encoded = result["files"].get(f"{name}.ipynb")
        nb = nbformat.reads(base64.b64decode(encoded).decode(), as_version=4) if encoded else None
        answers = {P.grade_id(c): c.source for c in nb.cells if _meta(c).get("solution")} if nb else {}
        scores = {g: float(s or 0.0) for g, (s, _) in result["grades"].get(name, {}).items()}
        for gid, outcome in classify(rel, answers, scores, result["failed_cells"], catalogue).items():
            cells[gid if len(rels) == 1 else f"{name}:{gid}"] = outcome
    return cells


# ---------------------------------------------------------------- the record, beside the gradebook


def read_record(root, assignment: str) -> dict:
    path = record_path(root, assignment)
    return json.loads(path.read_text()) if path.is_file() else {"assignment": assignment, "students": {}}


def save_record(root, assignment: str, record: dict) -> Path:
    path = record_path(root, assignment)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=1))  # tests stay in notebook order
    tmp.replace(path)
    return path


class MistakeLog:
    """The Recorder's side: classify each recorded result, keep the assignment's record up to date."""

    def __init__(self, root, assignment: str):
        self.root, self.assignment = root, assignment
        self.rels = released(root, assignment)
        self.catalogue = load_catalogue(root, assignment)
        self.record = read_record(root, assignment)
        single = len(self.rels) == 1
        # in notebook order, each with its exercise's section (the heading above its first solution cell)
        self.record["tests"] = {(g if single else f"{n}:{g}"): {
            "points": pts, "section": rel.section.get((rel.exercise.get(g) or [g])[0], "")}
            for n, rel in self.rels.items() for g, pts in rel.tests.items()}
        self.record["catalogue"] = {m: {k: e.get(k, "") for k in ("why", "section", "family", "family_why")}
                                    for m, e in self.catalogue.items()}

    def add(self, result: dict) -> None:
        students = self.record["students"]
        if result["status"] != "graded":
            students.pop(result["student"], None)  # no grade, no outcome: nothing stale is kept
            return
        students[result["student"]] = {"score": result["score"], "max_score": result["max_score"],
                                       "cells": classify_result(self.rels, result, self.catalogue)}

    def save(self) -> Path:
        return save_record(self.root, self.assignment, self.record)
