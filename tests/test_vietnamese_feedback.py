"""Feedback in the student's language (issue 55; docs/TRANSLATING.md, "Feedback").

Every message a student of the Vietnamese edition can read (the tests', visible and hidden, the
course's checks, the grader's own, ``make check``'s summary) is in ``i18n/vi/messages.po``, read
mechanically from the code (:mod:`instructor.messages`) and looked up on the grader's side
(:mod:`nboracle.grader.messages`). Here: the catalog is current and complete for every published
chapter; a composed message (a check's sentence, the test's name for the value, a likely
cause) is translated part by part; a new message is listed with its place; and chapter 01 graded
through the real pipeline, solution, stub and two bug-zoo variants, scores in Vietnamese exactly
what the same notebooks score in English, with the student's messages in Vietnamese (notebook,
feedback page) and the instructor's tools still reading the English.
"""

from __future__ import annotations

import ast
import datetime
import re
import shutil

import nbformat
import numpy as np
import pytest
from nboracle.classroom import pipeline as P
from nboracle.classroom.selfcheck import score_lines
from nboracle.grader.messages import NOTEBOOK_METADATA, UNTRANSLATED
from nboracle.grader.nbgrader_ext import _due_text
from support import SOLUTION, STUB, trusted_kernels

from course import attempt, check_choice, check_rows_sum_to_one, check_shape, language
from course.checks import CheckFailed
from instructor import messages as M
from instructor import translate as TR
from instructor.repository import REPO, REPOSITORY
from instructor.zoo import variants_for

LANG = "vi"
GRADED = "01_two_keys"
ZOO = ("attention_no_scale", "softmax_axis0")  # a likely cause named inside a check's sentence; two tests lost


@pytest.fixture(scope="module")
def vi():
    return M.catalog(LANG)


# ---------------------------------------------------------------- the catalog


def test_the_catalog_is_current_and_every_published_chapter_complete():
    state = M.status(LANG, TR.EDITIONS[LANG], TR.LANGUAGE_NAMES)
    assert not state.stale, "i18n/vi/messages.po is out of date with the code: run `make translate`"
    left = TR.messages_left(LANG, TR.EDITIONS[LANG], state)
    assert not left, ("messages a student of the Vietnamese edition reads are untranslated (`python -m instructor "
                      "translate --lang vi --untranslated` lists them):\n" + "\n".join(left[:20]))
    assert state.complete and state.total > 1000


def test_extraction_reads_every_kind_of_message():
    found = {m.msgid: m.places for m in M.extract([GRADED])}
    # a hidden test's f-string name, its hint, a likely cause, a check's sentence, a quiz's, the grader's own
    for msgid in ["weights for d_k={d_k}", "the scores are not divided by sqrt(d_k)",
                  "{name} has shape {actual}, expected {expected}",
                  "{name} = {value:g} is not right: {reasoning}",
                  "the student's code ran longer than {self.link.executor.timeout} s in this test (an infinite loop?) "
                  "and was interrupted",
                  "not done yet: a solution cell this test uses still raises NotImplementedError"]:
        assert msgid in found, msgid
    assert any(p.startswith("source/01_two_keys/two_keys.py:") for p in found["weights for d_k={d_k}"])
    assert "HAND_WEIGHTS" not in found and "softmax(scores)" not in found, "a bare name is shown as it is"
    # extraction reads only the chapters it is given: chapter 10's meter messages are not chapter 01's
    chapter_10 = {m.msgid for m in M.extract(["10_tiny_gpt"])} - set(found)
    assert "tone takes one syllable (a str)" in chapter_10
    po = {e.msgid for e in M.read(LANG)}
    assert chapter_10 <= po, "chapter 10 is in the edition: every one of its messages is in the catalog"


def test_a_new_message_is_listed_with_its_place(tmp_path, monkeypatch):
    copy = tmp_path / "messages.po"
    shutil.copy(M.catalog_path(LANG), copy)
    monkeypatch.setattr(M, "catalog_path", lambda lang: copy)
    monkeypatch.setattr(M, "kernel_path", lambda lang: tmp_path / "messages-vi.json")
    real = M.extract
    monkeypatch.setattr(M, "extract", lambda chapters: [*real(chapters), M.Message(
        "{name} must be a new sentence", ["source/01_two_keys/two_keys.py:1"])])
    failures = TR.run_messages(LANG, True, [GRADED], False, lambda line: None)
    assert any("source/01_two_keys/two_keys.py:1: '{name} must be a new sentence'" in line for line in failures), \
        "--check fails, naming the message and its place"
    M.update(LANG, TR.EDITIONS[LANG], TR.LANGUAGE_NAMES)  # `make translate` adds it, untranslated
    entry = next(e for e in M.read(LANG) if e.msgid == "{name} must be a new sentence")
    assert entry.msgstr == "" and entry.occurrences == [("source/01_two_keys/two_keys.py", "")]
    listed = []
    TR.run_messages(LANG, False, [GRADED], True, listed.append)
    assert "source/01_two_keys/two_keys.py:1: '{name} must be a new sentence'" in listed


def test_a_translation_with_a_placeholder_the_english_lacks_is_refused(tmp_path, monkeypatch):
    copy = tmp_path / "messages.po"
    po = M.read(LANG)
    entry = next(e for e in po if e.msgid == "{name} has shape {actual}, expected {expected}")
    entry.msgstr = "{name} có shape {shape}"
    copy.write_bytes(M.render(po))
    monkeypatch.setattr(M, "catalog_path", lambda lang: copy)
    state = M.status(LANG, TR.EDITIONS[LANG], TR.LANGUAGE_NAMES)
    assert any("['shape']" in line for line in state.bad)


# ---------------------------------------------------------------- matching


def test_a_composed_message_is_translated_part_by_part(vi):
    english = ("weights for d_k=9 is off: largest difference 0.213 at index (2, 0), 14 of 15 entries outside "
               "atol=1e-06, rtol=0.0001: it matches what you get when the scores are not divided by sqrt(d_k)")
    assert vi.translate(english) == (
        "trọng số với d_k=9 bị lệch: sai khác lớn nhất 0.213 tại chỉ số (2, 0), 14 trên 15 phần tử nằm ngoài "
        "atol=1e-06, rtol=0.0001: kết quả khớp với những gì bạn nhận được khi các score không được chia cho sqrt(d_k)")
    hint = "softmax(scores) for scores of shape (2, 3) has shape (3, 2), expected (2, 3): the last two axes look " \
           "swapped (a transpose too many or too few?)"
    assert vi.translate(hint) == ("softmax(scores) với scores có shape (2, 3) có shape (3, 2), cần (2, 3): hai trục "
                                  "cuối có vẻ bị đổi chỗ (thừa hay thiếu một phép chuyển vị?)")
    said = "something only the student's code printed: 42"
    assert vi.translate(said) == said, "text no template covers stays as it is"


def test_a_students_text_cannot_make_the_grader_work_long(vi):
    """A student's own error words reach the matcher (``block(x) raised ValueError (<their words>)``):
    whatever they are, the lookup stays short and leaves what it cannot parse in English."""
    import time

    for text in [": ".join(["it matches what you get when x"] * n) for n in (30, 300)] + ["x: " * 1300, "a" * 30_000]:
        started = time.perf_counter()
        assert vi.translate(text) == text
        assert time.perf_counter() - started < 1.0, len(text)
    assert vi.translate("the scores are not divided by sqrt(d_k)") == "các score không được chia cho sqrt(d_k)", \
        "a cut-short parse leaves nothing behind"


def test_the_due_date_cell_and_the_summary_speak_vietnamese(vi):
    due = datetime.datetime(2027, 3, 5, 17, 0)
    assert _due_text(due, "UTC", vi.translate).startswith("**Hạn nộp: 17:00 UTC, ngày 05/03/2027.**")
    assert _due_text(due, "UTC", lambda text: text).startswith("**Due: Friday 05 March 2027, 17:00 UTC.**")
    assert _due_text(due, "Asia/Ho_Chi_Minh", vi.translate).startswith(
        "**Hạn nộp: 00:00 (Asia/Ho_Chi_Minh, UTC+07:00), ngày 06/03/2027.**"), "the course's zone, its own date"
    from nboracle.grader.nbgrader_ext import LIST_WORDS, _list_words

    assert sorted(_list_words(vi.translate)) == sorted(LIST_WORDS), "the Assignment List's every phrase, in Vietnamese"
    assert _list_words(vi.translate)["in {days} days"] == "còn {days} ngày"
    cells = {"test_softmax_rows": P.CellResult("test_softmax_rows", 0, 1, "NotImplementedError: "),
             "test_hand_answers": P.CellResult("test_hand_answers", 0, 2, "CheckFailed: HAND_WEIGHTS is still None: "
                                               "replace None with your answer, an array of shape (1, 2)")}
    lines = score_lines(cells, vi.translate)
    assert "ô test" in lines[0]
    assert lines[2].strip() == "chưa làm: một ô lời giải mà test này dùng vẫn còn raise NotImplementedError"
    assert lines[4].strip() == ("CheckFailed: HAND_WEIGHTS vẫn là None: hãy thay None bằng câu trả lời của bạn, "
                                "một mảng có shape (1, 2)")


# ---------------------------------------------------------------- graded through the real pipeline


def _shown(nb) -> dict[str, str]:
    """{grade id: the error a student reads in the autograded notebook}."""
    out = {}
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error" and P.grade_id(cell):
                out[P.grade_id(cell)] = f"{output['ename']}: {output['evalue']}"
    return out


@pytest.mark.pipeline
def test_chapter_01_feedback_is_vietnamese_with_the_english_scores(tmp_path, monkeypatch, vi):
    # the grader's own environment naming a language (a terminal of the Vietnamese seat's Lab) changes nothing:
    # its kernels and its in-process tests speak English, and the course root's catalog translates
    monkeypatch.setenv(language.ENV, LANG)
    english = REPOSITORY.scratch_copy(tmp_path / "en", [GRADED])
    edition = TR.scratch_edition(LANG, tmp_path / "vi", [GRADED])
    variants = {v.name: v for v in variants_for(GRADED) if v.name in ZOO}
    for root in (english, edition):
        release_nb, answers = root.release_and_answers(GRADED)
        root.submit(GRADED, SOLUTION, P.fill(release_nb, answers))
        root.submit(GRADED, STUB, release_nb)
        for variant in variants.values():
            root.submit(GRADED, variant.student_id(), P.fill(release_nb, variant.answers(answers)))
        with trusted_kernels():
            root.autograde(GRADED)
        root.feedback(GRADED)
    en, vn = english.results(GRADED), edition.results(GRADED)
    assert set(en) == set(vn) == {SOLUTION, STUB, *(v.student_id() for v in variants.values())}
    for student in en:
        assert {g: c.score for g, c in vn[student].cells.items()} == {g: c.score for g, c in en[student].cells.items()}, \
            f"{student}: the Vietnamese edition scores what the English one does"
    for variant in variants.values():
        student = variant.student_id()
        graded_en = P.read_nb(english.notebook("autograded", GRADED, student))
        graded_vi = P.read_nb(edition.notebook("autograded", GRADED, student))
        shown_en, shown_vi = _shown(graded_en), _shown(graded_vi)
        assert set(shown_en) == set(shown_vi) >= set(variant.expect)
        page = edition.notebook("feedback", GRADED, student).with_suffix(".html").read_text()
        page_en = english.notebook("feedback", GRADED, student).with_suffix(".html").read_text()
        # the page's own words too (nbgrader's template, its words from i18n/vi/feedback_page.po)
        assert "Test cell" in page_en and "Score:" in page_en, "the English course keeps nbgrader's page"
        assert "Ô kiểm tra" in page and "Điểm:" in page and "Bài làm của bạn" in page
        assert "Test cell" not in page and "Score:" not in page and "Student" not in page
        for gid, fragment in variant.expect.items():
            assert fragment in shown_en[gid] and fragment not in shown_vi[gid], f"{student} {gid}: {shown_vi[gid]}"
            assert shown_vi[gid] == vi.translate(shown_en[gid].split(": ", 1)[0]) + ": " + vi.translate(
                shown_en[gid].split(": ", 1)[1]), "the grader showed the catalog's translation"
            assert re.search("[ăâđêôơưạảấầẩẫậắằẳẵặẹẻẽếềểễệỉịọỏốồổỗộớờởỡợụủứừửữựỳỵỷỹ]", shown_vi[gid]), shown_vi[gid]
            assert vn[student].cells[gid].error == en[student].cells[gid].error, \
                "the instructor's tools (report, class mistakes) read the English message"
            evalue = shown_vi[gid].split(": ", 1)[1]
            assert evalue.replace("'", "&#39;").replace('"', "&quot;")[:60] in page or evalue[:60] in page, \
                f"{student} {gid}: the feedback page shows the Vietnamese message"
        cell = next(c for c in graded_vi.cells if P.grade_id(c) == next(iter(variant.expect)))
        assert cell.metadata[NOTEBOOK_METADATA][UNTRANSLATED], "the English kept beside the translation"


def test_the_english_course_translates_nothing():
    settings = REPOSITORY.settings()
    assert settings.MessageCatalog.catalog == "instructor.messages:translator"
    assert not settings.MessageCatalog.get("language"), "the English course root has no language"
    assert TR.edition_root(LANG).settings().MessageCatalog.language == LANG
    assert (REPO / "i18n" / LANG / "messages.po").is_file()


# ---------------------------------------------------------------- in the student's own kernel (Lab, Validate)


def _hidden(py: str, line: int) -> bool:
    """Whether line ``line`` of a chapter's .py is inside a test cell's hidden region."""
    hidden = False
    for number, text in enumerate((REPO / py).read_text().splitlines()[:line], 1):
        if text.strip() == "### BEGIN HIDDEN TESTS":
            hidden = True
        elif text.strip() == "### END HIDDEN TESTS":
            hidden = False
        if number == line:
            return hidden
    return False


def test_the_kernels_catalog_holds_only_what_a_student_can_read():
    """course/data/messages-vi.json ships to students: every message in it comes from course/ or from the
    visible part of a test cell (the released notebooks), never only from a hidden test or a grader-side reference."""
    import json

    shipped = json.loads(language.catalog_file(LANG).read_text(encoding="utf-8"))
    assert shipped == M.kernel_pairs(M.read(LANG), TR.EDITIONS[LANG]), "current: `make translate` writes it"
    assert 300 < len(shipped) < len(M.read(LANG))
    places = {m.msgid: m.places for m in M.extract(TR.EDITIONS[LANG])}
    secret = []
    for msgid in shipped:
        readable = [p for p in places[msgid] if p.startswith("course/")
                    or p.startswith("source/") and not _hidden(*p.rsplit(":", 1)[:1], int(p.rsplit(":", 1)[1]))]
        if not readable:
            secret.append((msgid, places[msgid]))
    assert not secret, f"messages of hidden tests or references in the kernel's catalog: {secret[:5]}"
    # and read back from what students have: course/ and the released notebooks' code
    readable = set()
    for path in sorted((REPO / "course").glob("*.py")):
        readable |= {t for _, t in M._strings(ast.parse(path.read_text()))}
    for path in sorted((REPO / "release").glob("*/*.ipynb")):
        code = "\n".join(line for c in P.read_nb(path).cells if c.cell_type == "code"
                         for line in c.source.splitlines() if not line.lstrip().startswith(("%", "!")))
        readable |= {t for _, t in M._strings(ast.parse(code))}
    assert set(shipped) <= readable, sorted(set(shipped) - readable)[:5]
    hidden_only = "weights for d_k={d_k}"  # chapter 01's hidden test names its probe so
    assert M.translated(M.read(LANG)).get(hidden_only) and hidden_only not in shipped


def test_translate_check_fails_when_the_kernels_catalog_is_stale(tmp_path, monkeypatch):
    copy = tmp_path / "messages-vi.json"
    shutil.copy(language.catalog_file(LANG), copy)
    monkeypatch.setattr(M, "kernel_path", lambda lang: copy)
    assert not TR.run_messages(LANG, True, [GRADED], False, lambda line: None)
    copy.write_text(copy.read_text(encoding="utf-8").replace("cần", "phải", 1), encoding="utf-8")
    failures = TR.run_messages(LANG, True, [GRADED], False, lambda line: None)
    assert any("messages-vi.json" in line and "out of date" in line for line in failures), failures
    M.update(LANG, TR.EDITIONS[LANG], TR.LANGUAGE_NAMES)  # `make translate` writes it again
    assert copy.read_bytes() == language.catalog_file(LANG).read_bytes()


def _failure(check, *args, **kwargs) -> str:
    with pytest.raises(CheckFailed) as failed:
        check(*args, **kwargs)
    return str(failed.value)


def test_a_visible_check_fails_in_the_kernels_language(monkeypatch, vi):
    """COURSE_LANGUAGE=vi (Lab's environment, make lab LANG=vi): a check's message is the grader's translation;
    without it, for an unknown language, or while nbgrader autogrades, exactly the English."""
    cases = [(check_shape, ("softmax(scores)", np.zeros((3, 2)), (2, 3)), {}),
             (check_rows_sum_to_one, ("softmax(scores)", np.ones((2, 3))),
              {"hint": "normalise along `axis` (the key axis, -1)"}),
             (check_choice, ("Q1", "e"), {}),
             (attempt, ("block(x)", np.linalg.inv, np.zeros((2, 3))), {"hint": "pass a square matrix."})]
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.delenv(language.ENV, raising=False)
    english = [_failure(f, *a, **k) for f, a, k in cases]
    for setting, grading in [("xx", None), ("vi", "autograde"), ("", None)]:
        monkeypatch.setenv(language.ENV, setting)
        if grading:
            monkeypatch.setenv("NBGRADER_EXECUTION", grading)
        assert [_failure(f, *a, **k) for f, a, k in cases] == english, (setting, grading)
    monkeypatch.setenv(language.ENV, "vi")
    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")  # Lab's Validate button
    said = [_failure(f, *a, **k) for f, a, k in cases]
    assert said == [vi.translate(text) for text in english] and all(s != e for s, e in zip(said, english, strict=True))
    assert said[0].startswith("softmax(scores) có shape (3, 2), cần (2, 3)")


def test_plot_attentions_colour_bar_speaks_the_kernels_language(monkeypatch):
    """plot_attention's colour bar says ``weight`` in English and ``trọng số`` in a Vietnamese kernel."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from course.plots import plot_attention
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    for setting, word in (("", "weight"), ("vi", "trọng số")):
        monkeypatch.setenv(language.ENV, setting)
        ax = plot_attention([[0.5, 0.5]], keys=["a", "b"])
        assert (ax.figure.axes[-1].get_ylabel(), ax.get_xlabel()) == (word, "key")
        plt.close(ax.figure)


def test_a_visible_test_fails_in_vietnamese_in_a_kernel_of_the_vietnamese_seat(tmp_path, monkeypatch, vi):
    """make lab LANG=vi puts the edition's language in Lab's environment; a kernel (and Validate's) inherits it."""
    from nbclient import NotebookClient

    from instructor import workspace as W

    monkeypatch.setenv(language.ENV, LANG)  # a shell's own setting: the course root decides
    assert language.ENV not in W.lab_env(tmp_path / "en"), "the English course root has no language"
    env = W.lab_env(tmp_path / "vi", W.edition_folder(REPO, LANG))
    assert env[language.ENV] == LANG
    english = ("2 of 2 rows of softmax(scores) sum to something else than 1 (worst 3, expected 1): "
               "normalise along `axis` (the key axis, -1)")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import numpy as np\nfrom course import check_rows_sum_to_one"),
                nbformat.v4.new_code_cell("check_rows_sum_to_one('softmax(scores)', np.ones((2, 3)), "
                                          "hint='normalise along `axis` (the key axis, -1)')")]
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.setenv(language.ENV, env[language.ENV])  # the kernel inherits the seat's environment
    NotebookClient(nb, kernel_name="python3", allow_errors=True).execute()
    error = next(o for o in nb.cells[-1].outputs if o.output_type == "error")
    assert error.evalue == vi.translate(english) != english


def test_validate_in_the_vietnamese_seat_names_the_mistakes_in_vietnamese(tmp_path):
    """Lab's Validate button is nbgrader validate with the seat's environment (the edition's config on Jupyter's
    config path, COURSE_LANGUAGE): a wrong softmax in the Vietnamese notebook fails its visible tests in Vietnamese."""
    import subprocess

    from instructor import workspace as W

    release_nb, answers = REPOSITORY.release_and_answers(GRADED)
    variant = next(v for v in variants_for(GRADED) if v.name == "softmax_axis0")
    mine = tmp_path / "two_keys.ipynb"
    P.write_nb(P.fill(P.read_nb(REPO / "editions" / LANG / "release" / GRADED / mine.name), variant.answers(answers)),
               mine)
    env = W.lab_env(tmp_path / "state", W.edition_folder(REPO, LANG))
    said = subprocess.run([str(P.BIN / "nbgrader"), "validate", str(mine)], cwd=tmp_path, env=env, text=True,
                          capture_output=True, timeout=120).stdout
    assert "CheckFailed: 4 trên 4 hàng của softmax(scores) có tổng khác 1" in said, said
    assert "rows of softmax" not in said and "is off:" not in said, said


def test_a_grading_kernel_never_takes_the_language():
    """The sandbox passes a cleaned environment: a grading kernel speaks English, the grader translates."""
    from nboracle.grader.sandbox import _kernel_env

    assert language.ENV not in _kernel_env({"PATH": "/usr/bin", language.ENV: "vi", "LANG": "C.UTF-8"})


# ---------------------------------------------------------------- the review reasons make check shows


def test_the_review_reasons_make_check_shows_speak_vietnamese(vi):
    """make check prints what an instructor's grader would flag ("would be flagged for review: ..."): each reason
    of the static scan is translated sentence by sentence, its values (names, paths, lines) kept."""
    from nboracle.grader.scan import refusals, scan_notebook

    from instructor.allowed_calls import allowed_calls_for
    from instructor.substitutes import HELPER_ATTRIBUTES, substitutes_for

    release_nb, answers = REPOSITORY.release_and_answers(GRADED)
    softmax = ("import subprocess\nimport sys\nsys.settrace(None)\nimport torch\n\n"
               "def softmax(scores, axis=-1):\n    open('/etc/passwd')\n"
               "    return torch.softmax(torch.as_tensor(scores), axis).numpy()\n")
    attention = answers["attention"].replace("np.sqrt(d_k)", "_root(d_k)") + "\n\ndef _root(n):\n    return np.cbrt(n) ** 1.5\n"
    nb = P.fill(release_nb, {**answers, "softmax": softmax, "attention": attention})
    cell = next(c for c in nb.cells if P.grade_id(c) == "softmax")
    cell.outputs = [nbformat.v4.new_output("error", ename="PermissionError", evalue="[Errno 13] denied: '/home'")]
    found = scan_notebook(nb, substitutes_for(GRADED), HELPER_ATTRIBUTES, (), allowed_calls_for(GRADED)) + refusals(nb)
    translate = M.translator(LANG)  # make check's: c.MessageCatalog of the edition's config
    lines = {reason: translate(f"would be flagged for review: {reason}") for _, reason in found}
    kinds = ["imports subprocess", ".settrace", "/etc/passwd", "calls torch.softmax, which does", "calls numpy.cbrt (in _root), which",
             "sandbox refused"]
    assert all(any(kind in reason for reason in lines) for kind in kinds), "\n".join(lines)
    for reason, said in lines.items():
        assert said.startswith("sẽ bị đánh dấu để giảng viên xem lại: ô "), said
        left = [w for w in ("cell ", "uses ", "calls ", "imports ", "which ", "review", "line ", "outside", "(in ")
                if w in said]
        assert not left, f"{reason!r} -> {said!r}: English left {left}"
    index = nb.cells.index(cell)
    assert lines[f"cell {index} (softmax): imports subprocess (other processes)"] == \
        f"sẽ bị đánh dấu để giảng viên xem lại: ô {index} (softmax): import subprocess (các tiến trình khác)"
    # the reasons' short sentences ({exercise} uses {hit}) apply to review lines only: any other text is as before
    for english in ["F.cross_entropy uses the natural log", "two calls on one generator give identical statistics"]:
        assert translate(english) == vi.translate(english) == english
        assert translate(f"block(x) raised ValueError ({english})") == f"block(x) gây lỗi ValueError ({english})"
