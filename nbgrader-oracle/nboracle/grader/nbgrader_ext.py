"""nbgrader preprocessors used by ``nbgrader_config.py``."""

from __future__ import annotations

import json
import re
from pathlib import Path

from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
from nbgrader.exchange.default.list import ExchangeList
from nbgrader.plugins import CsvExportPlugin, LateSubmissionPlugin
from nbgrader.preprocessors import ClearHiddenTests, Execute, NbGraderPreprocessor, OverwriteCells
from traitlets import Dict, Float, Integer, List, TraitError, Unicode, validate

from .kernel_client import rejected, rejection_reasons
from .messages import translate_cell, translator, untranslated


class OnceCheckedSchemas:
    """``jsonschema`` as nbgrader's cell-metadata validator sees it, each schema checked once.

    nbgrader 0.9 validates every nbgrader cell with ``jsonschema.validate(metadata, schema)``,
    which first checks the *schema* against JSON Schema's meta-schema: about 1.5 ms a cell, four
    passes a notebook (some 0.2 s of every autograde here). :meth:`validate` checks a schema the
    first time it sees it, then only validates the metadata, raising the error
    ``jsonschema.validate`` would raise; every other name is ``jsonschema``'s own.
    """

    def __init__(self) -> None:
        # by content: nbgrader reads its schema file afresh for every notebook it checks
        self._validators: dict[str, object] = {}

    def validate(self, instance, schema, *args, **kwargs) -> None:
        import jsonschema

        if args or kwargs:
            return jsonschema.validate(instance, schema, *args, **kwargs)
        key = json.dumps(schema, sort_keys=True)
        validator = self._validators.get(key)
        if validator is None:
            cls = jsonschema.validators.validator_for(schema)
            cls.check_schema(schema)
            validator = self._validators[key] = cls(json.loads(key))  # its own copy of the schema
        error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
        if error is not None:
            raise error

    def __getattr__(self, name: str):
        import jsonschema

        return getattr(jsonschema, name)


def _check_schemas_once() -> None:
    from nbgrader.nbgraderformat import common

    if not isinstance(common.jsonschema, OnceCheckedSchemas):
        common.jsonschema = OnceCheckedSchemas()


_check_schemas_once()


class StripJupytextMetadata(NbGraderPreprocessor):
    """Drop the jupytext pairing from released notebooks.

    A student notebook that still says ``jupytext.formats = "ipynb,py:percent"`` makes
    JupyterLab (with jupytext installed) write a ``.py`` twin beside it on every save.
    """

    def preprocess(self, nb, resources):
        nb.metadata.pop("jupytext", None)
        return nb, resources


# a folder for JUPYTER_PATH: its labextensions/nboracle-due-dates shows DueDateExchangeList's dates
JUPYTER_DATA = Path(__file__).resolve().parents[1] / "jupyter"
NOTEBOOK_METADATA = "nbgrader_oracle"  # a released notebook's own metadata key
DUE_KEY = "due_utc"  # its due date, "2027-03-05T17:00:00Z", when the gradebook has one
ZONE_KEY = "due_zone"  # the course's time zone the due date is shown in ("Asia/Ho_Chi_Minh")
WORDS_KEY = "due_words"  # the Assignment List's phrases in the course's language: {English: translation}
LANGUAGE_KEY = "due_language"  # that language ("vi"), for the date's own format
# What the nboracle-due-dates Lab extension writes beside an assignment, in English; the release stores
# them translated by the course's catalog (when it has one) for the extension to show instead.
DUE_WORDS = ("Due {when}", "in {days} days", "in {hours} h {minutes} min", "in {minutes} min",
             "in less than a minute", "passed", "after the due date")
# What nbgrader 0.9.6's Assignment List writes itself (its panel has no translation hook): the
# nboracle-due-dates extension shows these in the course's language, the buttons doing what they did.
PANEL_WORDS = ("Released, downloaded, and submitted assignments for course:",
               "Released assignments", "Downloaded assignments", "Submitted assignments",
               "There are no assignments to fetch.", "There are no downloaded assignments.",
               "There are no submitted assignments.", "Loading, please wait...",
               "Fetch", "Fetching...", "Submit", "submitting...", "Validate", "Validating...",
               "Fetch Feedback", "Fetching Feedback...", "(view feedback)", "(feedback available to fetch)",
               "Validation Results", "Success! Your notebook passes all the tests.", "The following cell failed:",
               "The following cell passed:", "The source of the following cell has changed, but it should not have!",
               "There was an error running the validate command:")
LIST_WORDS = DUE_WORDS + PANEL_WORDS  # every phrase of the Assignment List a release can carry translated


class DueDateCell(NbGraderPreprocessor):
    """Tell the student the due date in the released notebook.

    nbgrader 0.9.6 shows the due date to no student; the gradebook knows it once the instructor
    set it (formgrader: Manage Assignments, Edit). When it is set, a markdown cell after the
    notebook's title says when the assignment is due, in the course's time zone
    (``c.NbGraderAPI.timezone``, :mod:`.coursetime`; UTC when unset), and the notebook's metadata
    holds it (``nbgrader_oracle.due_utc``, the zone in ``due_zone``) for the Assignment List
    (:class:`DueDateExchangeList`). Without a due date nothing changes, so a course without
    deadlines (a self-learner's copy) releases the same notebooks. The cell is an ordinary
    markdown cell: no grading step reads it. A notebook older than nbformat 4.5 (no cell ids) gets
    it without an ``id``, so that it stays valid; the cell's metadata tells it in every version.
    """

    cell_id = "nbgrader-oracle-due-date"

    def _ours(self, cell) -> bool:
        return cell.get("id") == self.cell_id or bool(cell.get("metadata", {}).get(NOTEBOOK_METADATA, {}).get("due_date_cell"))

    def preprocess(self, nb, resources):
        from nbformat.v4 import new_markdown_cell

        nb.cells = [cell for cell in nb.cells if not self._ours(cell)]  # generated again: not doubled
        due = self._due_date(resources.get("nbgrader", {}))
        ours = nb.metadata.get(NOTEBOOK_METADATA, {})
        for key in (DUE_KEY, ZONE_KEY, WORDS_KEY, LANGUAGE_KEY):
            ours.pop(key, None)
        translate = translator(parent=self)
        words = _list_words(translate)
        if words:  # the Assignment List in the course's language (the extension reads them back), due date or not
            from .messages import MessageCatalog

            ours[WORDS_KEY], ours[LANGUAGE_KEY] = words, MessageCatalog(parent=self).language
        if due is not None:
            from .coursetime import course_zone

            zone = course_zone(self.config)
            # for the Assignment List (DueDateExchangeList): the same date, machine-readable
            ours[DUE_KEY] = f"{due:%Y-%m-%dT%H:%M:%S}Z"
            ours[ZONE_KEY] = zone
            text = _due_text(due, zone, translate)
            cell = new_markdown_cell(text, metadata={NOTEBOOK_METADATA: {"due_date_cell": True}})
            if (nb.get("nbformat"), nb.get("nbformat_minor", 0)) >= (4, 5):
                cell["id"] = self.cell_id
            else:  # cell ids came with nbformat 4.5: an older notebook with one is invalid
                cell.pop("id", None)
            first_markdown = next((i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"), -1)
            nb.cells.insert(first_markdown + 1, cell)
        if ours:
            nb.metadata[NOTEBOOK_METADATA] = ours
        else:
            nb.metadata.pop(NOTEBOOK_METADATA, None)
        return nb, resources

    def _due_date(self, context):
        from nbgrader.api import Gradebook, MissingEntry

        url, name = context.get("db_url"), context.get("assignment")
        if not url or not name:
            return None
        with Gradebook(url) as gradebook:
            try:
                return gradebook.find_assignment(name).duedate
            except MissingEntry:
                return None


DUE_TEXT = ("**Due: {due:%A %d %B %Y, %H:%M} {zone}.** Submit from the Assignment List before then; a "
            "later submission is marked late (the course's late policy says what that costs).")


def _due_text(due, zone: str, translate) -> str:
    """The due-date cell's sentence, the time in the course's zone (``17:00 UTC``, ``00:00
    (Asia/Ho_Chi_Minh, UTC+07:00)``), in the course's language when its catalog has it (else English)."""
    from .coursetime import local, zone_label

    there = local(due, zone)
    label = zone_label(there, zone)
    try:
        return translate(DUE_TEXT).format(due=there, zone=label)
    except (KeyError, IndexError, ValueError, AttributeError):  # a catalog entry with other placeholders
        return DUE_TEXT.format(due=there, zone=label)


LIST_FIELD = re.compile(r"\{(\w+)\}")  # a field of a LIST_WORDS phrase, which a translation keeps


def _list_words(translate) -> dict[str, str]:
    """The Assignment List's phrases that the course's catalog translates, each keeping its {fields}."""
    words = {}
    for english in LIST_WORDS:
        said = translate(english)
        if isinstance(said, str) and said and said != english \
                and sorted(LIST_FIELD.findall(said)) == sorted(LIST_FIELD.findall(english)):
            words[english] = said
    return words


def _released_metadata(folder: str):
    """Our metadata (``nbgrader_oracle``) of each released notebook in ``folder`` that can be read, in order."""
    import glob
    import os

    for path in sorted(glob.glob(os.path.join(folder, "*.ipynb"))):
        try:
            with open(path, encoding="utf-8") as handle:
                ours = json.load(handle).get("metadata", {}).get(NOTEBOOK_METADATA, {})
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(ours, dict):
            yield ours


def _words_of(metadata) -> tuple[dict[str, str] | None, str | None]:
    for ours in metadata:  # the first readable notebook decides
        words, language = ours.get(WORDS_KEY), ours.get(LANGUAGE_KEY)
        if isinstance(words, dict) and all(isinstance(k, str) and k in LIST_WORDS and isinstance(v, str)
                                           and len(v) <= 200 for k, v in words.items()):
            return words, language if isinstance(language, str) and re.fullmatch(r"[a-z]{2,3}", language) else None
        return None, None
    return None, None


def released_words(folder: str) -> tuple[dict[str, str] | None, str | None]:
    """The Assignment List's phrases in the course's language and that language, as the released notebooks
    in ``folder`` hold them (:class:`DueDateCell`), or (None, None): English."""
    return _words_of(_released_metadata(folder))


class GrantedExtension(NbGraderPreprocessor):
    """The extension the instructor gave a student (:mod:`.extensions`, possibly before any
    submission) onto nbgrader's submission as autograde creates it, before nbgrader's late penalty
    is computed: first of ``c.Autograde.sanitize_preprocessors``."""

    def preprocess(self, nb, resources):
        from nbgrader.api import Gradebook

        from .extensions import apply

        context = resources.get("nbgrader", {})
        url, assignment, student = context.get("db_url"), context.get("assignment"), context.get("student")
        if url and assignment and student:
            with Gradebook(url) as gradebook:
                apply(gradebook, assignment, student)
        return nb, resources


def released_due_date(folder: str) -> tuple[str | None, str | None]:
    """The due date (``"2027-03-05T17:00:00Z"``) the released notebooks in ``folder`` hold and the
    course's time zone it is shown in (``"Asia/Ho_Chi_Minh"``; None from an older release), or (None, None)."""
    return _due_of(_released_metadata(folder))


def _due_of(metadata) -> tuple[str | None, str | None]:
    from .coursetime import zone_name

    for ours in metadata:
        due, zone = ours.get(DUE_KEY), ours.get(ZONE_KEY)
        if isinstance(due, str) and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", due):
            try:
                return due, zone_name(zone) if isinstance(zone, str) else None
            except ValueError:
                return due, None
    return None, None


class DueDateExchangeList(ExchangeList):
    """nbgrader's listing of the exchange, each assignment with its due date, for the Assignment List.

    The due date comes from the notebooks the instructor released (:class:`DueDateCell` writes
    it into their metadata): the exchange's ``outbound`` copy (an assignment released again
    with a moved or removed due date says the new one), else the student's fetched copy.
    Every listed assignment gets ``due_utc`` (None without a due date) and ``due_zone`` (the course's
    time zone, ``c.NbGraderAPI.timezone`` on the instructor's side, that it is shown in); each of a student's
    submissions gets ``after_due`` (True when handed in after the due date; an extension the
    instructor granted is not known here, so the Assignment List says "after the due date", not
    "late"), measured by when the submission arrived as the server saw it, not by the time the
    student's own nbgrader wrote. The ``nboracle-due-dates`` Lab extension shows both in the Assignment List. Set with
    ``c.ExchangeFactory.list = "nboracle.grader.nbgrader_ext.DueDateExchangeList"``.
    """

    def parse_assignments(self):
        import os

        from nbgrader.utils import parse_utc

        assignments = super().parse_assignments()
        for info in assignments:
            outbound = os.path.join(self.root, info["course_id"], "outbound", info["assignment_id"])
            if os.path.isdir(outbound):  # what the instructor released last: the date in force
                metadata = list(_released_metadata(outbound))
            elif info.get("status") == "fetched":  # no longer released: what the student's own copy was released with
                metadata = list(_released_metadata(info["path"]))
            else:
                metadata = []
            (due, zone), (words, language) = _due_of(metadata), _words_of(metadata)
            info["due_utc"], info["due_zone"] = due, zone
            info[WORDS_KEY], info[LANGUAGE_KEY] = words, language
            deadline = None if due is None else parse_utc(due)  # naive UTC, as nbgrader's timestamps parse
            for submission in info.get("submissions", []):
                handed_in = self._arrived(submission)
                submission["after_due"] = None if deadline is None or handed_in is None else handed_in > deadline
        return assignments

    def _arrived(self, submission: dict):
        """When the server saw the submission arrive (its files' change times, :mod:`.exchange`), not
        the time the student's nbgrader wrote into it (``timestamp``, which an option changes)."""
        import os

        from nbgrader.utils import get_username

        from .exchange import arrival_record, arrived_at, cache_key, inbound_key, utc

        path = submission.get("path")
        if not path or not os.path.isdir(path):
            return None
        name, course = os.path.basename(path), submission.get("course_id", "")
        key = inbound_key(course, name) if self.inbound else cache_key(get_username(), course, name)
        return utc(arrived_at(path, key, arrival_record(self.root)))


class LimitOutputSize(NbGraderPreprocessor):
    """Cut every text output of a cell to ``max_chars`` characters.

    nbgrader's LimitOutput counts lines, so one ``print("x" * 5_000_000)`` would still put
    megabytes into the autograded notebook and the feedback page.
    """

    max_chars = Integer(20_000, help="characters kept per text output").tag(config=True)

    def _cut(self, text: str) -> str:
        if len(text) <= self.max_chars:
            return text
        kept = self.max_chars // 2
        return (text[:kept] + f"\n... [{len(text) - 2 * kept} characters cut by the grader] ...\n"
                + text[-kept:])

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        for output in cell.get("outputs", []):
            if "text" in output:
                text = output.text if isinstance(output.text, str) else "".join(output.text)
                output.text = self._cut(text)
            for mime, value in list(output.get("data", {}).items()):
                if mime.startswith("text/") and isinstance(value, str):
                    output.data[mime] = self._cut(value)
            if "traceback" in output:
                output.traceback = [self._cut(line) for line in output.traceback]
        return cell, resources


# ---------------------------------------------------------------- the grading kernel, checked from outside

START_KEY = "grader-start"
REVIEW_METADATA = "grader_review"  # notebook metadata of the autograded notebook: {"reasons": [...]}
# the review reason of a kernel that could not start the course's kernel side (nboracle.classroom.grader
# turns it into a grader error: the environment is broken, not the student's work)
KERNEL_NOT_STARTED = "the grading kernel could not start the course's kernel side"
_INSTALL = "__import__('nboracle.kernel.guard', fromlist=['install']).install(*{imports!r})"
_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


DEMO_ONLY = "# demo only"  # first line of a cell that autograde skips (see is_demo_only)
SKIPPED_DEMO = "(demo only: not run while grading; this cell decides no score)\n"


def is_demo_only(cell) -> bool:
    """A code cell that only demonstrates (a training run, a timing, a figure): autograde skips it.

    Its first line is ``# demo only``. A graded or solution cell never counts as one, so a
    student's answer always runs. Skipping any other cell is the same as the student deleting
    it: it changes nothing a student could not change anyway, and a class is graded without
    the seconds of demos that decide no score.
    """
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return (cell.get("cell_type") == "code" and not meta.get("grade") and not meta.get("solution")
            and cell.get("source", "").lstrip().startswith(DEMO_ONLY))


def skip_demo(cell):
    """``cell`` as autograde leaves a demo-only cell: one line of output saying it was skipped."""
    from nbformat.notebooknode import NotebookNode

    cell.outputs = [NotebookNode(output_type="stream", name="stdout", text=SKIPPED_DEMO)]
    cell.execution_count = None
    return cell


def _is_test_cell(cell) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


KERNEL_START_TRIES = 3  # a grading kernel that dies before its first reply is started again, this many times in all


class GuardedExecute(Execute):
    """nbgrader's Execute, with what the grader checks from outside the kernel.

    * Before the first cell, a silent request starts the oracle's kernel side
      (``nboracle.kernel.guard.install()``: the oracle's handlers and torch's functions captured
      before any student code runs, ``nboracle.kernel.server.listen()``, and the builtins put back
      after every cell), and imports the course's packages (``kernel_imports``). A kernel that
      cannot (it could not import ``nboracle`` or one of those) is a review reason
      starting with :data:`KERNEL_NOT_STARTED`, which the class pipeline reports as a grader
      error.
    * Demo-only cells are skipped (:func:`is_demo_only`).
    * Messages the kernel client dropped during a cell (``nboracle.grader.kernel_client``) are a reason
      for review (``resources["grader_review"]``, read by :class:`ReviewFlags`).
    * A graded test cell run in the kernel (only with ``COURSE_ORACLE=off``) whose execute reply
      is not "ok" counts as failed even when the kernel displayed no error: an error output is
      put first among its outputs, where nbgrader looks when it scores the cell.
    * A kernel that dies before it answers its first request is started again, up to
      :data:`KERNEL_START_TRIES` times: jupyter_client picks a kernel's ports before the kernel binds
      them, so two graders starting kernels at once can pick the same free port, and the
      kernel that loses ("Address already in use") dies. Without this, that student's whole
      notebook was an error of the batch.

    (The in-kernel guard's signed reports that this class used to check were retired: under the
    oracle nothing they said decided a score, and every attack they flagged is flagged by the
    static scan too; see ``nboracle.kernel.guard``.)
    """

    kernel_imports = List(Unicode(), default_value=[], help="modules every grading kernel imports before any "
                          "student code, such as the course's helper package: one that cannot be imported is "
                          "a grader error (the batch stops), never a student's zero").tag(config=True)
    @validate("kernel_imports")
    def _module_names(self, proposal):
        bad = [name for name in proposal["value"] if not _MODULE_NAME.fullmatch(name)]
        if bad:
            raise TraitError(f"c.GuardedExecute.kernel_imports: not a module name: {bad}")
        return proposal["value"]

    start_timeout = Integer(60, help="seconds to wait for the kernel to start the oracle's kernel side").tag(config=True)
    # False under the oracle (nboracle.grader.oracle): a test cell that ran in the kernel decides nothing
    judge_kernel_test_cells = True

    async def async_start_new_kernel_client(self):
        for attempt in range(1, KERNEL_START_TRIES + 1):
            try:
                return await super().async_start_new_kernel_client()
            except RuntimeError as error:  # nbclient has cleaned the dead kernel up (km is None)
                if "before replying to kernel_info" not in str(error) or attempt == KERNEL_START_TRIES:
                    raise
                self.log.warning("grading kernel died while starting (%s): starting another (%d of %d)",
                                 error, attempt + 1, KERNEL_START_TRIES)
                if self.km is None:
                    self.km = self.create_kernel_manager()
                await self.async_start_new_kernel()

    def preprocess(self, nb, resources=None, km=None):
        self._started_kc = None
        self._reasons: list[tuple[int, str]] = []
        nb, resources = super().preprocess(nb, resources, km)
        resources.setdefault(REVIEW_METADATA, []).extend(self._reasons)
        return nb, resources

    def on_cell_executed(self, **kwargs):
        self._last_reply = kwargs.get("execute_reply")
        return super().on_cell_executed(**kwargs)

    async def _async_silent_call(self, expression: str):
        from queue import Empty
        from time import monotonic

        from nbclient.util import ensure_async

        msg_id = self.kc.execute("", silent=True, store_history=False, stop_on_error=False,
                                 user_expressions={START_KEY: expression})
        deadline = monotonic() + self.start_timeout
        while True:
            remaining = deadline - monotonic()
            if remaining <= 0:
                return None
            try:
                msg = await ensure_async(self.kc.shell_channel.get_msg(timeout=remaining))
            except Empty:
                return None
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg

    def _ensure_started(self) -> None:
        if self.kc is not None and self._started_kc is not self.kc:  # a new kernel: before its first cell
            self._start_kernel_side()

    def _start_kernel_side(self) -> None:
        """Before any student code: ``nboracle.kernel.guard.install()`` in the kernel, or a reason why not."""
        import ast

        from jupyter_core.utils import run_sync

        self._started_kc = self.kc
        reply = run_sync(self._async_silent_call)(_INSTALL.format(imports=list(self.kernel_imports)))
        try:
            value = reply["content"]["user_expressions"][START_KEY]
            answer = ast.literal_eval(value["data"]["text/plain"]) if value.get("status") == "ok" else \
                f"{value.get('ename')}: {value.get('evalue')}"
        except (KeyError, TypeError, ValueError, SyntaxError):
            answer = "no answer"
        from nboracle.kernel.server import LISTENING

        if answer != LISTENING:
            self._reasons.append((0, f"{KERNEL_NOT_STARTED} (nboracle.kernel.guard.install(): {answer})"))

    def preprocess_cell(self, cell, resources, index):
        if is_demo_only(cell):
            return skip_demo(cell), resources
        self._ensure_started()
        if cell.cell_type != "code" or not cell.source.strip():
            return super().preprocess_cell(cell, resources, index)
        dropped = rejected(self.kc)
        self._last_reply = None
        cell, resources = super().preprocess_cell(cell, resources, index)
        self._note_dropped(cell, index, rejected(self.kc) - dropped)
        if _is_test_cell(cell) and self.judge_kernel_test_cells:
            self._judge_reply(cell, self._last_reply)
        return cell, resources

    @staticmethod
    def _label(cell) -> str:
        return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") or "a cell without grade id"

    def _note_dropped(self, cell, index: int, count: int) -> None:
        """A reason for review when messages from the kernel were dropped (nboracle.grader.kernel_client)."""
        if not count:
            return
        self.log.warning("dropped %d message(s) from the kernel: %s", count,
                         "; ".join(rejection_reasons(self.kc)[-count:]))
        self._reasons.append((index, f"cell {index} ({self._label(cell)}): the kernel sent {count} "
                              f"message{'s' if count > 1 else ''} that the grader could not verify or read "
                              "(its messaging was tampered with); the grader ignored them"))

    def _judge_reply(self, cell, reply) -> None:
        status = (reply or {}).get("content", {}).get("status")
        if status == "ok":
            return
        errors = [o for o in cell.outputs if o.output_type == "error"]
        if errors:
            cell.outputs.remove(errors[0])
            cell.outputs.insert(0, errors[0])
        else:
            from nbformat.notebooknode import NotebookNode

            content = (reply or {}).get("content", {})
            ename = content.get("ename") or "ExecutionError"
            evalue = content.get("evalue") or f"the cell's execute reply was {status!r}"
            cell.outputs.insert(0, NotebookNode(output_type="error", ename=ename, evalue=evalue,
                                                traceback=[f"{ename}: {evalue}"]))


class TranslateMessages(NbGraderPreprocessor):
    """Autograde's step that shows every test's and the grader's message in the course's language."""

    def preprocess(self, nb, resources):
        translate = translator(parent=self)
        if translate is untranslated:
            return nb, resources
        for cell in nb.cells:
            translate_cell(cell, translate)
        return nb, resources


class ReviewFlags(NbGraderPreprocessor):
    """Mark a submission for review: dropped kernel messages, repairs, a static scan, sandbox refusals.

    The scan includes the library entry points that would do one of the assignment's exercises'
    work (``substitutes``, the course's table): a correct answer, flagged so that a person asks
    whose it is; and, where the course lists the calls an exercise's text permits (``allowed_calls``),
    every other call its definition makes, with its line.

    Runs last in autograde. The reasons go to the autograded notebook's metadata
    (``grader_review.reasons``, read by the class batch and :class:`ReviewCsvExport`) and
    nbgrader's own ``needs_manual_grade`` is set on every graded cell from the first flagged
    cell on, so the formgrader lists the submission as needing a manual grade.
    """

    substitutes = Dict(default_value={}, help="{assignment: {name an exercise defines: (library entry points "
                       "that would do its work, dotted)}}: a definition reaching one is flagged").tag(config=True)
    helper_attributes = List(Unicode(), default_value=[], help="attributes that continue an entry point "
                             "without using its work (a static mask builder)").tag(config=True)
    machinery_modules = List(Unicode(), default_value=[], help="more modules whose import is flagged as the "
                             "kernel's machinery (a course's own kernel-side modules)").tag(config=True)
    allowed_calls = Dict(default_value={}, help="{assignment: {name an exercise defines: (the calls its text "
                         "permits: dotted library paths, .methods, builtins)}}: any other call a definition makes "
                         "is flagged with its line (nboracle.grader.scan.allowed_call_findings)").tag(config=True)

    def preprocess(self, nb, resources):
        from nbgrader.api import Gradebook, MissingEntry

        from .scan import refusals, scan_notebook

        # the assignment is nbgrader's (the gradebook's), never the notebook's word: it chooses the
        # library entry points that would do an exercise's work (``substitutes``)
        assignment = resources.get("nbgrader", {}).get("assignment")
        exercises = dict(self.substitutes.get(assignment or "", {}))
        allowed = dict(self.allowed_calls.get(assignment or "", {}))
        scanned = scan_notebook(nb, exercises, set(self.helper_attributes), tuple(self.machinery_modules), allowed)
        found = list(resources.get(REVIEW_METADATA, [])) + scanned + refusals(nb)
        reasons = []
        for _, reason in sorted(found, key=lambda item: item[0]):
            if reason not in reasons:
                reasons.append(reason)
        nb.metadata.pop(REVIEW_METADATA, None)
        if not reasons:
            return nb, resources
        nb.metadata[REVIEW_METADATA] = {"reasons": reasons}
        first = min(index for index, _ in found)
        grade_ids = [c.metadata.nbgrader["grade_id"] for i, c in enumerate(nb.cells)
                     if c.get("metadata", {}).get("nbgrader", {}).get("grade") and i >= first]
        if not grade_ids:
            grade_ids = [c.metadata.nbgrader["grade_id"] for c in nb.cells
                         if c.get("metadata", {}).get("nbgrader", {}).get("grade")]
        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gb:
            for grade_id in grade_ids:
                try:
                    grade = gb.find_grade(grade_id, info["notebook"], info["assignment"], info["student"])
                except MissingEntry:
                    continue
                grade.needs_manual_grade = True
            gb.db.commit()
        self.log.warning("flagged for review: %s", "; ".join(reasons))
        return nb, resources


def review_reasons(nb) -> list[str]:
    """The review reasons recorded in an autograded notebook (empty: nothing to review)."""
    return list(nb.get("metadata", {}).get(REVIEW_METADATA, {}).get("reasons", []))


class ReviewCsvExport(CsvExportPlugin):
    """nbgrader's CSV export plus ``submitted``, ``late``, ``seconds_late``, ``extension_hours``, ``needs_review``
    and ``review_reasons``.

    Every student of the gradebook has a row per assignment, submitters or not (``submitted``
    ``yes``/``no``). ``late`` is ``yes`` when the submission came after the due date (the
    assignment's, plus the student's extension, ``extension_hours``, given before or after a submission,
    :mod:`.extensions`): ``seconds_late`` says by how much,
    and nbgrader's ``late_submission_penalty`` what the late policy took off. ``needs_review`` is ``yes`` when
    any notebook of that student's submission was flagged by :class:`ReviewFlags`;
    ``review_reasons`` joins the reasons with `` | ``.
    """

    def export(self, gradebook):
        import csv
        import glob
        import os

        import nbformat

        super().export(gradebook)
        dest = self.to or "grades.csv"
        with open(dest, newline="") as handle:
            reader = csv.DictReader(handle)
            rows = list(reader)
            fields = [*(reader.fieldnames or []), "submitted", "late", "seconds_late", "extension_hours",
                      "needs_review", "review_reasons"]
        coursedir = self.parent.coursedir
        from nbgrader.api import MissingEntry

        from .extensions import granted

        extensions = granted(gradebook)  # given before a submission too (nboracle.grader.extensions)
        for row in rows:
            hours = extensions.get((row["assignment"], row["student_id"]))
            row["extension_hours"] = "" if hours is None else f"{hours:g}"
            try:
                submission = gradebook.find_submission(row["assignment"], row["student_id"])
            except MissingEntry:
                row.update(submitted="no", late="", seconds_late="")
            else:
                late = submission.total_seconds_late
                row.update(submitted="yes", late="yes" if late > 0 else "", seconds_late=f"{late:g}")
            folder = coursedir.format_path(coursedir.autograded_directory, row["student_id"], row["assignment"])
            reasons = []
            for path in sorted(glob.glob(os.path.join(folder, "*.ipynb"))):
                try:
                    reasons += review_reasons(nbformat.read(path, as_version=4))
                except Exception:  # an unreadable autograded notebook is itself worth a look
                    reasons.append(f"{os.path.basename(path)} could not be read")
            row["needs_review"] = "yes" if reasons else ""
            row["review_reasons"] = " | ".join(reasons)
        with open(dest, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=fields)
            writer.writeheader()
            writer.writerows(rows)


class QuietOverwriteCells(OverwriteCells):
    """nbgrader's OverwriteCells without its "checksum has changed" warning for a locked cell handed
    in exactly as released: the gradebook's copy of a test cell holds the hidden tests that the
    released one lacks, so every honest submission differed. A cell the student changed is still
    reported (and put back) as nbgrader does."""

    def preprocess_cell(self, cell, resources, cell_index):
        self._handed_in = cell.source
        return super().preprocess_cell(cell, resources, cell_index)

    def report_change(self, name, attr, old, new):
        import nbformat

        if attr == "checksum":
            source = self.gradebook.find_source_cell(name, self.notebook_id, self.assignment_id)
            released = nbformat.v4.new_code_cell(source.source)
            ClearHiddenTests(parent=self)._remove_hidden_test_region(released)
            if released.source == self._handed_in:
                self.log.debug("cell %s: handed in as released (its hidden tests put back)", name)
                return
        super().report_change(name, attr, old, new)


class PerDayPenalty(LateSubmissionPlugin):
    """A late policy in addition to nbgrader's: ``percent_per_day`` of the notebook's score off for
    each day or part of a day late (after the student's extension), at most ``max_percent``; 0 (the
    default): late submissions are marked late, nothing is taken off.

    nbgrader's own ``c.LateSubmissionPlugin.penalty_method`` still holds (``'zero'``: a late
    notebook scores nothing): the penalty is the larger of the two."""

    percent_per_day = Float(0.0, help="percent of the score taken off per started day late").tag(config=True)
    max_percent = Float(100.0, help="at most this percent of the score is taken off").tag(config=True)

    def late_submission_penalty(self, student_id, score, total_seconds_late):
        import math

        penalties = []
        if self.penalty_method != "none":  # nbgrader's method, as its own plugin applies it
            penalties.append(super().late_submission_penalty(student_id, score, total_seconds_late))
        if self.percent_per_day > 0 and total_seconds_late > 0:
            days = math.ceil(total_seconds_late / 86400)
            penalties.append(round(score * min(self.max_percent, days * self.percent_per_day) / 100, 6))
        penalties = [penalty for penalty in penalties if penalty is not None]
        return max(penalties) if penalties else None


class FeedbackExporter(HTMLExporter):
    """nbconvert's HTML exporter without its BeautifulSoup pass over every page.

    nbconvert 7 parses each page it wrote with BeautifulSoup only to add a default ``alt`` text
    to images and ``tabindex`` to JupyterLab-template cells, then writes it out again: about a
    third of the time of a feedback page (the ``feedback`` template is a classic one, so only the
    images need the attribute). This exporter adds the same ``alt`` text with one substitution.
    """

    def from_notebook_node(self, nb, resources=None, **kw):
        langinfo = nb.metadata.get("language_info", {})
        lexer = langinfo.get("pygments_lexer", langinfo.get("name", None))
        self.register_filter("highlight_code",
                             self.filters.get("highlight_code", Highlight2HTML(pygments_lexer=lexer, parent=self)))
        resources = self._init_resources(resources)
        self.register_filter("filter_data_type",
                             WidgetsDataTypeFilter(notebook_metadata=self._nb_metadata, parent=self, resources=resources))
        page, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        return _IMG_WITHOUT_ALT.sub(f'<img alt="{_NO_ALT}"', page), resources


_NO_ALT = "No description has been provided for this image"  # nbconvert's own wording
_IMG_WITHOUT_ALT = re.compile(r"<img(?![^>]*\salt=)", re.IGNORECASE)
