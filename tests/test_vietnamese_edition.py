"""The Vietnamese edition (docs/TRANSLATING.md): one English source, two nbgrader courses.

For every chapter the edition publishes (``instructor.translate.EDITIONS["vi"]``): every markdown
cell, and every string a demo cell prints or draws, is translated, reviewed (no fuzzy message) and
in Unicode NFC; the code of every graded, solution and locked cell is the English edition's byte
for byte, a demo cell's differs only in the words of what it prints (the same placeholders, the
same numbers, the same code around them); the grade ids, points and cell metadata are the English
edition's; the committed
``editions/vi/release`` is what nbgrader generates now. Chapter 01 graded through the real pipeline
in both editions: tests/test_vietnamese_feedback.py.
Every chapter of the course is in that list: a new chapter arrives in both editions.
"""

from __future__ import annotations

import json
import re
import shutil
import unicodedata

import nbformat
import pytest
from nbclient import NotebookClient
from nboracle.classroom import pipeline as P
from nboracle.classroom.course_root import CourseRoot
from nboracle.grader.sandbox import SandboxedKernelManager
from support import SOLUTION, STUB, automatic_points, hidden_lines, solution_lines, source_nb, trusted_kernels

from instructor import printed
from instructor import translate as TR
from instructor import workspace as W
from instructor.repository import REPO, REPOSITORY

LANG = "vi"
CHAPTERS = TR.EDITIONS[LANG]
GRADED = "01_two_keys"


def _ids(assignment):  # "vi-01_two_keys": not an assignment scope, the whole file runs on one worker
    return f"{LANG}-{assignment}"


@pytest.fixture(scope="module")
def edition(tmp_path_factory) -> CourseRoot:
    """The edition generated now from source/ and i18n/vi/, released by nbgrader, in a scratch root."""
    return TR.scratch_edition(LANG, tmp_path_factory.mktemp("edition") / "vi", CHAPTERS)


def _nbgrader(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _labels(assignment) -> dict[str, str]:
    """The labels of a chapter, with their translations (the catalog's)."""
    return {e.msgid: e.msgstr for e in TR.messages(TR.read_catalog(TR.catalog_path(LANG, assignment)))
            if TR.label_context(e)}


# ---------------------------------------------------------------- the catalogs


def test_every_chapter_of_the_course_is_published_in_vietnamese():
    """A new chapter arrives in both editions: every assignment of source/ is in EDITIONS["vi"]."""
    missing = [a for a in REPOSITORY.assignments() if a not in CHAPTERS]
    assert not missing, (
        f"{', '.join(missing)} has no Vietnamese edition: run `python -m instructor translate <chapter>`, "
        f"translate i18n/{LANG}/<chapter>.po and its feedback in i18n/{LANG}/messages.po, add it to "
        f"EDITIONS[{LANG!r}] in instructor/translate.py (docs/TRANSLATING.md, \"Publishing a new chapter\")")


@pytest.mark.parametrize("assignment", CHAPTERS, ids=_ids)
def test_every_markdown_cell_is_translated_in_nfc(assignment):
    state = TR.status(LANG, assignment)
    where = f"i18n/{LANG}/{assignment}.po"
    assert not state.stale, f"{where} is out of date with source/{assignment}: run `make translate`"
    assert not state.untranslated, f"{where}: untranslated markdown cells {state.untranslated}"
    assert not state.fuzzy, f"{where}: the English of cells {state.fuzzy} changed: review their translation"
    assert not state.not_nfc, f"{where}: cells {state.not_nfc} are not in Unicode NFC"
    assert not state.bad, f"{where}: printed strings whose translation changes more than words: {state.bad}"
    cells = source_nb(assignment).cells
    labels = printed.find_labels([cell.source for cell in cells if printed.is_demo(cell)])
    printed_strings = sum(len(printed.templates(cell.source, labels)) for cell in cells if printed.is_demo(cell))
    assert printed_strings, "the demo cells print something: their strings are in the catalog"
    assert state.total == sum(cell.cell_type == "markdown" for cell in cells) + printed_strings + len(labels), \
        "one message per markdown cell, per string a demo cell prints or draws, and per label of the notebook"


def test_a_changed_english_cell_becomes_fuzzy_a_new_one_untranslated(tmp_path, monkeypatch):
    """The catalog follows the English source: changed cell -> fuzzy (old English kept), new -> untranslated,
    removed -> obsolete (kept)."""
    shutil.copytree(REPO / "source" / GRADED, tmp_path / "source" / GRADED)
    shutil.copytree(REPO / "i18n", tmp_path / "i18n")
    path = REPOSITORY.notebook("source", GRADED)
    nb = P.read_nb(path)
    markdown = [cell for cell in nb.cells if cell.cell_type == "markdown"]
    changed, removed = markdown[1], markdown[2]
    before = changed.source
    changed.source += "\nOne more English sentence."
    nb.cells.remove(removed)
    new = nbformat.v4.new_markdown_cell("A new English cell.")
    nb.cells.append(new)
    demo = next(cell for cell in nb.cells if printed.is_demo(cell) and "\"weights:\"" in cell.source)
    demo.source = demo.source.replace('"weights:"', '"attention weights:"') + '\nprint(f"{len(V_two)} values")'
    code = demo.id + printed.CONTEXT
    P.write_nb(nb, tmp_path / "source" / GRADED / path.name)
    monkeypatch.setattr(TR, "REPOSITORY", CourseRoot(tmp_path))
    monkeypatch.setattr(TR, "I18N", tmp_path / "i18n")
    said = []
    assert TR.run(LANG, check=True, assignments=[GRADED], say=said.append) == 1, "translate --check fails"
    assert any("out of date" in line for line in said) and any("need a translation" in line for line in said), said
    state = TR.update_catalogs(LANG, [GRADED])[GRADED]
    assert state.fuzzy == [changed.id, f"{code} 'attention weights:'"]
    assert state.untranslated == [f"{code} '{{len(V_two)}} values'", new.id]
    catalog = TR.read_catalog(TR.catalog_path(LANG, GRADED))
    entry = next(e for e in TR.messages(catalog) if e.msgctxt == changed.id)
    assert entry.msgid == changed.source and entry.fuzzy and entry.msgstr and entry.previous_msgid == before
    entry = next(e for e in TR.messages(catalog) if e.msgctxt == code and e.msgid == "attention weights:")
    assert entry.fuzzy and entry.msgstr == "trọng số:" and entry.previous_msgid == "weights:", \
        "a changed printed string keeps its translation, fuzzy, with the old English"
    assert [(e.msgctxt, bool(e.msgstr)) for e in catalog.obsolete_entries()] == [(removed.id, True)], \
        "a removed cell's translation is kept"
    with pytest.raises(P.PipelineError, match="not translated"):
        TR.translated_notebook(LANG, GRADED)
    for entry in TR.messages(catalog):  # reviewed, but one translation prints another number
        entry.flags = [f for f in entry.flags if f != "fuzzy"]
        entry.msgstr = entry.msgstr or ("{len(V_two)} giá trị" if entry.msgctxt == code else "Một ô mới.")
        if entry.msgid == "attention weights:":
            entry.msgstr = "trọng số attention (2):"
    TR.catalog_path(LANG, GRADED).write_bytes(TR.render_catalog(catalog))
    said.clear()
    assert TR.run(LANG, check=True, assignments=[GRADED], say=said.append) == 1
    assert any("'attention weights:': its numbers are not the English ones" in line for line in said), said
    with pytest.raises(P.PipelineError, match="refused"):
        TR.translated_notebook(LANG, GRADED)


def test_printed_words_are_translated_and_nothing_else():
    """The vi build rewrites the strings a demo cell prints or draws, keeps every placeholder (its format
    too) and every other string; the code prints the same numbers."""
    english = (
        'labels = {"raw scores": 1}\n'
        'print("mean of", labels["raw scores"], "over", 3, "rows")\n'
        'print(f"d_k = {8:>3}: variance {2 / 3:7.2f}, "\n'
        '      f"std {1 / 3:.3f}")\n'
        'plot_curves([1], {"raw scores": [2]}, xlabel="step", title=f"{2 ** 10:,} tokens", mode="relu")\n')
    words = {"mean of": "trung bình của", "over": "trên", "rows": "hàng",
             "d_k = {8:>3}: variance {2 / 3:7.2f}, std {1 / 3:.3f}": "d_k = {8:>3}: phương sai {2 / 3:7.2f}, "
                                                                     "độ lệch chuẩn {1 / 3:.3f}",
             "raw scores": "score thô", "step": "bước", "{2 ** 10:,} tokens": "{2 ** 10:,} token"}
    assert printed.templates(english) == list(words), "labels[...] and mode= are code, not words"
    vietnamese = printed.rewrite(english, words)
    assert printed.blanked(vietnamese) == printed.blanked(english)
    assert 'labels["raw scores"]' in vietnamese and 'mode="relu"' in vietnamese and '"score thô": [2]' in vietnamese
    def run(source):  # what the cell prints and draws
        out = []
        exec(source, {"print": lambda *a: out.append(" ".join(map(str, a))),
                      "plot_curves": lambda xs, curves, **kw: out.append(f"{curves} {kw}")})
        return out

    shown = {"en": run(english), "vi": run(vietnamese)}
    numbers = [[re.findall(r"\d+(?:[.,]\d+)*", line) for line in out] for out in shown.values()]
    assert numbers[0] == numbers[1] and shown["vi"][1] == "d_k =   8: phương sai    0.67, độ lệch chuẩn 0.333"
    fstring = "d_k = {8:>3}: variance {2 / 3:7.2f}, std {1 / 3:.3f}"
    assert printed.problems(fstring, "d_k = {8}: phương sai {2 / 3:7.2f}, độ lệch chuẩn {1 / 3:.3f}"), \
        "a placeholder's format is kept"
    assert printed.problems("mean of", "trung bình của 2"), "no number is added"
    assert not printed.problems(fstring, words[fstring])
    assert printed.problems("{x:{width}} rows", "{x:{width}} hàng"), "a nested format is refused, not rewritten"


def test_texts_appended_to_a_list_only_shown_are_words_a_list_used_otherwise_is_code():
    """``cells.append(f"... of {n}" if n else "no couplet")`` builds a row the cell only prints: its texts are
    translated; a list the code also looks up, sorts or reads another way keeps its strings."""
    shown = ('cells = []\nfor n in (3, 0):\n    cells.append(f"{n:2d} of 9" if n else "no couplet")\n'
             'print("".join(f"{cell:>12s}" for cell in cells))\n')
    assert printed.templates(shown) == ["{n:2d} of 9", "no couplet"]
    words = {"{n:2d} of 9": "{n:2d} trên 9", "no couplet": "không có cặp câu"}
    out = []
    exec(printed.rewrite(shown, words), {"print": out.append})
    assert out == [f"{' 3 trên 9':>12s}{'không có cặp câu':>12s}"]
    for used in ('print(cells[0])\n', 'print(sorted(cells))\n', 'table = {c: 1 for c in cells}\n',
                 'cells.insert(0, "first row")\n', 'for cell in cells:\n    lookup[cell] = 1\n'):
        assert printed.templates(shown + used) == [], f"the list is also code: {used!r}"


def test_a_tables_column_headers_are_words_their_widths_are_code():
    """``f"{'time ratio':34}{'measured':>10}"`` prints two headers: their words are translated, each
    width and alignment stays the English one, and the rows below line up as in English."""
    english = 'print(f"{\'time ratio\':34}{\'measured\':>10} {\'x\':>3}")\nprint(f"{\'\':20s}|")\n'
    header = "{'time ratio':34}{'measured':>10} {'x':>3}"
    assert printed.templates(english) == [header], "a header is words; a blank one is not"
    words = {header: "{'tỉ lệ thời gian':34}{'đo được':>10} {'x':>3}"}
    assert not printed.problems(header, words[header])
    assert printed.problems(header, "{'tỉ lệ thời gian':30}{'đo được':>10} {'x':>3}"), "a width is kept"
    assert printed.problems(header, "{'tỉ lệ thời gian':34}{'đo được':<10} {'x':>3}"), "an alignment is kept"
    assert printed.problems("{'window 256':>13}", "{'cửa sổ':>13}"), "a header's number is kept"
    vietnamese = printed.rewrite(english, words)
    assert printed.blanked(vietnamese) == printed.blanked(english)
    out = []
    exec(vietnamese, {"print": out.append})
    assert out[0] == f"{'tỉ lệ thời gian':34}{'đo được':>10} {'x':>3}" and len(out[0]) == 34 + 10 + 1 + 3


def test_labels_a_loop_only_shows_and_messages_are_words_and_lookup_keys_stay():
    """A literal a ``for`` loop binds to a name its body only prints or draws, an ``assert``'s or
    ``check_true``'s message, a ``MY_...`` answer and ``ax.text``'s text are words; a label the loop
    also uses as a key, or a literal bound to a name used otherwise, is code."""
    english = (
        'MY_PREDICTION = """\nyour answer here\n"""\n'
        'for name, n in [("no mask", 1), ("causal", 2)]:\n'
        '    print(f"{name:9s} {n}")\n'
        'for ax, title in zip(axes, ("window 2", "window 2, causal")):\n'
        '    ax.set(title=title)\n'
        '    ax.text(0, 1, "unscaled d_k = 4")\n'
        'for head, role in enumerate(["its state", "the cause"]):\n'
        '    print(f"head {head}: {role}")\n'
        'for key, value in [("full attention", 1)]:\n'
        '    print(key, seconds[key])\n'
        'for mode in ["relu", "gelu"]:\n'
        '    print(mode)\n'
        '    mode = mode.upper()\n'
        'assert n == 2, f"got {n}, expected two rows"\n'
        'check_true(n == 2, "the loop ran twice")\n'
        'print("".join(f"{c:>9s}" for c in ("tone pattern", "rhyme")))\n'
        'for key, what in (("tones", "tone pattern"), ("chain", "chain rhyme")):\n'
        '    said = f"{what}: " + ("apart" if seconds[key] else "not told apart")\n'
        '    print(said)\n')
    assert printed.templates(english)[-5:] == ["tone pattern", "rhyme", "chain rhyme", "apart",
                                               "not told apart"], "a text a loop builds for print; key is a lookup"
    assert printed.templates(english)[:-5] == [
        "\nyour answer here\n", "no mask", "causal", "window 2", "window 2, causal",
        "unscaled d_k = 4", "its state", "the cause", "head {head}: {role}",
        "got {n}, expected two rows", "the loop ran twice"], "seconds[key] is a lookup; mode is reassigned"
    vietnamese = printed.rewrite(english, {t: "vi " + t for t in printed.templates(english)})
    assert vietnamese.startswith('MY_PREDICTION = """vi \nyour answer here\n"""\n')  # still one text, as written
    assert '("tones", "vi tone pattern")' in vietnamese
    assert '("vi no mask", 1)' in vietnamese and '("full attention", 1)' in vietnamese and '["relu", "gelu"]' in vietnamese
    assert printed.blanked(vietnamese) == printed.blanked(english)


LABELS_EN = (
    'ladder = {"counted bigram": 3.25}\n'
    'for name, bits in [("neural bigram", 3.5)]:\n'
    '    ladder[name] = bits\n'
    'mode = {"relu": 1}["relu"]\n',
    'for name, value in ladder.items():\n'
    '    print(f"{name:16s} {value:.2f} bits")\n'
    'plot_curves([1], {}, hlines={"counted bigram": ladder["counted bigram"]})\n'
    'print("gap", ladder["neural bigram"] - ladder["counted bigram"])\n')
LABELS_VI = {"counted bigram": "bigram đếm", "neural bigram": "bigram neural"}


def test_a_label_is_translated_wherever_the_demo_cells_write_it():
    """A string a demo cell shows and also keeps in a name other cells read, or looks up, is one message per
    notebook, renamed at every occurrence in the demo cells: the code computes the same and prints it in Vietnamese."""
    assert printed.find_labels(list(LABELS_EN)) == {"counted bigram": [0, 1], "neural bigram": [0, 1]}, \
        "the ladder's keys are labels (a literal of the loop too); a mode looked up is code"
    assert printed.templates(LABELS_EN[1], LABELS_VI) == ["{name:16s} {value:.2f} bits", "gap"], \
        "a label shown in one cell is the notebook's message, not the cell's"
    words = {"{name:16s} {value:.2f} bits": "{name:16s} {value:.2f} bit", "gap": "khoảng cách"}
    vietnamese = [printed.rewrite(LABELS_EN[0], {}, LABELS_VI), printed.rewrite(LABELS_EN[1], words, LABELS_VI)]
    assert vietnamese[0].startswith('ladder = {"bigram đếm": 3.25}\nfor name, bits in [("bigram neural", 3.5)]:')
    assert 'hlines={"bigram đếm": ladder["bigram đếm"]}' in vietnamese[1] and '{"relu": 1}["relu"]' in vietnamese[0]
    for english, translated in zip(LABELS_EN, vietnamese, strict=True):
        assert printed.blanked(translated, set(LABELS_VI.values())) == printed.blanked(english, set(LABELS_VI))

    def run(cells):
        out, scope = [], {"print": lambda *a: out.append(" ".join(map(str, a))),
                          "plot_curves": lambda xs, curves, **kw: out.append(f"{kw}")}
        for cell in cells:
            exec(cell, scope)
        return out

    english, translated = run(LABELS_EN), run(vietnamese)
    for label, text in LABELS_VI.items():  # the same lines with the labels' words, the same numbers (the padding aside)
        english = [" ".join(line.replace(label, text).split()) for line in english]
    assert [" ".join(line.replace("khoảng cách", "gap").replace(" bit", " bits").split()) for line in translated] \
        == english
    assert translated[0] == "bigram đếm       3.25 bit" and translated[-1] == "khoảng cách 0.25"


def test_a_label_is_refused_where_renaming_could_change_what_the_code_does():
    """A label the graded cells or course/ also write, two labels that would read the same, a label meeting
    another string of the code, and a label the code computes with are refused; a translation equal to the
    English renames nothing and is always accepted."""
    cells = [("demo0", LABELS_EN[0], True), ("demo1", LABELS_EN[1], True)]
    assert printed.label_problems(cells, LABELS_VI) == {label: [] for label in LABELS_VI}

    def refused(cells, translations=LABELS_VI):
        return {label: problems for label, problems in printed.label_problems(cells, translations).items() if problems}

    graded = [*cells, ("test_ladder", 'check_true(ladder["counted bigram"] > 3, "the bigram")', False)]
    assert list(refused(graded)) == ["counted bigram"] and "test_ladder" in refused(graded)["counted bigram"][0]
    assert not refused(graded, {**LABELS_VI, "counted bigram": "counted bigram"}), "kept English: nothing renamed"
    assert set(refused(cells, {"counted bigram": "bigram", "neural bigram": "bigram"})) == set(LABELS_VI), \
        "two labels would become one key"
    assert "already a string" in refused(cells, {**LABELS_VI, "neural bigram": "relu"})["neural bigram"][0]
    assert not refused(cells, {"counted bigram": "neural bigram", "neural bigram": "counted bigram"}), \
        "a swap meets nothing: every occurrence of both is renamed"
    helper = [*cells, ("demo2", 'norms = {"LayerNorm (norm1)": 1}\nfor k in norms:\n    print(k)\nnorms[k]', True)]
    assert printed.find_labels([s for _, s, _ in helper])["LayerNorm (norm1)"] == [2]
    assert "course/" in refused(helper, {**LABELS_VI, "LayerNorm (norm1)": "chuẩn hóa"})["LayerNorm (norm1)"][0]
    for code, how in [('for name in ladder:\n    print(name.upper())', "method .upper"),
                      ('for name in sorted(ladder):\n    print(name)', "sorted"),
                      ('first = "counted bigram".split()', "method .split"),
                      ('for name, value in ladder.items():\n    print(name[:4])', "sliced"),
                      ('key = f"{ladder[\'counted bigram\']}"', "f-string's placeholder"),
                      ('for name in ladder:\n    print(len(name))', "len()"),
                      ('for name in ladder:\n    print("bigram" in name)', "searched")]:
        problems = refused([*cells, ("demo2", code, True)])
        assert problems and all(how in " ".join(p) for p in problems.values()), (code, problems)


def test_an_edition_notebook_is_made_again_exactly_when_what_it_is_made_from_changed(tmp_path, monkeypatch):
    """make check builds the edition's source before each check: a notebook whose English source, catalog and
    translating code did not change is left as written (its stamp); any change, or a hand-edited notebook,
    makes it again, and a catalog that no longer covers the source still fails."""
    shutil.copytree(REPO / "source" / GRADED, tmp_path / "source" / GRADED)
    shutil.copytree(REPO / "i18n", tmp_path / "i18n")
    monkeypatch.setattr(TR, "REPOSITORY", CourseRoot(tmp_path))
    monkeypatch.setattr(TR, "I18N", tmp_path / "i18n")
    made, translated_notebook = [], TR.translated_notebook
    monkeypatch.setattr(TR, "translated_notebook", lambda *a: made.append(a) or translated_notebook(*a))
    dest = CourseRoot(tmp_path / "edition")
    path = TR.write_source(LANG, dest, GRADED)
    first = path.read_text()
    assert TR.write_source(LANG, dest, GRADED) == path and len(made) == 1, "made again though nothing changed"
    path.write_text(first.replace("\n", "\n ", 1))
    assert TR.write_source(LANG, dest, GRADED).read_text() == first and len(made) == 2, "a hand-edited notebook stays"
    catalog = TR.read_catalog(TR.catalog_path(LANG, GRADED))
    entry = next(e for e in TR.messages(catalog) if not TR.code_context(e) and not TR.label_context(e) and e.msgstr)
    entry.msgstr += "\n\nMột câu mới."
    TR.catalog_path(LANG, GRADED).write_bytes(TR.render_catalog(catalog))
    assert "Một câu mới." in TR.write_source(LANG, dest, GRADED).read_text() and len(made) == 3
    source = REPOSITORY.notebook("source", GRADED)  # the English source moves on: the catalog is out of date
    nb = P.read_nb(source)
    next(cell for cell in nb.cells if cell.cell_type == "markdown").source += "\nOne more English sentence."
    P.write_nb(nb, tmp_path / "source" / GRADED / source.name)
    with pytest.raises(P.PipelineError, match="not translated"):
        TR.write_source(LANG, dest, GRADED)


def test_translate_check_fails_for_an_untranslated_or_refused_label(tmp_path, monkeypatch):
    """A new label is one untranslated message of its notebook (a chapter cannot skip it); a translation that
    would rename what a graded cell also writes is refused by ``--check`` and by the build, naming why."""
    shutil.copytree(REPO / "source" / GRADED, tmp_path / "source" / GRADED)
    shutil.copytree(REPO / "i18n", tmp_path / "i18n")
    path = REPOSITORY.notebook("source", GRADED)
    nb = P.read_nb(path)
    at = next(i for i, cell in enumerate(nb.cells) if printed.is_demo(cell))
    nb.cells.insert(at + 1, nbformat.v4.new_code_cell(
        'totals = {"scaled scores": 1.0, "unscaled": 2.0}\nfor name, total in totals.items():\n'
        '    print(f"{name:14s} {total}")\nprint(totals["unscaled"] - totals["scaled scores"])'))
    graded = next(cell for cell in nb.cells if _nbgrader(cell).get("grade") and cell.cell_type == "code")
    graded.source += '\nassert "unscaled" != "scaled"'
    P.write_nb(nb, tmp_path / "source" / GRADED / path.name)
    monkeypatch.setattr(TR, "REPOSITORY", CourseRoot(tmp_path))
    monkeypatch.setattr(TR, "I18N", tmp_path / "i18n")
    context = f"{REPOSITORY.notebook_name(GRADED)}{printed.LABEL_CONTEXT}"
    state = TR.update_catalogs(LANG, [GRADED])[GRADED]
    assert state.untranslated == [f"{context} 'scaled scores'", f"{context} 'unscaled'"]
    said = []
    assert TR.run(LANG, check=True, assignments=[GRADED], say=said.append) == 1
    assert any(f"{context} 'scaled scores'" in line and "need a translation" in line for line in said), said
    catalog = TR.read_catalog(TR.catalog_path(LANG, GRADED))
    for entry in TR.messages(catalog):
        entry.msgstr = entry.msgstr or {"scaled scores": "score đã chia", "unscaled": "chưa chia"}[entry.msgid]
    TR.catalog_path(LANG, GRADED).write_bytes(TR.render_catalog(catalog))
    state = TR.status(LANG, GRADED)
    assert not state.untranslated and [line.split(": ")[0] for line in state.bad] == [f"{context} 'unscaled'"]
    assert graded.id in state.bad[0], state.bad
    with pytest.raises(P.PipelineError, match="refused"):
        TR.translated_notebook(LANG, GRADED)
    entry = next(e for e in TR.messages(catalog) if e.msgid == "unscaled")
    entry.msgstr = "unscaled"  # kept English: renames nothing, accepted
    TR.catalog_path(LANG, GRADED).write_bytes(TR.render_catalog(catalog))
    assert TR.status(LANG, GRADED).complete
    cell = TR.translated_notebook(LANG, GRADED).cells[at + 1]
    assert cell.source.startswith('totals = {"score đã chia": 1.0, "unscaled": 2.0}')
    assert 'totals["unscaled"] - totals["score đã chia"]' in cell.source


@pytest.mark.parametrize("assignment", [a for a in CHAPTERS if _labels(a)], ids=_ids)
def test_a_chapter_with_labels_runs_in_vietnamese_and_passes_its_tests(assignment, edition):
    """The edition's source (solutions and hidden tests) runs top to bottom: every graded test passes, as in
    English, and the demo cells print the labels in Vietnamese, never the English ones they rename."""
    nb = P.read_nb(edition.notebook("source", assignment))
    with trusted_kernels(), P.environment({"COURSE_QUICK_DEMOS": "1"}):
        NotebookClient(nb, timeout=300, kernel_name="python3", kernel_manager_class=SandboxedKernelManager,
                       resources={"metadata": {"path": str(edition.folder("source", assignment))}}).execute()
    errors = [P.cell_error(c) for c in nb.cells if P.cell_error(c)]
    assert not errors, f"{assignment} (vi) raised: {errors}"
    assert any(_nbgrader(c).get("grade") and c.cell_type == "code" for c in nb.cells)
    text = "\n".join(o.get("text", "") for c in nb.cells if printed.is_demo(c) for o in c.get("outputs", [])
                     if o.get("output_type") == "stream")
    renamed = {label: vi for label, vi in _labels(assignment).items() if vi != label}
    assert renamed and any(vi in text for vi in renamed.values()), "a label printed in Vietnamese"
    assert not [label for label in renamed if label in text], "an English label left in what the demos print"


@pytest.mark.pipeline
@pytest.mark.parametrize("assignment", [a for a in CHAPTERS if _labels(a)], ids=_ids)
def test_a_chapter_with_labels_grades_in_vietnamese_as_in_english(assignment, tmp_path):
    """The solution and the untouched release of the edition, graded through the real pipeline: full marks in
    every test cell and none in any, which is what the English ones score (test_chapters proves those totals,
    so every cell's score is the English one's) without grading the English twice."""
    edition = TR.scratch_edition(LANG, tmp_path / "vi", [assignment])
    release_nb, answers = edition.release_and_answers(assignment)
    edition.submit(assignment, SOLUTION, P.fill(release_nb, answers))
    edition.submit(assignment, STUB, release_nb)
    with trusted_kernels():
        edition.autograde(assignment)
    vn = edition.results(assignment)
    assert vn[SOLUTION].cells and {g: c.score for g, c in vn[SOLUTION].cells.items()} == \
        {g: c.max_score for g, c in vn[SOLUTION].cells.items()}
    assert {g: c.score for g, c in vn[STUB].cells.items()} == {g: 0 for g in vn[STUB].cells}
    assert vn[SOLUTION].auto_score == vn[SOLUTION].auto_max == automatic_points(assignment)


# ---------------------------------------------------------------- same code, same grades


def _code(cell, labels=()):
    """A code cell's code as both editions must share it: a graded, solution or locked cell's byte for
    byte, a demo cell's with the words of what it prints, and its labels (``labels``: the notebook's, in
    this edition), taken out (its placeholders and the rest kept)."""
    if cell.cell_type != "code":
        return None
    return printed.blanked(cell.source, labels) if printed.is_demo(cell) else cell.source


def _cells(nb, labels=()):
    return [(cell.cell_type, cell.get("id"), cell.metadata, _code(cell, labels)) for cell in nb.cells]


@pytest.mark.parametrize("assignment", CHAPTERS, ids=_ids)
def test_same_code_grade_ids_points_and_metadata_as_english(assignment, edition):
    english, vietnamese = source_nb(assignment), P.read_nb(edition.notebook("source", assignment))
    labels = _labels(assignment)
    assert set(labels) == set(printed.find_labels([c.source for c in english.cells if printed.is_demo(c)]))
    assert _cells(vietnamese, set(labels.values())) == _cells(english, set(labels)), \
        "only the text of markdown cells, printed words and labels may differ"
    graded_code = [c.source for c in english.cells if c.cell_type == "code" and not printed.is_demo(c)]
    assert [c.source for c in vietnamese.cells if c.cell_type == "code" and not printed.is_demo(c)] == graded_code
    assert vietnamese.metadata[TR.METADATA_KEY] == LANG and "jupytext" not in vietnamese.metadata
    translated = [c for c in vietnamese.cells if c.cell_type == "markdown"]
    assert all(unicodedata.is_normalized("NFC", c.source) for c in translated)
    assert [c.source for c in translated] != [c.source for c in english.cells if c.cell_type == "markdown"]

    def graded(nb, labels):  # the released cells as nbgrader grades them (a markdown cell's checksum is of its text)
        return [(c.cell_type, c.get("id"), _code(c, labels),
                 {k: v for k, v in _nbgrader(c).items() if not (k == "checksum" and c.cell_type == "markdown")})
                for c in nb.cells]

    released = P.read_nb(TR.edition_root(LANG).notebook("release", assignment))
    assert graded(released, set(labels.values())) == graded(P.read_nb(REPOSITORY.notebook("release", assignment)),
                                                              set(labels))


def test_edition_config_is_the_course_config_with_its_own_course_id():
    english, vietnamese = REPOSITORY.settings(), TR.edition_root(LANG).settings()
    assert english.CourseDirectory.course_id != vietnamese.CourseDirectory.course_id
    for section, name in [("Autograde", "autograde_preprocessors"), ("OracleExecute", "oracle_chapters"),
                          ("OracleExecute", "test_modules"), ("Execute", "timeout"), ("CourseDirectory", "ignore"),
                          ("GenerateAssignment", "preprocessors")]:
        def named(value):  # a preprocessor class is made anew at each load (the sandbox's subclass): its name
            return [getattr(v, "__qualname__", v) for v in value] if isinstance(value, list) else value

        assert named(vietnamese[section][name]) == named(english[section][name]), f"{section}.{name} differs"


# ---------------------------------------------------------------- the release


@pytest.mark.parametrize("assignment", CHAPTERS, ids=_ids)
def test_release_is_current(assignment, edition):
    problems = TR.release_is_current(LANG, assignment, edition)
    assert not problems, f"{problems}: run `make translate`"


@pytest.mark.parametrize("assignment", CHAPTERS, ids=_ids)
def test_release_leaks_nothing(assignment):
    folder = TR.edition_root(LANG).folder("release", assignment)
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert files and all(p.suffix == ".ipynb" for p in files), f"only notebooks in {folder}: {files}"
    secret = solution_lines(source_nb(assignment)) + hidden_lines(source_nb(assignment))
    translated = TR.translated_notebook(LANG, assignment)  # the Vietnamese model answers too
    model_answers = [line.strip() for c in translated.cells
                     if c.cell_type == "markdown" and _nbgrader(c).get("solution")
                     for line in c.source.splitlines() if len(line.strip()) >= 20]
    for path in files:
        text = path.read_text()
        for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN", "HIDDEN TESTS"):
            assert marker not in text, f"{path} contains {marker!r}"
        nb = json.loads(text)
        body = {line.strip() for c in nb["cells"] for line in "".join(c["source"]).splitlines()}
        assert not [line for line in secret if line in body], f"{path} holds solution or hidden lines"
        assert model_answers and not [line for line in model_answers if line in body], \
            f"{path} holds a Vietnamese model answer"


def test_generated_source_is_never_committed_nor_paired():
    ignored = P.run(["git", "check-ignore", f"editions/{LANG}/source/{GRADED}/x.ipynb", f"workspace-{LANG}/x.ipynb"],
                    cwd=REPO, check=False).stdout.split()
    assert ignored == [f"editions/{LANG}/source/{GRADED}/x.ipynb", f"workspace-{LANG}/x.ipynb"]
    assert 'formats = "ipynb"' in (REPO / "editions" / "jupytext.toml").read_text(), "Lab would pair it with a .py"


# ---------------------------------------------------------------- the student's seat


def test_lab_seat_copies_the_edition_and_check_grades_it_with_the_edition(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "editions" / LANG / "release" / GRADED, repo / "editions" / LANG / "release" / GRADED)
    dest = W.workspace_dir(repo, LANG)
    assert W.prepare(W.edition_folder(repo, LANG), dest) == [dest / GRADED / "two_keys.ipynb"]
    mine = dest / GRADED / "two_keys.ipynb"
    assert W.started(repo, edition=LANG) == []
    nb = P.read_nb(mine)
    nb.cells[0].source += "\nghi chú của tôi"
    P.write_nb(nb, mine)
    assert W.started(repo, edition=LANG) == [(GRADED, mine)]
    from instructor.__main__ import _edition_of

    assert _edition_of(mine) == LANG, "make check NB=... grades a Vietnamese notebook with the edition's tests"
    assert _edition_of(REPOSITORY.notebook("release", GRADED)) is None and _edition_of(tmp_path / "none") is None
    env = W.lab_env(tmp_path / "state", W.edition_folder(REPO, LANG))
    assert str(REPO / "editions" / LANG) in env["JUPYTER_CONFIG_PATH"].split(":"), "Validate uses the edition's config"


# ---------------------------------------------------------------- graded through the real pipeline


# Chapter 01 graded through the real pipeline in both editions (the solution, the untouched release and two
# bug-zoo variants: the same scores, the feedback in Vietnamese): tests/test_vietnamese_feedback.py.


# ---------------------------------------------------------------- the feedback page's own words


def test_the_feedback_page_template_is_current_and_refuses_a_phrase_nbgrader_dropped(tmp_path, monkeypatch):
    """editions/vi/templates/feedback is what nbgrader's template and i18n/vi/feedback_page.po give (translate
    --check says so otherwise), the edition's config uses it, and a catalog phrase the installed template no
    longer shows is an error rather than a page left half in English."""
    from instructor import feedback_page

    assert feedback_page.problems(LANG) == []
    settings = TR.edition_root(LANG).settings()
    assert settings.HTMLExporter.template_name == "feedback"
    assert settings.HTMLExporter.extra_template_basedirs == [str(feedback_page.template_folder(LANG))]
    catalog = tmp_path / "feedback_page.po"
    catalog.write_text(feedback_page.catalog_path(LANG).read_text(encoding="utf-8")
                       + '\nmsgid "Autograder results"\nmsgstr "Kết quả chấm tự động"\n', encoding="utf-8")
    monkeypatch.setattr(feedback_page, "catalog_path", lambda lang: catalog)
    with pytest.raises(ValueError, match="no longer shows 'Autograder results'"):
        feedback_page.translated(LANG)
    assert any("no longer shows" in problem for problem in feedback_page.problems(LANG))
