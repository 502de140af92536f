"""Helpers for the Attention and Transformers course.

This package ships to students: it holds checks, plots, seeding and small utilities, and
never a reference solution to an exercise.
"""

from . import checks, corpus, env, quiz, seeding
from .checks import *  # noqa: F403
from .corpus import *  # noqa: F403
from .env import *  # noqa: F403
from .quiz import *  # noqa: F403
from .seeding import *  # noqa: F403

__version__ = "0.1.0"

# The student API: what ``from course import ...`` offers. Each module declares its own part
# in its ``__all__``; plots (``course.plots``) are imported
# from their modules.
__all__ = [*checks.__all__, *corpus.__all__, *env.__all__, *quiz.__all__, *seeding.__all__]
