"""The bug zoo: plausible wrong answers that the graded tests must catch.

Each chapter has a module ``instructor/zoo/<assignment>.py`` (dots for the leading digits are
not allowed in module names, so the file is ``ch<NN>_<name>.py``) with ``ASSIGNMENT`` and
``VARIANTS``. A :class:`Variant` is "the solution with this one change": ``edits`` names, per
solution cell, ``(old, new)`` replacements applied to the *current* solution text (each ``old``
must occur exactly once), so a change to a solution is tested by its zoo at once. ``replace``
gives a whole cell's text instead, for answers that are not a small edit (a hard-coded answer).
``expect`` names the test cells that must then lose points, each with a fragment of the message
it should show; with ``only=True`` no other test cell may lose points (the text claims that
only those tests notice the mistake, and the suite measures it). Whatever ``only`` says, one
mistake costs one part: every test cell a variant fails lies in the part (``## Part X · ...``
in the notebook) of the solution cells it edits, or in the part it declares with ``part``
(:func:`parts_of`, checked by tests/test_chapters.py for every variant of every chapter). A
variant that still costs another part says why in ``crosses``; the suite checks that it does,
so the note goes when the cascade does. The test suite fills every
variant into the released notebook, autogrades them all in one nbgrader run and checks both
the lost points and the messages.

A module may also list ``ALTERNATIVES``: correct answers written differently from the solution
(einsum instead of matmul, loops, float64, another construction order, ...), built the same
way but without ``expect``. Each must keep full marks: the tests check behaviour, not one way
of writing it.

A module may also list ``LIBRARY``: correct answers that let the library do an exercise's work
(``F.scaled_dot_product_attention`` inside chapter 06's block; the entry points are
``instructor.substitutes``), each with ``flagged``, a fragment of the review reason it must get.
Each must keep full marks *and* be flagged for review: the scan tells a person what to look at,
it never changes a score.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass, field, replace

Edit = tuple[str, str]


class ZooError(ValueError):
    """A variant no longer applies to the current solution (an edit or a grade_id is stale)."""


@dataclass(frozen=True)
class Variant:
    name: str
    why: str  # the mistake, in one sentence
    replace: dict[str, str] = field(default_factory=dict)  # solution grade_id -> the whole cell typed
    expect: dict[str, str] = field(default_factory=dict)  # failing test grade_id -> message fragment
    edits: dict[str, tuple[Edit, ...]] = field(default_factory=dict)  # solution grade_id -> (old, new)...
    only: bool = False  # True: the cells of ``expect`` are the only ones that lose points (a claim of the text)
    flagged: str = ""  # LIBRARY only: a fragment of the review reason the answer must get
    part: str = ""  # the part (a letter) the mistake belongs to, when not the part of the cells it edits
    crosses: str = ""  # a known cascade the tests cannot avoid yet: why (the suite checks that it still crosses)

    def own_parts(self, parts: dict[str, str]) -> set[str]:
        """The parts this mistake belongs to: ``part`` if declared, else the parts of the cells it changes
        (``parts``: grade_id -> part letter, :func:`parts_of`)."""
        if self.part:
            return {self.part}
        return {parts[gid] for gid in {*self.replace, *self.edits} if gid in parts}

    def student_id(self, prefix: str = "zoo") -> str:
        return f"{prefix}-" + self.name.replace("_", "-")

    def answers(self, solutions: dict[str, str]) -> dict[str, str]:
        """Every solution cell as this student typed it: the solutions with this variant's changes."""
        unknown = (set(self.replace) | set(self.edits)) - set(solutions)
        if unknown:
            raise ZooError(f"variant {self.name} names unknown solution cells {sorted(unknown)}")
        out = {**solutions, **self.replace}
        for gid, edits in self.edits.items():
            out[gid] = apply_edits(out[gid], edits, f"variant {self.name}, cell {gid}")
        return out


def crossing(variants: list[Variant], crosses: dict[str, str]) -> list[Variant]:
    """``variants`` with ``crosses`` (variant name -> why it still costs another part) filled in."""
    unknown = set(crosses) - {v.name for v in variants}
    if unknown:
        raise ZooError(f"crosses names unknown variants {sorted(unknown)}")
    return [replace(v, crosses=crosses[v.name]) if v.name in crosses else v for v in variants]


def apply_edits(text: str, edits: tuple[Edit, ...] | list[Edit], where: str = "") -> str:
    """``text`` with each ``(old, new)`` applied in order; each ``old`` must occur exactly once."""
    for old, new in edits:
        count = text.count(old)
        if count != 1:
            raise ZooError(f"{where}: {old!r} occurs {count} times in the current solution, expected once")
        text = text.replace(old, new)
    return text


# chapters whose zoo is not yet held to "one mistake, one part" (with why): the suite skips that check for them only
# chapters whose zoo is not yet held to "one mistake, one loss" (chapter -> why): the suite skips that check for them
# only. Empty since 2026-12-07, when chapter 09's model tests came to judge encode and decode around the model's own
# decoder blocks (its remaining cascades are declared `crosses`, each with its reason).
ONE_LOSS_PENDING: dict[str, str] = {}

PART_HEADING = re.compile(r"^#{1,3}\s*Part ([A-Z])\b", re.M)


def parts_of(nb) -> dict[str, str]:
    """grade_id -> the letter of the part (``## Part C · ...``, the last such heading above it) of every
    nbgrader cell of a notebook; cells above the first part (a prediction in the opening) are part "-"."""
    parts, current = {}, "-"
    for cell in nb.cells:
        if cell.cell_type == "markdown" and (heading := PART_HEADING.search(cell.source)):
            current = heading.group(1)
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid:
            parts[gid] = current
    return parts


def chapter_modules() -> dict[str, list]:
    """Every zoo module, grouped by its assignment id (a chapter may have several modules,
    e.g. one per exercise added later)."""
    found: dict[str, list] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "ASSIGNMENT"):
            found.setdefault(module.ASSIGNMENT, []).append(module)
    return found


def variants_for(assignment: str) -> list[Variant]:
    return [v for module in chapter_modules().get(assignment, []) for v in module.VARIANTS]


def alternatives_for(assignment: str) -> list[Variant]:
    """Correct answers written differently: each must earn full marks."""
    return [v for module in chapter_modules().get(assignment, []) for v in getattr(module, "ALTERNATIVES", [])]


def library_for(assignment: str) -> list[Variant]:
    """Correct answers through a library entry point that does the exercise's work: each must
    earn full marks and be flagged for review with ``flagged`` in its reason."""
    return [v for module in chapter_modules().get(assignment, []) for v in getattr(module, "LIBRARY", [])]
