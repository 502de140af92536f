"""Instructor tooling: the nbgrader pipeline, the bug zoo, the demo and the CLI.

Run it from a clone of the repository as ``python -m instructor --help``. Nothing in here is
shipped to students (they get ``release/`` and the ``course`` helper package).
"""
