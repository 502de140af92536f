"""Make a handed-in notebook gradable: duplicated, deleted, reordered or foreign graded cells.

A student's notebook is compared with what the gradebook says the released notebook holds
(its *graded cells*: solution cells, test cells and read-only cells, by ``grade_id``). Before
nbgrader sanitizes the notebook, :class:`RepairSubmission` (first of
``Autograde.sanitize_preprocessors``, ``nbgrader_config.py``) mends it so that nbgrader grades
it as it intends, instead of stopping with ``KeyError: 'grade_id'`` (nbgrader 0.9.6 cannot
restore missing cells around a duplicated, deleted or foreign one):

* **foreign cells** (a grade id this assignment does not have): kept as ordinary cells (their
  code still runs), their grader metadata removed. A notebook whose graded cells belong to
  another assignment is refused: "this is 02_scaling's notebook (scaling.ipynb)".
* **duplicates** (a cell copied in Lab keeps its metadata): a test or read-only copy is
  dropped (the cell itself is restored from the gradebook anyway). Of several copies of a
  solution cell, the first one the student edited keeps the grade id; the other edited copies
  stay where they are as ordinary cells (their code runs in the order the student wrote it);
  unedited copies of the stub are dropped, so a stub run after the student's code cannot undo
  it. This keeps the student's work in every case.
* **deleted cells**: a test or read-only cell is put back from the gradebook just before the
  graded cell that follows it in the release (so after any cell the student wrote in its
  place); a deleted solution cell is put back *empty* (a comment) where it was, so the tests
  run against whatever the student defined elsewhere.
* **reordered cells**: a test or read-only cell that the student moved above a graded cell it
  follows in the release is moved back below it (it would otherwise test code not yet run).
* **other notebooks** in the submission folder (``two_keys-Copy1.ipynb``): listed, with how many
  of the assignment's answers each holds; only the notebook named as released is graded (the
  assignment's own other notebooks are not listed: each is graded in its turn).

A cell's kinds are read as nbgrader reads them (:func:`is_locked`: a test cell is locked whatever
its ``locked`` flag says, as in ``nbgrader.utils.is_locked``).

Every repair is a note, and every note is a review reason (:class:`RepairNotes` hands them to
``ReviewFlags``): the batch report, ``grades.csv`` and the formgrader show them. The handed-in
file is never changed: the repair works on nbgrader's copy.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from nbformat.notebooknode import NotebookNode, from_dict
from traitlets import List, Unicode

from .sandbox import KERNEL_METADATA

REPAIR_METADATA = "grader_repair"  # notebook metadata of the sanitized notebook: {"notes": [...]}
ANSWERED_COPY_LIMIT = 20  # other notebooks listed by name at most


class WrongNotebookError(ValueError):
    """The handed-in notebook belongs to another assignment (the message says which)."""


@dataclass
class Expected:
    """The graded cells of a released notebook, in release order."""

    assignment: str
    notebook: str
    order: list[str] = field(default_factory=list)
    cells: dict[str, dict] = field(default_factory=dict)  # grade id -> cell_type, source, flags, points
    siblings: list[str] = field(default_factory=list)  # the assignment's other notebooks (names, no .ipynb)

    def solution_ids(self) -> list[str]:
        return [g for g in self.order if self.cells[g]["solution"]]


# ---------------------------------------------------------------- what the release holds


def expected_from_gradebook(db_url: str, notebook: str, assignment: str) -> Expected:
    """The graded cells of ``notebook`` as nbgrader stored them at release (stubs, full tests)."""
    from nbgrader.api import Gradebook

    out = Expected(assignment, notebook)
    with Gradebook(db_url) as gb:
        nb = gb.find_notebook(notebook, assignment)
        out.siblings = sorted(other.name for other in nb.assignment.notebooks if other.name != notebook)
        points = {c.name: float(c.max_score) for c in nb.grade_cells}
        solutions = {c.name for c in nb.solution_cells}
        for cell in nb.source_cells:
            out.order.append(cell.name)
            out.cells[cell.name] = {"cell_type": cell.cell_type, "source": cell.source, "locked": bool(cell.locked),
                                    "checksum": cell.checksum, "grade": cell.name in points,
                                    "solution": cell.name in solutions, "points": points.get(cell.name, 0.0)}
    return out


def expected_from_notebook(nb, assignment: str = "", notebook: str = "") -> Expected:
    """The graded cells of a released (or source) notebook, from its cell metadata."""
    out = Expected(assignment, notebook)
    for cell in nb.cells:
        meta = _graded_meta(cell)
        if meta and meta["grade_id"] not in out.cells:
            out.order.append(meta["grade_id"])
            out.cells[meta["grade_id"]] = {
                "cell_type": cell.cell_type, "source": cell.source, "locked": is_locked(meta),
                "checksum": meta.get("checksum"), "grade": bool(meta.get("grade")),
                "solution": bool(meta.get("solution")), "points": float(meta.get("points", 0) or 0)}
    return out


def is_locked(meta: dict) -> bool:
    """Whether nbgrader treats a cell with this nbgrader metadata as locked (``nbgrader.utils.is_locked``):
    never a solution cell, always a test cell (whatever its ``locked`` flag says), else its flag."""
    if meta.get("solution"):
        return False
    return bool(meta.get("grade") or meta.get("locked"))


def _graded_meta(cell) -> dict | None:
    """The nbgrader metadata of a graded, solution or read-only cell with a grade id, else None."""
    meta = cell.get("metadata", {}).get("nbgrader")
    if not isinstance(meta, dict) or not (meta.get("grade") or meta.get("solution") or meta.get("locked")):
        return None
    return meta if isinstance(meta.get("grade_id"), str) and meta["grade_id"] else None


def grade_ids(nb) -> list[str]:
    """Grade ids of a notebook's graded, solution and read-only cells, in order (with repeats)."""
    return [meta["grade_id"] for meta in map(_graded_meta, nb.cells) if meta]


@functools.lru_cache(maxsize=8)
def _chapter_ids(root: str, stamp: tuple) -> dict[tuple[str, str], frozenset[str]]:
    ids = {}
    for path, _ in stamp:
        path = Path(path)
        try:
            nb = from_dict(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
        ids.setdefault((path.parent.name, path.name), frozenset(grade_ids(nb)))
    return ids


def chapter_ids(root: Path) -> dict[tuple[str, str], frozenset[str]]:
    """{(assignment, notebook file): grade ids} of every released (else source) notebook of a course root."""
    paths = sorted(Path(root).glob("release/*/*.ipynb")) + sorted(Path(root).glob("source/*/*.ipynb"))
    stamp = tuple((str(p), p.stat().st_mtime_ns) for p in paths)
    return _chapter_ids(str(root), stamp)


def wrong_chapter(nb, assignment: str, root: Path) -> str | None:
    """"this is 02_scaling's notebook (scaling.ipynb)..." when ``nb`` holds none of the graded cells
    only ``assignment`` has, and more of another assignment's than of ``assignment``'s; else None."""
    found = set(grade_ids(nb))
    chapters = chapter_ids(root)
    if not found or assignment not in {name for name, _ in chapters}:
        return None
    overlap: dict[str, tuple[int, str]] = {}
    mine, others = set(), set()
    for (name, file), ids in chapters.items():
        overlap[name] = max(overlap.get(name, (0, "")), (len(found & ids), file))
        (mine if name == assignment else others).update(ids)
    if found & (mine - others):
        return None
    here = overlap.get(assignment, (0, ""))[0]
    best = max((item for item in overlap.items() if item[0] != assignment), key=lambda item: item[1][0], default=None)
    if best is None or best[1][0] <= here:
        return None
    return (f"this is {best[0]}'s notebook ({best[1][1]}), not {assignment}'s: "
            f"{best[1][0]} of its graded cells are {best[0]}'s, {here} are {assignment}'s")


# ---------------------------------------------------------------- the repair


def _norm(text) -> str:
    text = "".join(text) if isinstance(text, list) else (text or "")
    return re.sub(r"\s+", " ", text).strip()


def _names(ids: list[str], most: int = 6) -> str:
    return ", ".join(ids[:most]) + (f" and {len(ids) - most} more" if len(ids) > most else "")


def answered(nb, expected: Expected) -> int:
    """How many of the assignment's solution cells hold something other than the released stub."""
    stubs = {g: _norm(expected.cells[g]["source"]) for g in expected.solution_ids()}
    done = set()
    for cell in nb.cells:
        meta = _graded_meta(cell)
        if meta and meta["grade_id"] in stubs and _norm(cell.source) != stubs[meta["grade_id"]]:
            done.add(meta["grade_id"])
    return len(done)


def _plain(cell) -> None:
    cell.metadata.pop("nbgrader", None)
    cell.metadata.pop("editable", None)
    cell.metadata.pop("deletable", None)


def _restored_cell(gid: str, spec: dict) -> NotebookNode:
    """A missing graded cell: a test or read-only cell as released, a solution cell empty."""
    if spec["solution"]:
        source = (f"# The solution cell {gid} was missing from this submission; the grader put it back empty."
                  if spec["cell_type"] == "code" else
                  f"*The answer cell {gid} was missing from this submission; the grader put it back empty.*")
    else:
        source = spec["source"]
    meta = {"grade": spec["grade"], "grade_id": gid, "locked": spec["locked"], "solution": spec["solution"],
            "schema_version": 3}
    if spec["grade"]:
        meta["points"] = spec["points"]
    if spec.get("checksum") and spec["locked"]:
        meta["checksum"] = spec["checksum"]
    cell_id = "restored-" + re.sub(r"[^A-Za-z0-9_-]", "-", gid)[:55]
    cell = {"id": cell_id, "cell_type": spec["cell_type"], "metadata": {"nbgrader": meta}, "source": source}
    if spec["locked"]:
        cell["metadata"].update(editable=False, deletable=False)
    if spec["cell_type"] == "code":
        cell.update(execution_count=None, outputs=[])
    return from_dict(cell)


def _drop_foreign(nb, expected: Expected, notes: list[str]) -> None:
    foreign = []
    for cell in nb.cells:
        if "nbgrader" in cell.get("metadata", {}) and not isinstance(cell.metadata["nbgrader"], dict):
            cell.metadata.pop("nbgrader")  # not nbgrader's shape: nbgrader itself would stop on it
        meta = cell.get("metadata", {}).get("nbgrader")
        if not isinstance(meta, dict) or not (meta.get("grade") or meta.get("solution") or meta.get("locked")):
            continue
        gid = meta.get("grade_id")
        if gid not in expected.cells:
            _plain(cell)
            foreign.append(gid if isinstance(gid, str) and gid else "(no grade id)")
    if foreign:
        notes.append(f"{len(foreign)} cell(s) with grader metadata that this assignment does not have "
                     f"({_names(foreign)}): graded as ordinary cells")


def _drop_duplicates(nb, expected: Expected, notes: list[str]) -> None:
    where: dict[str, list[int]] = {}
    for index, cell in enumerate(nb.cells):
        meta = _graded_meta(cell)
        if meta:
            where.setdefault(meta["grade_id"], []).append(index)
    drop = set()
    for gid, indices in where.items():
        if len(indices) < 2:
            continue
        spec = expected.cells[gid]
        if spec["solution"] and not spec["locked"]:
            stub = _norm(spec["source"])
            edited = [i for i in indices if _norm(nb.cells[i].source) != stub]
            keep = edited[0] if edited else indices[0]
            for i in indices:
                if i == keep:
                    continue
                if i in edited:
                    _plain(nb.cells[i])
                else:
                    drop.add(i)
            kept_edits = len(edited) - (keep in edited)
            notes.append(f"solution cell {gid} was handed in {len(indices)} times: the "
                         f"{'first edited' if edited else 'first'} copy is graded"
                         + (f", {kept_edits} other edited copies run as ordinary cells" if kept_edits else "")
                         + (f", {len(indices) - 1 - kept_edits} unedited copies of the stub were dropped"
                            if len(indices) - 1 - kept_edits else ""))
        else:
            drop.update(indices[1:])
            kind = "test cell" if spec["grade"] else "read-only cell"
            notes.append(f"{kind} {gid} was handed in {len(indices)} times: the copies were dropped")
    nb.cells = [cell for i, cell in enumerate(nb.cells) if i not in drop]


def _restore_flags(nb, expected: Expected, notes: list[str]) -> None:
    """A graded cell's kind and points are the release's (nbgrader restores points, not kinds)."""
    changed = []
    for cell in nb.cells:
        meta = _graded_meta(cell)
        if not meta:
            continue
        spec = expected.cells[meta["grade_id"]]
        # the kinds as nbgrader reads them: a test cell flagged "locked": false (as nbgrader's own
        # examples are) is locked all the same, and is left as handed in
        want = {"grade": spec["grade"], "solution": spec["solution"], "locked": spec["locked"]}
        if {"grade": bool(meta.get("grade")), "solution": bool(meta.get("solution")), "locked": is_locked(meta)} != want:
            changed.append(meta["grade_id"])
            meta.update(want)
        elif spec["grade"] and "points" not in meta:
            changed.append(meta["grade_id"])
        if spec["grade"]:
            meta["points"] = spec["points"]
        else:
            meta.pop("points", None)
    if changed:
        notes.append(f"the grader metadata of cell(s) {_names(changed)} had been changed: put back as released")


def _positions(nb) -> dict[str, int]:
    return {meta["grade_id"]: i for i, meta in enumerate(map(_graded_meta, nb.cells)) if meta}


def _restore_missing(nb, expected: Expected, notes: list[str]) -> None:
    solutions, others = [], []
    for k, gid in enumerate(expected.order):
        where = _positions(nb)
        if gid in where:
            continue
        spec = expected.cells[gid]
        before = [where[g] for g in expected.order[:k] if g in where]
        after = [where[g] for g in expected.order[k + 1:] if g in where]
        if spec["solution"]:  # where it was: right after the graded cell before it
            at = max(before) + 1 if before else (min(after) if after else len(nb.cells))
        else:  # a test: after whatever the student wrote in its place, before the next graded cell
            at = min(after) if after else len(nb.cells)
        nb.cells.insert(at, _restored_cell(gid, spec))
        (solutions if spec["solution"] else others).append(gid)
    if others:
        notes.append(f"missing test or read-only cell(s) {_names(others)}: put back as released")
    if solutions:
        notes.append(f"missing solution cell(s) {_names(solutions)}: put back empty (the tests ran on what "
                     "the notebook defines elsewhere)")


def _restore_order(nb, expected: Expected, notes: list[str]) -> None:
    for k, gid in enumerate(expected.order):
        if not expected.cells[gid]["locked"]:
            continue  # the student's own cells stay where the student put them
        where = _positions(nb)
        earlier = [g for g in expected.order[:k] if g in where]
        if not earlier or where[gid] > max(where[g] for g in earlier):
            continue
        last = max(earlier, key=lambda g: where[g])
        cell = nb.cells.pop(where[gid])
        nb.cells.insert(_positions(nb)[last] + 1, cell)
        notes.append(f"{'test' if expected.cells[gid]['grade'] else 'read-only'} cell {gid} was above {last}: "
                     "moved below it, as released")


def repair(nb, expected: Expected) -> tuple[NotebookNode, list[str]]:
    """A gradable copy of ``nb`` and a note per repair (empty: nothing needed mending)."""
    nb = copy.deepcopy(nb)
    notes: list[str] = []
    _drop_foreign(nb, expected, notes)
    _drop_duplicates(nb, expected, notes)
    _restore_flags(nb, expected, notes)
    _restore_missing(nb, expected, notes)
    _restore_order(nb, expected, notes)
    return nb, notes


def other_notebooks(folder: Path, graded: str, expected: Expected) -> list[str]:
    """A note per other notebook in a submission folder, with how many answers it holds (the
    assignment's own other notebooks, ``expected.siblings``, are graded in their turn: never listed)."""
    graded_path = Path(folder) / graded
    own = {graded, *(name + ".ipynb" for name in expected.siblings)}
    others = sorted(p for p in Path(folder).glob("*.ipynb") if p.name not in own)
    if not others:
        return []
    total = len(expected.solution_ids())

    def count(path: Path) -> str:
        import nbformat

        try:
            return f"{answered(nbformat.reads(path.read_text(), as_version=4), expected)} of {total} answers filled in"
        except Exception:  # nbformat raises several types for a broken file
            return "not a readable notebook"

    listed = ", ".join(f"{p.name} ({count(p)})" for p in others[:ANSWERED_COPY_LIMIT])
    more = f" and {len(others) - ANSWERED_COPY_LIMIT} more" if len(others) > ANSWERED_COPY_LIMIT else ""
    mine = count(graded_path)
    return [f"{len(others) + 1} notebooks handed in: {graded} ({mine}) was graded, not {listed}{more}"]


# ---------------------------------------------------------------- nbgrader preprocessors

try:
    from nbgrader.preprocessors import NbGraderPreprocessor
except ImportError:  # pragma: no cover - nbgrader is a requirement of the instructor side
    NbGraderPreprocessor = object


class RepairSubmission(NbGraderPreprocessor):
    """Sanitize step, before nbgrader's own: :func:`repair` against the gradebook (module doc)."""

    release_roots = List(Unicode(), default_value=[], help="more course roots whose release/ names the "
                         "assignments, for 'this is another assignment's notebook'").tag(config=True)

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        expected = expected_from_gradebook(info["db_url"], info["notebook"], info["assignment"])
        known = set(grade_ids(nb)) & set(expected.cells)
        folder = Path(resources.get("metadata", {}).get("path") or ".").resolve()
        course = folder.parents[2] if len(folder.parents) > 2 else folder  # submitted/<student>/<assignment>
        for candidate in dict.fromkeys([course, Path.cwd(), *map(Path, self.release_roots)]):
            wrong = wrong_chapter(nb, info["assignment"], candidate)
            if wrong:
                raise WrongNotebookError(wrong)
        nb, notes = repair(nb, expected)
        if resources.get("metadata", {}).get("path"):
            notes += other_notebooks(folder, info["notebook"] + ".ipynb", expected)
        if not known and grade_ids(nb):
            notes.insert(0, "the notebook had none of this assignment's graded cells (grader metadata lost?): "
                            "every test was put back")
        nb.metadata.pop(REPAIR_METADATA, None)
        nb.metadata.pop(KERNEL_METADATA, None)  # only the grading kernel's own Execute step says that
        if notes:
            nb.metadata[REPAIR_METADATA] = {"notes": notes}
            self.log.warning("repaired the submission: %s", "; ".join(notes))
        return nb, resources


class RepairNotes(NbGraderPreprocessor):
    """Autograde step, first: the repair notes of the sanitize step become review reasons."""

    def preprocess(self, nb, resources):
        from .nbgrader_ext import REVIEW_METADATA

        notes = nb.get("metadata", {}).get(REPAIR_METADATA, {}).get("notes", [])
        resources.setdefault(REVIEW_METADATA, []).extend((0, note) for note in notes)
        return nb, resources


def repair_notes(nb) -> list[str]:
    """The repair notes recorded in an autograded notebook."""
    return list(nb.get("metadata", {}).get(REPAIR_METADATA, {}).get("notes", []))
