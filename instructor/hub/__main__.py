"""``python -m instructor.hub``: the lecturer's commands (:mod:`instructor.hub.cli`)."""

import sys

from .cli import main

sys.exit(main())
