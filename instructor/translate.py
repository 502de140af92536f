"""``python -m instructor translate``: the course's other language editions, from one English source.

English stays the one source: ``source/<chapter>/<nb>.py`` (and its ``.ipynb``) hold the code,
the tests and the points. A translation holds prose only, in gettext catalogs beside the source,
``i18n/<lang>/<chapter>.po``: one message per markdown cell, its ``msgctxt`` the cell's id, its
``msgid`` the English cell, its ``msgstr`` the translation. Translators open them with any PO
editor (Poedit, Lokalize, Weblate).

An edition is an nbgrader course of its own, ``editions/<lang>/`` (docs/TRANSLATING.md)::

    editions/<lang>/nbgrader_config.py          the English course's config, with its own course id
    editions/<lang>/source/<chapter>/<nb>.ipynb  generated here, git-ignored: solutions and hidden tests
    editions/<lang>/release/<chapter>/<nb>.ipynb what its students get (nbgrader, committed)

The generated source is the English notebook, cell for cell (same ids, metadata, code, grade ids,
points), with each markdown cell's text replaced by its translation, and in each demo cell (no
nbgrader metadata) the strings it prints or draws replaced by theirs (:mod:`instructor.printed`;
msgctxt ``<cell id>:code``, in the same catalog), and every occurrence of a label of the notebook (a
string shown and also kept or looked up: msgctxt ``<notebook>:label``) replaced by its; a graded,
solution or locked cell's code is the English one byte for byte. Only the chapters of
:data:`EDITIONS` are published; the catalogs of every other chapter are kept up to date so that
translators can start on them.

``translate`` (a) brings every catalog up to date with the English source: a changed English cell
keeps its translation marked fuzzy (the old English is kept as ``#| msgid``), a new cell is
untranslated, a removed cell's message becomes obsolete (``#~``, never deleted); (b) generates the
published chapters' source and releases them with nbgrader; (c) reports untranslated and fuzzy
messages per chapter. ``translate --check`` changes nothing and fails when a catalog is stale, a
published chapter has an untranslated or fuzzy message, or the generated release is not current.
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import nbformat
import polib
from nboracle.classroom import pipeline as P
from nboracle.classroom.course_root import CourseRoot

from instructor import feedback_page, printed  # feedback_page: nbgrader's page in the edition's language
from instructor.repository import REPO, REPOSITORY

I18N = REPO / "i18n"
EDITIONS_DIR = REPO / "editions"
EDITIONS: dict[str, list[str]] = {
    # The chapters each edition publishes: every markdown cell translated and reviewed, and every
    # feedback message their students can read (i18n/<lang>/messages.po). The suite
    # (tests/test_vietnamese_edition.py, test_vietnamese_feedback.py) fails for any untranslated or fuzzy one.
    "vi": ["01_two_keys", "02_scaling", "03_masks", "04_encoder_block", "05_positional_encoding",
           "06_multihead_attention", "07_seq2seq_beam_search", "08_attention_cost", "09_decoder",
           "10_tiny_gpt", "11_modern_decoder"],
}
METADATA_KEY = "course_edition"
"""Notebook metadata naming the edition a generated notebook belongs to (``make check`` reads it)."""
LANGUAGE_NAMES = {"vi": "Vietnamese"}


HEADER = """\
{lang} translation of the course's chapter {assignment}: its markdown cells.
One message per markdown cell of source/{assignment}/; msgctxt is the cell's id, msgid its English
text. `python -m instructor translate` updates this file from the English source (a changed cell
becomes fuzzy, its old English kept as #| msgid) and says what is left (docs/TRANSLATING.md)."""


def edition_root(lang: str) -> CourseRoot:
    """The edition's course root, ``editions/<lang>/``."""
    if lang not in EDITIONS:
        raise P.PipelineError(f"no edition {lang!r}; known: {', '.join(EDITIONS)}")
    return CourseRoot(EDITIONS_DIR / lang, release_command=f"python -m instructor translate --lang {lang}")


def catalog_path(lang: str, assignment: str) -> Path:
    return I18N / lang / f"{assignment}.po"


# ---------------------------------------------------------------- catalogs


def read_catalog(path: Path) -> polib.POFile | None:
    if not path.is_file():
        return None
    try:
        return polib.pofile(str(path), wrapwidth=0, encoding="utf-8")
    except (OSError, ValueError) as err:
        raise P.PipelineError(f"{path} is not a readable PO file: {err}") from None


def render_catalog(catalog: polib.POFile) -> bytes:
    # no wrapping: a markdown cell's lines stay lines, one per "..." string
    return (str(catalog) + "\n").encode("utf-8")


def new_catalog(old: polib.POFile | None, header: str, lang: str, project: str) -> polib.POFile:
    """An empty catalog with ``header`` and ``old``'s metadata (or a new catalog's)."""
    catalog = polib.POFile(wrapwidth=0, encoding="utf-8")
    catalog.header = header
    catalog.metadata = dict(old.metadata) if old else {
        "Project-Id-Version": project,
        "Language": lang,
        "MIME-Version": "1.0",
        "Content-Type": "text/plain; charset=UTF-8",
        "Content-Transfer-Encoding": "8bit",
    }
    return catalog


def code_context(entry: polib.POEntry) -> bool:
    """A string a demo cell prints or draws (msgctxt ``<cell id>:code``), not a markdown cell."""
    return bool(entry.msgctxt) and entry.msgctxt.endswith(printed.CONTEXT)


def label_context(entry: polib.POEntry) -> bool:
    """A label of a notebook (msgctxt ``<notebook>:label``): translated wherever its demo cells write it."""
    return bool(entry.msgctxt) and entry.msgctxt.endswith(printed.LABEL_CONTEXT)


def _carried(entry: polib.POEntry, was: polib.POEntry | None) -> polib.POEntry:
    """``entry`` (the English now) with ``was``'s translation; fuzzy when the English changed."""
    if was is not None:
        entry.msgstr, entry.flags = was.msgstr, list(was.flags)
        entry.previous_msgid = was.previous_msgid
        entry.tcomment = was.tcomment  # the translator's own notes
        if was.msgid != entry.msgid:  # the English changed: its translation needs a review
            if "fuzzy" not in entry.flags:
                entry.flags.append("fuzzy")
            entry.previous_msgid = entry.previous_msgid or was.msgid
    if "fuzzy" not in entry.flags:
        entry.previous_msgid = None
    return entry


def _code_entries(assignment: str, cell, old: dict[str, polib.POEntry], labels=()) -> list[polib.POEntry]:
    """One message per string a demo cell prints or draws. A string whose English is unchanged keeps its
    translation; the others take, in order, the translations of the cell's strings that are gone, fuzzy."""
    english = printed.templates(cell.source, labels)
    unmatched = [msgid for msgid in old if msgid not in english]
    out = []
    for msgid in english:
        was = old.pop(msgid, None)
        if was is None and unmatched:
            was = old.pop(unmatched.pop(0))
        out.append(_carried(polib.POEntry(msgctxt=cell.id + printed.CONTEXT, msgid=msgid, msgstr="",
                                          comment=f"{assignment}: printed or drawn by code cell {cell.id}"), was))
    return out


def updated_catalog(lang: str, assignment: str) -> polib.POFile:
    """The catalog of ``assignment`` brought up to date with the English source (nothing written)."""
    nb = P.read_nb(REPOSITORY.notebook("source", assignment))
    old = read_catalog(catalog_path(lang, assignment))
    by_cell = {e.msgctxt: e for e in old if e.msgctxt and not e.obsolete and not code_context(e)
               and not label_context(e)} if old else {}
    by_code: dict[str, dict[str, polib.POEntry]] = {}
    for entry in old or []:
        if code_context(entry) and not entry.obsolete:
            by_code.setdefault(entry.msgctxt, {})[entry.msgid] = entry
    catalog = new_catalog(old, HEADER.format(lang=LANGUAGE_NAMES.get(lang, lang), assignment=assignment),
                          lang, f"attention-transformers {assignment}")
    demo = [cell for cell in nb.cells if printed.is_demo(cell)]
    labels = printed.find_labels([cell.source for cell in demo])
    label_ctxt = REPOSITORY.notebook_name(assignment) + printed.LABEL_CONTEXT
    old_labels = {e.msgid: e for e in old or [] if label_context(e) and not e.obsolete and e.msgctxt == label_ctxt}
    shown_before = {e.msgid: e for e in old or [] if code_context(e) and not e.obsolete}  # a string now a label
    first = {}  # the labels each demo cell is the first to hold
    for label, cells in labels.items():
        first.setdefault(demo[cells[0]].id, []).append(label)
    for cell in nb.cells:
        if cell.cell_type == "markdown" or printed.is_demo(cell):
            if not cell.get("id"):
                raise P.PipelineError(f"{assignment}: a cell has no id (nbformat 4.5 cell ids are needed)")
        if cell.cell_type == "markdown":
            catalog.append(_carried(polib.POEntry(msgctxt=cell.id, msgid=cell.source, msgstr="",
                                                  comment=f"{assignment}: markdown cell {cell.id}"),
                                    by_cell.pop(cell.id, None)))
        elif printed.is_demo(cell):
            catalog += _code_entries(assignment, cell, by_code.get(cell.id + printed.CONTEXT, {}), labels)
            for label in first.get(cell.id, []):
                where = ", ".join(demo[at].id for at in labels[label])
                was = old_labels.pop(label, None)
                if was is None and label in shown_before:  # it was translated where one cell showed it
                    was = copy.copy(shown_before[label])
                    was.tcomment = ""
                catalog.append(_carried(polib.POEntry(
                    msgctxt=label_ctxt, msgid=label, msgstr="",
                    comment=f"{assignment}: a label the code shows and also keeps or looks up: the same in code cells {where}"),
                    was))
    gone_labels = list(old_labels.values())
    kept = {(e.msgctxt, e.msgid if code_context(e) or label_context(e) else None) for e in catalog}
    gone = [e for entries in by_code.values() for e in entries.values()]  # what _code_entries left
    for entry in [*(e for e in old if e.obsolete), *by_cell.values(), *gone, *gone_labels] if old else []:
        if (entry.msgctxt, entry.msgid if code_context(entry) or label_context(entry) else None) in kept:
            continue  # back in the English source: the live message holds the translation
        entry.obsolete = True  # cells or strings gone from the English source: obsolete, never deleted
        catalog.append(entry)
    return catalog


def messages(catalog: polib.POFile) -> list[polib.POEntry]:
    return [e for e in catalog if not e.obsolete]


@dataclass
class Status:
    assignment: str
    total: int
    untranslated: list[str]
    fuzzy: list[str]
    not_nfc: list[str]
    stale: bool  # the catalog file differs from what the English source makes of it
    bad: list[str] = ()  # printed strings whose translation changes more than words (printed.problems)

    @property
    def complete(self) -> bool:
        return not (self.untranslated or self.fuzzy or self.not_nfc or self.bad)

    def line(self) -> str:
        problem = ", ".join(part for part in (f"{len(self.not_nfc)} not in Unicode NFC" if self.not_nfc else "",
                                              f"{len(self.bad)} printed string(s) with other placeholders or numbers"
                                              if self.bad else "") if part)
        return status_line(self.total, len(self.untranslated), len(self.fuzzy), problem,
                           "catalog out of date with the English source" if self.stale else "")


def status_line(total: int, untranslated: int, fuzzy: int, problem: str, stale: str) -> str:
    """``12/14 translated, 1 fuzzy (...), 1 untranslated[, problem][, stale]``: a catalog's state in one line."""
    parts = [f"{total - untranslated - fuzzy}/{total} translated"]
    if fuzzy:
        parts.append(f"{fuzzy} fuzzy (the English changed: review them)")
    if untranslated:
        parts.append(f"{untranslated} untranslated")
    return ", ".join(parts + [part for part in (problem, stale) if part])


def status(lang: str, assignment: str, catalog: polib.POFile | None = None) -> Status:
    fresh = catalog if catalog is not None else updated_catalog(lang, assignment)
    path = catalog_path(lang, assignment)
    stale = not path.is_file() or path.read_bytes() != render_catalog(fresh)
    current = messages(fresh)
    refused = label_problems(assignment, current)
    return Status(assignment, len(current),
                  untranslated=[label(e) for e in current if not e.msgstr],
                  fuzzy=[label(e) for e in current if e.msgstr and e.fuzzy],
                  not_nfc=[label(e) for e in current if not unicodedata.is_normalized("NFC", e.msgstr)],
                  stale=stale,
                  bad=[f"{label(e)}: {problem}" for e in current if e.msgstr and (code_context(e) or label_context(e))
                       for problem in printed.problems(e.msgid, e.msgstr) + refused.get(e.msgid, [])])


def label_problems(assignment: str, current: list[polib.POEntry]) -> dict[str, list[str]]:
    """Why each translated label of ``assignment`` cannot rename it (printed.label_problems)."""
    translations = {e.msgid: unicodedata.normalize("NFC", e.msgstr) for e in current if label_context(e) and e.msgstr}
    if not translations:
        return {}
    nb = P.read_nb(REPOSITORY.notebook("source", assignment))
    cells = [(cell.get("id", ""), cell.source, printed.is_demo(cell)) for cell in nb.cells if cell.cell_type == "code"]
    return printed.label_problems(cells, translations)


def label(entry: polib.POEntry) -> str:
    """How a message is named in a report: a markdown cell's id, a printed string's cell (or a label's
    notebook) and English."""
    return f"{entry.msgctxt} {entry.msgid!r}" if code_context(entry) or label_context(entry) else entry.msgctxt


def update_catalogs(lang: str, assignments: list[str]) -> dict[str, Status]:
    """Write every catalog that the English source changed; return each chapter's status."""
    out = {}
    for assignment in assignments:
        catalog = updated_catalog(lang, assignment)
        path = catalog_path(lang, assignment)
        data = render_catalog(catalog)
        if not path.is_file() or path.read_bytes() != data:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        out[assignment] = status(lang, assignment, catalog)
    return out


# ---------------------------------------------------------------- the edition's notebooks


def translated_notebook(lang: str, assignment: str) -> nbformat.NotebookNode:
    """The English source notebook with every markdown cell, and every string a demo cell prints or draws,
    in ``lang`` (raises if one is missing); graded, solution and locked cells are the English ones."""
    nb = copy.deepcopy(P.read_nb(REPOSITORY.notebook("source", assignment)))
    current = messages(updated_catalog(lang, assignment))
    by_cell = {e.msgctxt: e for e in current if not code_context(e) and not label_context(e)}
    by_code = {(e.msgctxt, e.msgid): e for e in current if code_context(e)}
    refused = label_problems(assignment, current)
    missing = []

    def usable(entry) -> bool:
        return bool(entry is not None and entry.msgstr and not entry.fuzzy
                    and not ((code_context(entry) or label_context(entry)) and printed.problems(entry.msgid, entry.msgstr))
                    and not (label_context(entry) and refused.get(entry.msgid)))

    label_entries = [e for e in current if label_context(e)]
    missing += [label(e) for e in label_entries if not usable(e)]
    labels = {e.msgid: unicodedata.normalize("NFC", e.msgstr) for e in label_entries}

    for cell in nb.cells:
        if cell.cell_type == "markdown":
            entry = by_cell.get(cell.id)
            if not usable(entry):
                missing.append(cell.id)
                continue
            cell.source = unicodedata.normalize("NFC", entry.msgstr)
        elif printed.is_demo(cell):
            entries = [by_code.get((cell.id + printed.CONTEXT, msgid)) for msgid in printed.templates(cell.source, labels)]
            if not all(usable(e) for e in entries):
                missing += [label(e) for e in entries if not usable(e)]
                continue
            cell.source = printed.rewrite(cell.source, {e.msgid: unicodedata.normalize("NFC", e.msgstr)
                                                        for e in entries}, labels)
    if missing:
        raise P.PipelineError(f"{assignment}: {len(missing)} message(s) not translated to {lang}, "
                              f"fuzzy or refused in i18n/{lang}/{assignment}.po: "
                              f"{', '.join(missing)}")
    nb.metadata.pop("jupytext", None)  # generated, never paired: nobody edits it
    nb.metadata[METADATA_KEY] = lang
    return nb


def notebook_bytes(nb) -> str:
    return nbformat.writes(nb) + "\n"


def write_source(lang: str, dest: CourseRoot, assignment: str) -> Path:
    """Write the edition's source notebook of ``assignment`` under ``dest/source`` (only if it changed).

    A stamp in ``dest/.build/translated/`` records what the notebook was made from (the English source,
    the catalog, the code that translates) and what was written: when neither changed since, the
    notebook is left as it is without being made again (a Vietnamese ``make check`` spent about 3 s
    translating all eleven chapters before each check)."""
    name = REPOSITORY.notebook_name(assignment)
    path = dest.folder("source", assignment) / f"{name}.ipynb"
    stamp = dest.path / ".build" / "translated" / f"{lang}-{assignment}.json"
    made_from = _inputs_digest(lang, assignment)
    if _stamp_holds(stamp, made_from, path):
        return path
    text = notebook_bytes(translated_notebook(lang, assignment))
    if not path.is_file() or path.read_text() != text:
        if path.parent.is_dir():  # one notebook per chapter folder, nothing left from an older layout
            shutil.rmtree(path.parent)
        path.parent.mkdir(parents=True)
        path.write_text(text)
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(json.dumps({"made_from": made_from, "written": _digest(path.read_bytes())}))
    return path


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _inputs_digest(lang: str, assignment: str) -> str:
    """What an edition's notebook is made from: the English source, the chapter's catalog, the code that
    translates it and the libraries that read and write them."""
    parts = [lang, assignment, nbformat.__version__, polib.__version__]
    for path in (REPOSITORY.notebook("source", assignment), catalog_path(lang, assignment),
                 Path(__file__), Path(printed.__file__)):
        parts.append(f"{path}:{_digest(path.read_bytes()) if path.is_file() else 'missing'}")
    return _digest("\n".join(parts).encode())


def _stamp_holds(stamp: Path, made_from: str, path: Path) -> bool:
    """The stamp says the notebook at ``path`` was made from ``made_from``, and it is still what was written."""
    try:
        recorded = json.loads(stamp.read_text())
        return (type(recorded) is dict and recorded.get("made_from") == made_from and path.is_file()
                and recorded.get("written") == _digest(path.read_bytes()))
    except (OSError, ValueError):
        return False


def build_sources(lang: str, dest: CourseRoot | None = None, assignments: list[str] | None = None) -> CourseRoot:
    """Generate the edition's source notebooks (default: in ``editions/<lang>/``); return that root."""
    dest = dest or edition_root(lang)
    for assignment in assignments or EDITIONS[lang]:
        write_source(lang, dest, assignment)
    return dest


def scratch_edition(lang: str, dest: Path, assignments: list[str]) -> CourseRoot:
    """A released scratch course root of the edition at ``dest``: its config, generated source, release."""
    root = edition_root(lang)
    copy_root = CourseRoot(dest, root.release_command)
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(root.config, copy_root.config)
    with open(copy_root.config, "a") as config:
        config.write(f"\n# a scratch course never writes into a class's gradebook\n"
                     f"c.CourseDirectory.db_url = {copy_root.sqlite_url!r}\n")
    build_sources(lang, copy_root, assignments)
    for assignment in assignments:
        copy_root.release(assignment)
    return copy_root


def release(lang: str, assignments: list[str] | None = None) -> list[Path]:
    """Generate the edition's source and ``nbgrader generate_assignment`` it into ``editions/<lang>/release``."""
    root = build_sources(lang, assignments=assignments)
    return [root.release(assignment) for assignment in assignments or EDITIONS[lang]]


def release_is_current(lang: str, assignment: str, fresh: CourseRoot) -> list[str]:
    """What differs between the committed ``editions/<lang>/release/<assignment>`` and ``fresh``'s."""
    new, committed = fresh.folder("release", assignment), edition_root(lang).folder("release", assignment)
    if not committed.is_dir():
        return [f"editions/{lang}/release/{assignment} is missing"]
    files = {p.relative_to(new) for p in new.rglob("*") if p.is_file()}
    have = {p.relative_to(committed) for p in committed.rglob("*") if p.is_file()}
    problems = [f"editions/{lang}/release/{assignment}/{p}: missing" for p in sorted(files - have)]
    problems += [f"editions/{lang}/release/{assignment}/{p}: not generated" for p in sorted(have - files)]
    for rel in sorted(files & have):
        if rel.suffix == ".ipynb" and json.loads((new / rel).read_text()) != json.loads((committed / rel).read_text()):
            problems.append(f"editions/{lang}/release/{assignment}/{rel}: stale")
    return problems


def edition_of(nb) -> str | None:
    """The edition a notebook says it belongs to (``None``: the English one)."""
    lang = nb.get("metadata", {}).get(METADATA_KEY)
    return lang if lang in EDITIONS else None


# ---------------------------------------------------------------- the command


def messages_left(lang: str, assignments: list[str], state) -> list[str]:
    """The lines of ``state`` (a messages status) that concern ``assignments``: their untranslated messages
    (each with its places), and every translation with wrong placeholders."""
    from . import messages as M

    needed = {m.msgid for m in M.extract(assignments)}
    return [line for entry, line in zip(state.untranslated + state.fuzzy, state.listing(), strict=False)
            if entry.msgid in needed] + state.bad


def run_messages(lang: str, check: bool, chapters: list[str], list_all: bool, say) -> list[str]:
    """Update (or check) i18n/<lang>/messages.po from the code; say what is left; return the errors."""
    from . import messages as M

    state = (M.status if check else M.update)(lang, EDITIONS[lang], LANGUAGE_NAMES)
    path = M.shown(M.catalog_path(lang))
    say(f"  {'feedback (' + M.CATALOG_NAME + ')':<26}{state.line()}")
    failures = []
    if check and state.stale:
        failures.append(f"{path} is out of date with the code's messages: run `python -m instructor translate --lang {lang}`")
    if check and state.kernel_stale:
        failures.append(f"{M.shown(state.kernel_file)}, the kernel's catalog (the visible tests' messages in Lab), is "
                        f"out of date with {path}: run `python -m instructor translate --lang {lang}`")
    for line in messages_left(lang, chapters, state):  # a published chapter's students read them all
        failures.append(f"untranslated feedback of a published chapter: {line}")
    if list_all:
        for line in messages_left(lang, chapters, state):
            say(line)
    elif state.untranslated or state.fuzzy:
        say(f"  `python -m instructor translate --lang {lang} --untranslated [chapter]` lists the messages left, "
            f"each with its file and line; translate them in {path}")
    return failures


def run(lang: str, check: bool, assignments: list[str] | None, say=print, untranslated: bool = False) -> int:
    if lang not in EDITIONS:
        raise P.PipelineError(f"no edition {lang!r}; known: {', '.join(EDITIONS)}")
    # default: the published chapters and those with a catalog; naming a chapter starts its catalog
    chapters = ([REPOSITORY.check_assignment(a) for a in assignments] if assignments else
                [a for a in REPOSITORY.assignments() if a in EDITIONS[lang] or catalog_path(lang, a).is_file()])
    statuses = ({a: status(lang, a) for a in chapters} if check else update_catalogs(lang, chapters))
    published = [a for a in chapters if a in EDITIONS[lang]]
    failures = []
    say(f"{LANGUAGE_NAMES.get(lang, lang)} edition (i18n/{lang}/*.po):")
    for assignment, state in statuses.items():
        tag = "published" if assignment in EDITIONS[lang] else "not published"
        say(f"  {assignment:<26}{state.line()}  [{tag}]")
        if check and state.stale:
            failures.append(f"{assignment}: i18n/{lang}/{assignment}.po is out of date: run "
                            f"`python -m instructor translate --lang {lang}`")
        if assignment in EDITIONS[lang] and not state.complete:
            failures.append(f"{assignment} is published in the {lang} edition but "
                            f"{', '.join(state.untranslated + state.fuzzy + state.not_nfc + list(state.bad))} "
                            "need a translation or a review; its release is not regenerated")
    failures += run_messages(lang, check, [a for a in chapters if a in EDITIONS[lang]] or EDITIONS[lang],
                             untranslated, say)
    if check:
        failures += [f"{problem}: run `python -m instructor translate --lang {lang}`"
                     for problem in feedback_page.problems(lang)]
    else:
        try:
            say(f"wrote {feedback_page.write(lang).relative_to(REPO)}/ (the feedback page's words)")
        except (FileNotFoundError, ValueError) as err:
            failures.append(str(err))
    ready = [a for a in published if statuses[a].complete]  # the others keep their committed release
    if ready and check:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            fresh = scratch_edition(lang, Path(tmp) / "edition", ready)
            for assignment in ready:
                failures += [f"{problem}: run `python -m instructor translate --lang {lang}`"
                             for problem in release_is_current(lang, assignment, fresh)]
    elif ready:
        for folder in release(lang, ready):
            say(f"released {folder.relative_to(REPO)}/")
    for failure in failures:
        say(f"error: {failure}")
    if check and not failures:
        say(f"the catalogs and editions/{lang}/release/ are up to date")
    return 1 if failures else 0
