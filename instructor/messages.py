"""The course's feedback in other languages: every message a test shows, and the grader's own.

The code of a cell is the same in every edition, so a message is translated where it is shown,
on the grader's side (``nboracle.grader.messages``: the course's config names
:func:`translator`, an edition's config its language). A message is looked up by its English:

* **extracted mechanically** (:func:`extract`): every string a message can be made of, read from
  the code with ``ast`` (no run): the test cells of each published chapter (visible and hidden
  parts), the modules of ``course/`` they use (``checks``, ``quiz``, the chapter's
  ``*_checks``) and the grader-side references they import, and the grader's own sentences
  (:data:`GRADER_SOURCES`: its errors, notes, the due-date cell, ``make check``'s summary). An
  f-string is a *template*: ``f"{name} has shape {actual}, expected {expected}"`` becomes the
  msgid ``{name} has shape {actual}, expected {expected}``, whose translation keeps the same
  ``{placeholders}``. A string is a message when its words read as prose (two words in a row);
  a bare name (``HAND_WEIGHTS``, ``softmax(scores)``) is shown as it is.
* **kept** in ``i18n/<lang>/messages.po`` (gettext, beside the chapters' catalogs), each msgid
  with the files it comes from (``#: source/01_two_keys/two_keys.py``; the listing of what is
  left gives the lines).
  ``python -m instructor translate --lang vi`` adds new messages (untranslated), marks a message
  whose English changed... as new (the old one becomes obsolete, kept), and lists every
  untranslated message with its place; ``--check`` fails on one.
* **matched** at grading time (:class:`course.language.Catalog`, which the student's kernel uses too): a message as the student would read it in
  English (``weights for d_k=9 is off: largest difference 0.2 ...: it matches what you get when the
  scores are not divided by sqrt(d_k)``) is parsed into the templates it was made of (the check's
  sentence, the test's name for the value, the hint), each translated, the values in between
  (numbers, shapes, the student's own error) kept. Of the possible parses the one that covers
  most English text wins; text no template covers stays as it is.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import polib
from nboracle.classroom import pipeline as P

from course.language import JOINS, PLACEHOLDER, Catalog, catalog_file, placeholders
from instructor.repository import REPO, REPOSITORY
from instructor.translate import new_catalog, read_catalog, render_catalog, status_line

CATALOG_NAME = "messages.po"
PROSE = re.compile(r"[A-Za-z]{2,}[,:;]? [A-Za-z(]{2,}")  # two words in a row: a sentence, not a name
WORD = re.compile(r"(?:^|[\s(])(?!(?:release|source|autograded|feedback)$)[a-z]{3,}(?:[ :,]|$)")
"""A sentence of the grader's own: a word (not one of the course root's folder names it also passes around)."""
COURSE_MODULES = ("course/checks.py", "course/quiz.py")  # every chapter's tests use them
HIDDEN = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")  # nbgrader's markers of a test cell's hidden part
# The grader's own sentences a student reads: (file, the functions or constants whose strings count;
# "raise": every raised message of the file).
GRADER_SOURCES = {
    "nbgrader-oracle/nboracle/grader/oracle.py": ("raise", "RAISED_AT", "RAISED_ADVICE"),
    "nbgrader-oracle/nboracle/grader/memory.py": ("MESSAGE", "message", "_memory_failure"),
    "nbgrader-oracle/nboracle/grader/nbgrader_ext.py": ("DUE_TEXT", "DUE_WORDS", "SKIPPED_DEMO", "_cut"),
    "nbgrader-oracle/nboracle/classroom/selfcheck.py": ("explain", "score_lines", "self_check"),
    "instructor/__main__.py": ("check_workspace", "cmd_check", "_check"),
    "course/checks.py": ("_raised",),  # "block(x) raised RuntimeError (...)": one word between two values
    "course/plots.py": ("WEIGHT",),  # the word of plot_attention's colour bar
}
# nbgrader's own words in its Assignment List (a button's one word counts): the course's Lab extension
# shows them in the course's language (nbgrader_ext.PANEL_WORDS)
EVERY_STRING = {"nbgrader-oracle/nboracle/grader/nbgrader_ext.py": ("PANEL_WORDS",)}
ANY_WORD = re.compile(r"[A-Za-z]{2,}")
# The review reasons `make check` shows a student ("would be flagged for review: cell 4 (softmax): uses ..."):
# the static scan's sentences, a template per finding (nboracle.grader.scan) and the values it names
# (a dict's values: its keys are names). A string counts when a word goes on (``uses {what}``,
# ``the network``), not a name or a bare verb the code switches on.
REVIEW_SOURCES = {
    "nbgrader-oracle/nboracle/grader/scan.py": (
        "MACHINERY", "_DYNAMIC", "NAMES", "ATTRS", "MODULES", "LIBRARY_FINDING", "IN_HELPER", "LIBRARY_REASON",
        "DYNAMIC_REASON", "ALLOWED_REASON", "ALLOWED_REASON_IN", "UNLISTED", "student_cells", "_magics",
        "_other_uses", "scan_source", "scan_notebook", "locked_rebindings", "_library_uses", "_unlisted_calls",
        "refusals"),
}
FINDING = re.compile(r"(?:^|[\s(])[a-z]{3,} (?!up$|on$)")
"""A review reason's sentence: a word that goes on (not ``looks up``, ``builds on``: the verbs the code switches on)."""
HEADER = """\
{lang} translation of the course's feedback: every message a test shows, and the grader's own.
msgid is the English message, a template where the code formats it: keep every {{placeholder}} in
the translation (a number, a shape, a name the code fills in). `python -m instructor translate`
adds new messages from the code (docs/TRANSLATING.md, "Feedback"); each #: line says where one is."""


# ---------------------------------------------------------------- extraction


@dataclass
class Message:
    msgid: str
    places: list[str] = field(default_factory=list)  # "path:line"


def _template(node: ast.AST, raw: bool = False) -> str | None:
    """The msgid of a string or f-string node (``{expr}`` for each formatted value), else None.

    ``raw``: a plain string is a ``str.format`` template already (the due-date cell's)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value if raw else node.value.replace("{", "{{").replace("}", "}}")
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(str(part.value).replace("{", "{{").replace("}", "}}"))
            elif isinstance(part, ast.FormattedValue):
                expr = ast.unparse(part.value)
                conv = f"!{chr(part.conversion)}" if part.conversion not in (-1, None) else ""
                spec = f":{_template(part.format_spec)}" if part.format_spec is not None else ""
                out.append("{" + expr + conv + spec + "}")
        return "".join(out)
    return None


def _literal_text(template: str) -> str:
    return PLACEHOLDER.sub(" ", template.replace("{{", "").replace("}}", ""))


def is_message(template: str) -> bool:
    """A string a student reads as words (not a name, a format or a path)."""
    return bool(PROSE.search(_literal_text(template)))


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, (ast.Constant, ast.JoinedStr)):
                out.add(id(first.value))
    return out


def _strings(tree: ast.AST, raw: bool = False):
    """Every (line, template) of the outermost string and f-string nodes, docstrings and imports aside."""
    skip = _docstrings(tree)
    inner: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            inner.update(id(n) for n in ast.walk(node) if n is not node)
    for node in ast.walk(tree):
        if id(node) in skip or id(node) in inner:
            continue
        template = _template(node, raw)
        if template is not None:
            yield node.lineno, template


def _in(tree: ast.AST, names: tuple[str, ...]):
    """The nodes of ``tree`` whose strings count: raised messages, and the named functions or constants."""
    for node in ast.walk(tree):
        if "raise" in names and isinstance(node, ast.Raise) and node.exc is not None:
            yield node.exc
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
            yield node
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in names for t in node.targets):
            yield node.value


def _test_cells(assignment: str, visible: bool = False):
    """(first line in the .py, source) of every graded test cell of the chapter (visible and hidden parts).

    ``visible``: the hidden tests' lines blanked out (the lines keep their numbers), what a student's
    notebook holds of the cell."""
    py = REPOSITORY.folder("source", assignment) / f"{REPOSITORY.notebook_name(assignment)}.py"
    lines = py.read_text().splitlines()
    for cell in P.read_nb(REPOSITORY.notebook("source", assignment)).cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
            continue
        marker = f'"grade_id": "{meta["grade_id"]}"'
        start = next((i + 1 for i, line in enumerate(lines) if line.startswith("# %%") and marker in line), 0)
        yield py, start, _visible(cell.source) if visible else cell.source


def _visible(source: str) -> str:
    """``source`` with every line of its hidden tests (nbgrader's markers included) left empty."""
    out, hidden = [], False
    for line in source.splitlines():
        if line.strip() == HIDDEN[0]:
            hidden = True
        out.append("" if hidden else line)
        if line.strip() == HIDDEN[1]:
            hidden = False
    return "\n".join(out)


def _modules_used(assignment: str) -> list[Path]:
    """The course's and the grader-side references' modules a chapter's notebook imports."""
    tree = ast.parse(_ipython_free(P.read_nb(REPOSITORY.notebook("source", assignment))))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("course", "instructor"):
            path = REPO / (node.module.replace(".", "/") + ".py")
            if path.is_file() and path not in out:
                out.append(path)
    return out


def _ipython_free(nb) -> str:
    return "\n".join("\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
                     for cell in nb.cells if cell.cell_type == "code")


def extract(assignments: list[str]) -> list[Message]:
    """Every message a student of ``assignments`` can read, each with where it comes from, in a stable order."""
    return _extract(assignments, kernel=False)


def kernel_messages(assignments: list[str]) -> list[Message]:
    """The messages a student's own kernel raises in ``assignments`` (the kernel's catalog, :func:`kernel_pairs`)."""
    return _extract(assignments, kernel=True)


def _extract(assignments: list[str], kernel: bool) -> list[Message]:
    """Every message a student of ``assignments`` can read, each with where it comes from, in a stable order.

    ``kernel``: only those a student's own kernel raises, from what the student already has: the
    modules of ``course/`` and the visible part of the test cells (never a hidden test, a
    grader-side reference or the grader's own sentences): the kernel's catalog (:func:`kernel_pairs`)."""
    found: dict[str, Message] = {}

    def add(template: str, path: Path, line: int, words: re.Pattern = PROSE) -> None:
        if not words.search(_literal_text(template)):
            return
        place = f"{path.relative_to(REPO)}:{line}"
        entry = found.setdefault(template, Message(template))
        if place not in entry.places:
            entry.places.append(place)

    shipped = REPO / "course"
    modules = [REPO / m for m in COURSE_MODULES]
    for assignment in assignments:
        for py, start, source in _test_cells(assignment, visible=kernel):
            tree = ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith("%")))
            for line, template in _strings(tree):
                add(template, py, start + line)
        modules += [m for m in _modules_used(assignment) if m not in modules and m.name not in ("plots.py", "diagrams.py")
                    and (not kernel or m.is_relative_to(shipped))]
    for path in modules:
        for line, template in _strings(ast.parse(path.read_text())):
            add(template, path, line)
    for sources, words in ((GRADER_SOURCES, WORD), ({} if kernel else REVIEW_SOURCES, FINDING),
                           ({} if kernel else EVERY_STRING, ANY_WORD)):
        for rel, names in sources.items():
            path = REPO / rel
            if kernel and not path.is_relative_to(shipped):
                continue
            for node in _in(ast.parse(path.read_text()), names):
                for part in node.values if isinstance(node, ast.Dict) else [node]:  # a table's keys are names
                    for line, template in _strings(part, raw=isinstance(part, ast.Constant)):  # a template constant
                        add(template, path, line, words)  # the grader's chosen sentences: every one with a word
    return list(found.values())


# ---------------------------------------------------------------- the catalog file


def catalog_path(lang: str) -> Path:
    return REPO / "i18n" / lang / CATALOG_NAME


def kernel_path(lang: str) -> Path:
    """The kernel's catalog of ``lang``, in the ``course`` package (:mod:`course.language`)."""
    return catalog_file(lang)


def shown(path: Path) -> str:
    """``path`` as a message says it: from the repository's root when it is in it."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def read(lang: str) -> polib.POFile | None:
    return read_catalog(catalog_path(lang))


render = render_catalog


def updated(lang: str, assignments: list[str], names: dict[str, str]) -> polib.POFile:
    """The messages catalog brought up to date with the code (nothing written); names: {lang: its name}."""
    old = read(lang)
    by_id = {e.msgid: e for e in old if not e.obsolete} if old else {}
    catalog = new_catalog(old, HEADER.format(lang=names.get(lang, lang)), lang, "attention-transformers feedback")
    catalog.places = {}  # {msgid: ["path:line", ...]}, from the code as it is now
    for message in extract(assignments):
        was = by_id.pop(message.msgid, None)
        # the files only: a line number would make the catalog stale at every edit above a message
        # (the listing of what is left gives the lines, read from the code now)
        files = list(dict.fromkeys(place.rsplit(":", 1)[0] for place in message.places))
        entry = polib.POEntry(msgid=message.msgid, msgstr=was.msgstr if was else "",
                              occurrences=[(file, "") for file in files])
        catalog.places[message.msgid] = message.places
        if was is not None:
            entry.flags, entry.tcomment = list(was.flags), was.tcomment
        if PLACEHOLDER.search(message.msgid.replace("{{", "").replace("}}", "")) and "python-brace-format" not in entry.flags:
            entry.flags.append("python-brace-format")
        catalog.append(entry)
    for entry in [*(e for e in old if e.obsolete and e.msgid not in by_id), *by_id.values()] if old else []:
        if entry.msgstr and entry.msgid not in {e.msgid for e in catalog}:
            entry.obsolete, entry.occurrences = True, []  # gone from the code: kept for a message that comes back
            catalog.append(entry)
    return catalog


@dataclass
class MessagesStatus:
    total: int
    untranslated: list[polib.POEntry]
    fuzzy: list[polib.POEntry]
    bad: list[str]  # a translation whose placeholders differ, or not in NFC
    stale: bool
    places: dict[str, list[str]]  # {msgid: ["path:line", ...]}
    kernel_stale: bool = False  # the kernel's catalog (course/data/messages-<lang>.json) differs from the PO file's
    kernel_file: Path | None = None

    @property
    def complete(self) -> bool:
        return not (self.untranslated or self.fuzzy or self.bad)

    def line(self) -> str:
        return status_line(self.total, len(self.untranslated), len(self.fuzzy),
                           f"{len(self.bad)} that cannot be used (listed below)" if self.bad else "",
                           "; ".join(["catalog out of date with the code"] * self.stale
                                     + [f"{shown(self.kernel_file)} out of date"] * self.kernel_stale))

    def listing(self) -> list[str]:
        """One line per message left to translate: where it comes from, then its English."""
        out = []
        for entry in self.untranslated + self.fuzzy:
            places = self.places.get(entry.msgid) or [path for path, _ in entry.occurrences]
            where = ", ".join(places[:3])
            more = f" (+{len(places) - 3} more)" if len(places) > 3 else ""
            flag = "fuzzy: " if entry in self.fuzzy else ""
            out.append(f"{where}{more}: {flag}{entry.msgid!r}")
        return out + self.bad


def nested(msgid: str) -> bool:
    """True when a placeholder of ``msgid`` holds braces (``{', '.join(f'{a}' for a in x)}``): unmatchable."""
    return any(c in part for part in PLACEHOLDER.split(msgid.replace("{{", "").replace("}}", "")) for c in "{}")


def status(lang: str, assignments: list[str], names: dict[str, str], catalog: polib.POFile | None = None,
           kernel_data: bytes | None = None) -> MessagesStatus:
    """How ``i18n/<lang>/messages.po`` and the kernel's catalog stand (``catalog``, ``kernel_data``: as just
    computed from the code, else computed here)."""
    fresh = catalog if catalog is not None else updated(lang, assignments, names)
    path = catalog_path(lang)
    current = [e for e in fresh if not e.obsolete]
    # a translation may leave a placeholder out (an English plural's "s"), never bring one the English lacks
    bad = [f"{shown(catalog_path(lang))}: the translation of {e.msgid!r} has placeholders "
           f"{sorted(set(placeholders(e.msgstr)) - set(placeholders(e.msgid)))} the English does not have"
           for e in current if e.msgstr and not set(placeholders(e.msgstr)) <= set(placeholders(e.msgid))]
    places = getattr(fresh, "places", {})
    kernel = kernel_path(lang)
    bad += [f"{(places.get(e.msgid) or ['?'])[0]}: the message {e.msgid!r} has a placeholder holding "
            "braces (a nested f-string), which no translation can match: compute that value in a variable first"
            for e in current if nested(e.msgid)]
    bad += [f"{shown(catalog_path(lang))}: the translation of {e.msgid!r} is not in Unicode NFC"
            for e in current if not unicodedata.is_normalized("NFC", e.msgstr)]
    return MessagesStatus(len(current), [e for e in current if not e.msgstr],
                          [e for e in current if e.msgstr and e.fuzzy], bad,
                          stale=not path.is_file() or path.read_bytes() != render(fresh), places=places,
                          kernel_stale=not kernel.is_file() or kernel.read_bytes() != (
                              kernel_data or kernel_bytes(kernel_pairs(fresh, assignments))), kernel_file=kernel)


def update(lang: str, assignments: list[str], names: dict[str, str]) -> MessagesStatus:
    catalog = updated(lang, assignments, names)
    path, data = catalog_path(lang), render(catalog)
    if not path.is_file() or path.read_bytes() != data:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    kernel, data = kernel_path(lang), kernel_bytes(kernel_pairs(catalog, assignments))
    if not kernel.is_file() or kernel.read_bytes() != data:
        kernel.write_bytes(data)
    return status(lang, assignments, names, catalog, data)


def translated(po: polib.POFile | None) -> dict[str, str]:
    """{msgid: its translation} of a catalog: translated, neither fuzzy nor obsolete (NFC)."""
    return {e.msgid: unicodedata.normalize("NFC", e.msgstr) for e in (po or []) if e.msgstr and not e.obsolete
            and not e.fuzzy}


@functools.lru_cache(maxsize=8)
def catalog(lang: str, review: bool = False) -> Catalog:
    """The translated messages of ``lang`` (fuzzy ones aside), with the code's joining templates.

    The review reasons' sentences (:data:`REVIEW_SOURCES`) only with ``review``: several are short and
    general (``{exercise} uses {hit}``) and would turn a word of any English text they meet (``F.cross_entropy
    uses the natural log``, a student's own error) into a half-translated sentence."""
    po = read(lang)
    pairs = translated(po)
    if not review:
        scan = set(REVIEW_SOURCES)
        for entry in po or []:
            if entry.occurrences and {path for path, _ in entry.occurrences} <= scan:
                pairs.pop(entry.msgid, None)
    for join in JOINS:
        pairs.setdefault(join, join)
    return Catalog(pairs)


def kernel_pairs(po: polib.POFile | None, assignments: list[str]) -> dict[str, str]:
    """The kernel's catalog: the translations of the messages a student's own kernel raises in ``assignments``
    (:func:`kernel_messages`: ``course/`` and the test cells' visible parts), nothing of a hidden test."""
    pairs = translated(po)
    return {m.msgid: pairs[m.msgid] for m in kernel_messages(assignments) if m.msgid in pairs}


def kernel_bytes(pairs: dict[str, str]) -> bytes:
    """The kernel catalog's file: JSON, one message a line, sorted (a diff shows what changed)."""
    return (json.dumps(dict(sorted(pairs.items())), ensure_ascii=False, indent=0) + "\n").encode()


REVIEW_LINE = "would be flagged for review: "
"""How the self-check prints a review reason (nboracle.classroom.selfcheck): such a line is translated with the
review reasons' sentences too (:func:`catalog`), every other message without them."""


def translator(lang: str):
    """``nboracle.grader.messages``'s hook (``c.MessageCatalog.catalog = "instructor.messages:translator"``)."""
    feedback, review = catalog(lang), catalog(lang, review=True)
    return lambda text: (review if text.startswith(REVIEW_LINE) else feedback).translate(text)
