"""nbgrader configuration for the course (nbgrader 0.9.6).

Every line here answers a pitfall we measured; see docs/GRADING.md, "Grading pipeline".
"""

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader.converters import Autograde, GenerateAssignment
from nbgrader.preprocessors import ClearHiddenTests, Execute, GetGrades, LimitOutput, OverwriteCells
from nboracle.grader.nbgrader_ext import (
    DueDateCell,
    DueDateExchangeList,
    FeedbackExporter,
    GrantedExtension,
    LimitOutputSize,
    PerDayPenalty,
    QuietOverwriteCells,
    ReviewCsvExport,
    ReviewFlags,
    StripJupytextMetadata,
    TranslateMessages,
)
from nboracle.grader.oracle import OracleExecute

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)

c.CourseDirectory.course_id = "attention-transformers"

# The course's time zone, set once here (nbgrader's own setting, an IANA name such as
# "Asia/Ho_Chi_Minh"; nboracle.grader.coursetime): the formgrader's due-date dialog takes and shows
# dates in it, the released notebook and the Assignment List tell students the due date in it,
# `python -m instructor.hub extend` says it. The gradebook keeps UTC whatever is set here.
c.NbGraderAPI.timezone = "UTC"

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

# Released notebooks must not keep the jupytext pairing (Lab would write a .py on save), and
# say the due date when the gradebook has one (nbgrader's Assignment List does not show it).
c.GenerateAssignment.preprocessors = [
    *GenerateAssignment.preprocessors.default(),
    StripJupytextMetadata,
    DueDateCell,
]
# nbgrader's Assignment List shows no due date: the listing carries the one the released notebooks
# hold (DueDateCell), and which submissions came after it; the nboracle-due-dates Lab extension
# (on the hub's JUPYTER_PATH, docs/JUPYTERHUB.md) shows them beside each assignment.
c.ExchangeFactory.list = DueDateExchangeList
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Feedback is rendered from the autograded notebook, which has the hidden tests put back:
# clear them again before writing HTML for students.
c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, CSSHTMLHeaderPreprocessor]
# The same page as nbconvert's HTML exporter writes, a third faster (no BeautifulSoup pass).
c.GenerateFeedback.exporter_class = FeedbackExporter

# Execution while autograding. The slowest cell (chapter 07 trains a small model) needs
# well under a minute; an infinite loop is interrupted after `timeout` seconds and scores 0.
c.Execute.timeout = 120
# Kernel start includes importing torch (the notebook's imports, the oracle's kernel side): give a
# loaded machine time.
c.Execute.startup_timeout = 180
# Minimal tracebacks: a failing hidden test shows its AssertionError message, not its source.
# OracleExecute (below, in place of nbgrader's Execute; c.Execute.* applies to it) starts the
# kernel's side (nboracle.kernel.guard.install(): the oracle's handlers, and the builtins put
# back after every cell) with a silent request before any student code runs.
c.Execute.extra_arguments = [
    "--HistoryManager.hist_file=:memory:",
    "--InteractiveShell.xmode=Minimal",
]
# The course's helper package is imported with it: a package that cannot be imported (a broken
# copy of the course) stops a class batch as the grader's error instead of costing every student
# the imports cell.
c.GuardedExecute.kernel_imports = ["course"]
# A test cell the student deleted is put back from the gradebook (else its points vanish
# from both the score and the maximum).
c.OverwriteCells.add_missing_cells = True
# A cell that prints megabytes is cut: nbgrader's LimitOutput counts lines, LimitOutputSize
# characters (one print of 5 MB is one line).
c.LimitOutput.max_lines = 300
c.LimitOutput.max_traceback = 60
c.LimitOutputSize.max_chars = 20_000
# Graded test cells of oracle chapters run in the grader's own process (nbgrader-oracle/nboracle/grader/oracle.py) on
# the data the student's kernel answers: while one runs, the grading process's data is capped at
# this many MiB, and the kernel's answers to it at a quarter of that (nbgrader-oracle/nboracle/grader/memory.py). A
# student whose answers need more fails that test, with a message naming the limit; the next
# test and the next student are graded as usual. Honest work needs under 0.5 GiB; `--jobs N`
# uses up to N times this besides the kernels. 0: no cap.
c.OracleExecute.grader_memory_mb = 3072
# Which chapters run their tests in the grader (COURSE_ORACLE=on|off overrides): all of them.
c.OracleExecute.oracle = "auto"
c.OracleExecute.oracle_chapters = ["01_two_keys", "02_scaling", "03_masks", "04_encoder_block",
                                   "05_positional_encoding", "06_multihead_attention",
                                   "07_seq2seq_beam_search", "08_attention_cost", "09_decoder", "10_tiny_gpt",
                                   "11_modern_decoder"]
# course.checks.attempt(what, function, ...) calls only the function the test hands it.
c.OracleExecute.calling_helpers = ["course.checks:attempt"]
# The chapters' checks that their test cells import and hand the student's objects to (the
# course's test code, outside the notebooks): their lines may use the student's objects as a test
# cell's own lines do.
c.OracleExecute.test_modules = ["course.two_keys_checks", "course.scaling_checks", "course.masks_checks", "course.encoder_block_checks",
                                "course.positional_encoding_checks", "course.multihead_attention_checks",
                                "course.seq2seq_checks", "course.attention_cost_checks", "course.decoder_checks",
                                "course.tiny_gpt_checks", "course.modern_decoder_checks",
                                # the references the hidden tests compare with: the grader's side only (never in
                                # course/, never bound into a kernel; docs/AUTHORING.md, "References")
                                "instructor.references.as_built", "instructor.references.decoder",
                                "instructor.references.tiny_gpt", "instructor.references.seq2seq_beam_search",
                                "instructor.references.encoder_block", "instructor.references.multihead_attention",
                                "instructor.references.scaling",
                                "instructor.references.lucbat", "instructor.references.modern_decoder"]
_autograde_steps = [OracleExecute if step is Execute else step
                    for step in Autograde.autograde_preprocessors.default()]
c.Autograde.autograde_preprocessors = (
    _autograde_steps[: _autograde_steps.index(LimitOutput) + 1]
    + [LimitOutputSize]
    + _autograde_steps[_autograde_steps.index(LimitOutput) + 1:]
    # last: mark the submission for review (dropped kernel messages, static scan of the student's
    # cells, sandbox refusals): notebook metadata grader_review + nbgrader's needs_manual_grade
    + [ReviewFlags]
    # then every message the student reads in the course root's language (MessageCatalog, below)
    + [TranslateMessages]
)
# Feedback in the student's language (nbgrader-oracle/nboracle/grader/messages.py): the course's
# catalogs, i18n/<language>/messages.po, looked up on the grader's side. A course root chooses its
# language (editions/vi/nbgrader_config.py: "vi"); this English one has none, so nothing is translated.
c.MessageCatalog.catalog = "instructor.messages:translator"
# The review scan: library entry points that would do an exercise's work (instructor/substitutes.py).
from instructor.substitutes import HELPER_ATTRIBUTES as _HELPERS  # noqa: E402
from instructor.substitutes import SUBSTITUTES as _SUBSTITUTES  # noqa: E402

c.ReviewFlags.substitutes = _SUBSTITUTES
c.ReviewFlags.helper_attributes = sorted(_HELPERS)
# ... and by allow-list: any call an exercise's definition makes that its text does not permit
# (instructor/allowed_calls.py), with its line; and an import of the grader's own kernel-side or
# grader-side modules in a student's cell.
from instructor.allowed_calls import ALLOWED_CALLS as _ALLOWED_CALLS  # noqa: E402

c.ReviewFlags.allowed_calls = _ALLOWED_CALLS
c.ReviewFlags.machinery_modules = ["nboracle.kernel", "nboracle.grader", "nboracle.classroom"]
# `nbgrader export` (and the class batch's grades.csv) add the columns submitted, late,
# seconds_late, needs_review and review_reasons to nbgrader's CSV.
c.ExportApp.plugin_class = ReviewCsvExport
# The class report (mistakes/ in the course root, for the instructor only): the known mistakes
# a failed test names, from the bug zoo (instructor/mistakes.py), read only by the class batch.
c.ClassReport.catalogue = "instructor.mistakes:catalogue"

# The late policy, in this one place (docs/JUPYTERHUB.md, "Deadlines"). A submission after the due
# date (set in the formgrader; a student's extension: python -m instructor.hub extend) is marked
# late in the formgrader, the feedback and the export; percent_per_day > 0 also takes that percent
# of the notebook's automatic score off per started day late (at most max_percent).
c.AssignLatePenalties.plugin_class = PerDayPenalty
c.PerDayPenalty.percent_per_day = 0
c.PerDayPenalty.max_percent = 100

# The exchange (Assignments panel, release_assignment/fetch/submit/collect). On one machine it
# is `.exchange/` inside this course (git-ignored; `make lab` and `make formgrader` create it).
# On JupyterHub a shared exchange is named in a system-wide nbgrader_config.py
# (docs/JUPYTERHUB.md): when one of the other config files on Jupyter's path names an
# exchange, that one is kept.
import os as _os  # noqa: E402
from pathlib import Path as _Path  # noqa: E402

from jupyter_core.paths import jupyter_config_path as _config_path  # noqa: E402
from traitlets.config.loader import PyFileConfigLoader as _Loader  # noqa: E402


def _shared_exchange_named() -> bool:
    here = _Path(__file__).resolve().parent
    for folder in _config_path():
        path = _Path(folder) / "nbgrader_config.py"
        if not path.is_file() or path.resolve().parent == here:
            continue
        try:
            if "root" in _Loader(path.name, str(path.parent)).load_config().get("Exchange", {}):
                return True
        except Exception:
            continue
    return False


if not _shared_exchange_named():
    c.Exchange.root = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), ".exchange")

# Every grading kernel runs in an OS sandbox (bubblewrap; see nbgrader-oracle/nboracle/grader/sandbox.py and the
# docs/GRADING.md, "The grading sandbox: what is protected where"): no gradebook, no other students, no network, capped memory
# and processes. COURSE_SANDBOX=on|auto|off (the CLI's --no-sandbox sets off). nbgrader's Execute
# hard-codes its kernel manager, so c.Execute.kernel_manager_class would be ignored: the Execute
# step is swapped for a subclass that uses nboracle.grader.sandbox.SandboxedKernelManager.
from nboracle.grader.sandbox import sandboxed_steps  # noqa: E402

c.Autograde.autograde_preprocessors = sandboxed_steps(c.Autograde.autograde_preprocessors)

# The gradebook: a sqlite file in the course root by default (one machine). A class graded by
# several machines, or several instructors, keeps it on a server: set COURSE_DB_URL, e.g.
# postgresql+psycopg2://grader:PASSWORD@db.example.org:5432/gradebook?sslmode=verify-full
# (docs/CLUSTER.md). Every nbgrader command and `python -m instructor` then use it.
if _os.environ.get("COURSE_DB_URL"):
    c.CourseDirectory.db_url = _os.environ["COURSE_DB_URL"]

# A handed-in notebook with a duplicated (copied in Lab), deleted, reordered or foreign graded
# cell is mended before nbgrader sanitizes it (nbgrader-oracle/nboracle/grader/repair.py; nbgrader 0.9.6 stops with
# "KeyError: 'grade_id'" otherwise); every repair becomes a review reason. The handed-in file
# is never changed. A notebook of another assignment is refused by name.
from nbgrader.converters import Autograde as _Autograde  # noqa: E402
from nboracle.grader.repair import RepairNotes, RepairSubmission  # noqa: E402

# A notebook of another of this course's assignments is told by name from the repository's release/
# (a scratch course root holds only the assignments it grades).
from instructor.repository import REPO as _REPO  # noqa: E402

c.RepairSubmission.release_roots = [str(_REPO)]
# A test cell handed in as released is not reported as changed (its hidden tests are not in the
# released copy): QuietOverwriteCells in place of nbgrader's OverwriteCells.
# GrantedExtension: an extension given before the submission existed (python -m instructor.hub extend)
# reaches nbgrader's submission before its late penalty is computed.
c.Autograde.sanitize_preprocessors = [GrantedExtension, RepairSubmission, *(
    QuietOverwriteCells if step is OverwriteCells else step for step in _Autograde.sanitize_preprocessors.default())]
c.Autograde.autograde_preprocessors = [RepairNotes, *c.Autograde.autograde_preprocessors]
# A grading kernel logs to the grader's terminal ("KeyboardInterrupt caught in kernel" after the
# time limit interrupted it lands on the class batch's progress bar): only critical lines.
c.Execute.extra_arguments = [*c.Execute.extra_arguments, "--IPKernelApp.log_level=CRITICAL"]
