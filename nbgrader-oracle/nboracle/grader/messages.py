"""Feedback in the student's language: an optional message catalog, applied on the grader's side.

nboracle knows no language and holds no translation. A course that has one names a function and
a language in its nbgrader config::

    c.MessageCatalog.catalog = "mycourse.messages:translator"   # translator(language) -> translate
    c.MessageCatalog.language = "vi"                             # this course root's language

``translate(text) -> text`` gets a message exactly as the grader would show it in English (a
test's error, a note of the grader's, a template of its own such as the due-date cell's, before
it is formatted) and returns it in the course's language, or unchanged when it knows no
translation. Without both settings nothing is translated and nothing is imported.

The language is the course root's configuration, never the notebook's word or the kernel's: a
handed-in notebook cannot choose it, and the translation runs after the tests have scored, on
text the grader already wrote, so it changes no score. :class:`~nboracle.grader.nbgrader_ext.TranslateMessages` (last but
one in autograde, before the review flags) translates every error output and the outputs of the
course's own (locked) cells; the English text of a translated error stays in the cell's metadata
(``nbgrader_oracle.untranslated``) for the instructor's tools (a class report matches messages
in English). :class:`~nboracle.grader.nbgrader_ext.DueDateCell` and the self-check's summary
(``nboracle.classroom.selfcheck``) translate their own sentences with the same function.
"""

from __future__ import annotations

import importlib
import re
from typing import Callable

from traitlets import Unicode
from traitlets.config import Configurable

NOTEBOOK_METADATA = "nbgrader_oracle"
UNTRANSLATED = "untranslated"  # cell metadata: {"<ename>": "<the English evalue>"} of a translated error
_LANGUAGE = re.compile(r"[A-Za-z]{2,3}([_-][A-Za-z0-9]{2,8})?")
_CATALOG = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")

Translate = Callable[[str], str]


def untranslated(text: str) -> str:
    return text


class MessageCatalog(Configurable):
    """Which function translates this course's messages, and into which language (both optional)."""

    catalog = Unicode("", help="'module:function', function(language) -> translate(text) -> text; "
                      "'' : messages stay in English").tag(config=True)
    language = Unicode("", help="the language of this course root's feedback (a code such as 'vi'); "
                       "'' : English").tag(config=True)


def translator(config=None, parent=None) -> Translate:
    """The course's ``translate`` for its configured language, or the identity.

    A catalog that fails on a message leaves that message in English: a translation never
    costs a student their feedback."""
    settings = MessageCatalog(config=config) if parent is None else MessageCatalog(parent=parent)
    if not settings.catalog or not settings.language:
        return untranslated
    if not _CATALOG.fullmatch(settings.catalog):
        raise ValueError(f"MessageCatalog.catalog must be 'module:function', not {settings.catalog!r}")
    if not _LANGUAGE.fullmatch(settings.language):
        raise ValueError(f"MessageCatalog.language must be a language code such as 'vi', not {settings.language!r}")
    module, _, name = settings.catalog.partition(":")
    translate = getattr(importlib.import_module(module), name)(settings.language)

    def safe(text: str) -> str:
        if not isinstance(text, str) or not text:
            return text
        try:
            said = translate(text)
        except Exception:  # noqa: BLE001 (a broken catalog entry must not lose the message)
            return text
        return said if isinstance(said, str) else text

    return safe


def _text(value) -> str:
    return value if isinstance(value, str) else "".join(value)


def translate_cell(cell, translate: Translate) -> None:
    """Translate a code cell's error outputs, and every output of a cell the course wrote (locked)."""
    if cell.get("cell_type") != "code":
        return
    meta = cell.get("metadata", {}).get("nbgrader", {})
    courses_cell = bool(meta.get("locked")) and not meta.get("solution")
    kept = {}
    for output in cell.get("outputs", []):
        kind = output.get("output_type")
        if kind == "error":
            ename, evalue = output.get("ename", ""), output.get("evalue", "")
            said = translate(evalue)
            if said == evalue:
                continue
            kept[ename] = evalue
            output["evalue"] = said
            output["traceback"] = [f"{ename}: {said}" if line == f"{ename}: {evalue}" else line.replace(evalue, said)
                                   for line in output.get("traceback", [])]
        elif kind == "stream" and courses_cell:
            output["text"] = "\n".join(translate(line) for line in _text(output.get("text", "")).split("\n"))
    if kept:
        cell.setdefault("metadata", {}).setdefault(NOTEBOOK_METADATA, {})[UNTRANSLATED] = kept


def original_error(cell) -> str:
    """``ename: evalue`` of a code cell's error as the tests raised it (in English), or ``""``."""
    kept = cell.get("metadata", {}).get(NOTEBOOK_METADATA, {}).get(UNTRANSLATED, {})
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            ename = output.get("ename", "")
            evalue = kept.get(ename) if isinstance(kept, dict) and isinstance(kept.get(ename), str) else None
            return f"{ename}: {evalue if evalue is not None else output.get('evalue', '')}"
    return ""
