"""Where is this notebook running?"""

from __future__ import annotations

import os

__all__ = ["grading_mode", "short_demos", "under_nbgrader"]


def grading_mode() -> str | None:
    """Return ``"autograde"`` or ``"validate"`` under nbgrader, else ``None``.

    nbgrader sets ``NBGRADER_EXECUTION`` while it executes a notebook. Notebooks use this to
    skip work that only a person looking at the screen needs (long animations, extra plots).
    """
    return os.environ.get("NBGRADER_EXECUTION") or None


def under_nbgrader() -> bool:
    """True while nbgrader autogrades or validates this notebook."""
    return grading_mode() is not None


def short_demos() -> bool:
    """True when short runs of the long demos are asked for (``COURSE_QUICK_DEMOS`` set, as the course's own
    test suite sets it): chapter 10 then trains for a few steps instead of minutes."""
    return bool(os.environ.get("COURSE_QUICK_DEMOS"))
