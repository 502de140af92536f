"""nbgrader configuration of the example course: the lines a course author copies.

Plain nbgrader 0.9.6 everywhere, except three things from the grader's package, nboracle
(nbgrader-oracle, ``pip install -e ../../nbgrader-oracle``): the graded test cells run in the grader
(OracleExecute, which also starts the kernel's side before any student code), every grading
kernel runs in an OS sandbox, and a handed-in notebook with damaged cells is repaired. Every
import of the package is in this file (and one line of 02_sorting's imports cell).
"""

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader.converters import Autograde
from nbgrader.preprocessors import ClearHiddenTests, Execute, GetGrades
from nboracle.grader.oracle import OracleExecute
from nboracle.grader.repair import RepairNotes, RepairSubmission
from nboracle.grader.sandbox import sandboxed_steps

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)

c.CourseDirectory.course_id = "sorting-example"
# nbgrader copies every other file of source/<assignment>/ to students: the jupytext twin
# (*.py) holds the solutions and hidden tests.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "*.py", "feedback", "gradebook.db"]

# Every assignment's graded test cells run in the grader's process, from the gradebook's copy
# of their source; the student's names answer from the kernel as plain data.
c.OracleExecute.oracle = "on"
# Minimal tracebacks: a failing hidden test shows its message, not its source. (OracleExecute
# starts the kernel's side itself, before any student code: it answers the grader's requests and
# puts back the builtins a cell replaced, without which a student who sets
# builtins.isinstance = lambda *a: True would stop the kernel's messages.)
c.Execute.extra_arguments = [
    "--HistoryManager.hist_file=:memory:",
    "--InteractiveShell.xmode=Minimal",
    "--IPKernelApp.log_level=CRITICAL",
]
c.Execute.timeout = 60

# nbgrader's Execute step becomes the oracle's, and every Execute step starts its kernel in
# the sandbox (no course files, no network, capped memory); repair runs before sanitizing.
_steps = [OracleExecute if step is Execute else step for step in Autograde.autograde_preprocessors.default()]
c.Autograde.autograde_preprocessors = [RepairNotes, *sandboxed_steps(_steps)]
c.Autograde.sanitize_preprocessors = [RepairSubmission, *Autograde.sanitize_preprocessors.default()]
# A graded cell the student deleted is put back from the gradebook.
c.OverwriteCells.add_missing_cells = True

# Feedback is written from the autograded notebook, which has the hidden tests back in it.
c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, CSSHTMLHeaderPreprocessor]
