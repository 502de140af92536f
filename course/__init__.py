"""Helpers for the Attention and Transformers course.

This package ships to students: it holds checks, plots, seeding and small utilities, and
never a reference solution to an exercise.
"""

from .checks import (
    as_numpy,
    check_close,
    check_dtype,
    check_finite,
    check_rows_sum_to_one,
    check_shape,
    check_true,
    check_type,
    matches,
)
from .env import grading_mode, under_nbgrader
from .seeding import seed_everything

__version__ = "0.1.0"

__all__ = [
    "as_numpy",
    "check_close",
    "check_dtype",
    "check_finite",
    "check_rows_sum_to_one",
    "check_shape",
    "check_true",
    "check_type",
    "grading_mode",
    "matches",
    "seed_everything",
    "under_nbgrader",
]
