"""The bug zoo: plausible wrong answers that the graded tests must catch.

Each chapter has a module ``instructor/zoo/<assignment>.py`` (dots for the leading digits are
not allowed in module names, so the file is ``ch<NN>_<name>.py``) with ``ASSIGNMENT`` and
``VARIANTS``. A :class:`Variant` replaces the content of some solution cells and names the
test cells that must then lose points, each with a fragment of the message it should show.
The test suite fills every variant into the released notebook, autogrades them all in one
nbgrader run and checks both the lost points and the messages.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Variant:
    name: str
    why: str  # the mistake, in one sentence
    replace: dict[str, str]  # grade_id of a solution cell -> what the student typed
    expect: dict[str, str] = field(default_factory=dict)  # failing test grade_id -> message fragment

    def student_id(self) -> str:
        return "zoo-" + self.name.replace("_", "-")


def chapter_modules():
    """Every zoo module, keyed by its assignment id."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "ASSIGNMENT"):
            found[module.ASSIGNMENT] = module
    return found


def variants_for(assignment: str) -> list[Variant]:
    module = chapter_modules().get(assignment)
    return list(module.VARIANTS) if module else []
