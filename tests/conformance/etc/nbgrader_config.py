"""The grader switched on for any nbgrader course, as a system-wide nbgrader_config.py would.

`make test-nbgrader` (tests/conformance/run.py) puts this folder on JUPYTER_CONFIG_PATH and runs
nbgrader 0.9.6's own app tests (nbgrader/tests/apps): every test's nbgrader_config.py (in its
working directory) is loaded after this one and takes priority, as a course's own file does over
/etc/jupyter. It sets what the course's nbgrader_config.py sets for grading, with the grader's own
pieces (nboracle), and nothing of this course: no course id, ignore list or exchange root (nbgrader's
defaults stay), no chapter list, checks module, substitutes table or helper package.
tests/test_conformance.py checks that its steps are the course's, in the course's order.

COURSE_ORACLE=on grades every assignment's test cells in the grader (run.py's oracle mode);
unset, `oracle = "auto"` with no oracle chapters grades them in the kernel, as the course does
an assignment that is not one of its chapters.
"""

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader.converters import Autograde, GenerateAssignment
from nbgrader.preprocessors import ClearHiddenTests, Execute, GetGrades, LimitOutput, OverwriteCells
from nboracle.grader import nbgrader_ext as ext
from nboracle.grader.oracle import OracleExecute
from nboracle.grader.repair import RepairNotes, RepairSubmission
from nboracle.grader.sandbox import sandboxed_steps

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)

# generate_assignment: the jupytext pairing dropped, the due date in the released notebook
c.GenerateAssignment.preprocessors = [*GenerateAssignment.preprocessors.default(), ext.StripJupytextMetadata, ext.DueDateCell]
c.ExchangeFactory.list = ext.DueDateExchangeList

# generate_feedback: the hidden tests cleared again, the faster exporter
c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, CSSHTMLHeaderPreprocessor]
c.GenerateFeedback.exporter_class = ext.FeedbackExporter

# autograde: the course's limits and kernel arguments, the oracle's Execute step (sandboxed), output
# caps, the review flags last, the repair before nbgrader's sanitizing
c.Execute.timeout = 120
c.Execute.startup_timeout = 180
c.Execute.extra_arguments = ["--HistoryManager.hist_file=:memory:", "--InteractiveShell.xmode=Minimal",
                             "--IPKernelApp.log_level=CRITICAL"]
c.OverwriteCells.add_missing_cells = True
c.LimitOutput.max_lines = 300
c.LimitOutput.max_traceback = 60
c.LimitOutputSize.max_chars = 20_000
c.OracleExecute.oracle = "auto"
c.OracleExecute.oracle_chapters = []
c.OracleExecute.grader_memory_mb = 3072
_steps = [OracleExecute if step is Execute else step for step in Autograde.autograde_preprocessors.default()]
_at = _steps.index(LimitOutput) + 1
c.Autograde.autograde_preprocessors = [RepairNotes, *sandboxed_steps([*_steps[:_at], ext.LimitOutputSize, *_steps[_at:],
                                                                       ext.ReviewFlags, ext.TranslateMessages])]
# the review: an import of the grader's own kernel-side or grading modules in a student's cell is flagged
c.ReviewFlags.machinery_modules = ["nboracle.kernel", "nboracle.grader", "nboracle.classroom"]
# feedback in the course root's language: the course's catalogs (an English root, as here, translates nothing)
c.MessageCatalog.catalog = "instructor.messages:translator"
c.Autograde.sanitize_preprocessors = [ext.GrantedExtension, RepairSubmission, *(
    ext.QuietOverwriteCells if step is OverwriteCells else step for step in Autograde.sanitize_preprocessors.default())]

# export and the late policy: the review columns, the per-day penalty plugin (the course's 0 %)
c.ExportApp.plugin_class = ext.ReviewCsvExport
c.AssignLatePenalties.plugin_class = ext.PerDayPenalty
c.PerDayPenalty.percent_per_day = 0
c.PerDayPenalty.max_percent = 100
