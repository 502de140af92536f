"""This clone of the repository as a course root: where the course's own commands and tests work."""

from __future__ import annotations

from pathlib import Path

from nboracle.classroom.course_root import CourseRoot

REPO = Path(__file__).resolve().parents[1]
"""The folder of this repository (``source/``, ``release/``, ``nbgrader_config.py``)."""

REPOSITORY = CourseRoot(REPO, release_command="python -m instructor release {assignment}")
"""The course root of this clone of the repository."""
