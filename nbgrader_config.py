"""nbgrader configuration for the course (nbgrader 0.9.6).

Every line here answers a pitfall we measured; see README "Grading pipeline".
"""

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import ClearHiddenTests, GetGrades

from instructor.nbgrader_ext import StripJupytextMetadata

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)

c.CourseDirectory.course_id = "attention-transformers"

# nbgrader copies every non-notebook file of source/<assignment>/ to release, autograded and
# feedback: the jupytext twin (*.py) holds every solution, so it must never be copied.
c.CourseDirectory.ignore = [
    ".ipynb_checkpoints",
    "*.pyc",
    "__pycache__",
    "feedback",
    "*.py",
    "*.md",
    "gradebook.db",
]

# Released notebooks must not keep the jupytext pairing (Lab would write a .py on save).
c.GenerateAssignment.preprocessors = [
    "nbgrader.preprocessors.IncludeHeaderFooter",
    "nbgrader.preprocessors.InstantiateTests",
    "nbgrader.preprocessors.LockCells",
    "nbgrader.preprocessors.ClearSolutions",
    "nbgrader.preprocessors.ClearOutput",
    "nbgrader.preprocessors.CheckCellMetadata",
    "nbgrader.preprocessors.ComputeChecksums",
    "nbgrader.preprocessors.SaveCells",
    "nbgrader.preprocessors.ClearHiddenTests",
    "nbgrader.preprocessors.ClearMarkScheme",
    "nbgrader.preprocessors.ComputeChecksums",
    "nbgrader.preprocessors.CheckCellMetadata",
    StripJupytextMetadata,
]
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Feedback is rendered from the autograded notebook, which has the hidden tests put back:
# clear them again before writing HTML for students.
c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, CSSHTMLHeaderPreprocessor]

# Execution while autograding. The slowest cell (chapter 07 trains a small model) needs
# well under a minute; an infinite loop is interrupted after `timeout` seconds and scores 0.
c.Execute.timeout = 120
# Minimal tracebacks: a failing hidden test shows its AssertionError message, not its source.
c.Execute.extra_arguments = [
    "--HistoryManager.hist_file=:memory:",
    "--InteractiveShell.xmode=Minimal",
]
# A cell that prints megabytes is cut (student output limit, in lines/characters).
c.LimitOutput.max_lines = 300
c.LimitOutput.max_traceback = 60
