"""The Vietnamese edition's seat (``make lab LANG=vi``) in a real browser (docs/TRANSLATING.md).

The workspace ``workspace-vi/`` starts as ``editions/vi/release/``; JupyterLab shows chapter 01
in Vietnamese (its rendered markdown), and nbgrader's Validate, with the edition's config, names
the untouched exercises. A wrong answer typed into the editors (the zoo's ``attention_no_scale``):
after the solutions, Run All prints the demo cells' lines in Vietnamese with the English numbers;
over one of them, the visible tests the bug fails show their messages in Vietnamese (the
calling line above a message is the test cell's code: English, as in both editions).
"""

from __future__ import annotations

import unicodedata

from lab import Lab, error_text
from nboracle.classroom import pipeline as P
from seats import ARTIFACTS, seat
from selenium.webdriver.common.by import By

from course.language import kernel_catalog
from instructor import translate as TR
from instructor.repository import REPOSITORY
from instructor.zoo import variants_for

A, NB = "01_two_keys", "two_keys"


def test_vietnamese_seat_shows_the_chapter_in_vietnamese(driver, tmp_path):
    workspace = tmp_path / "workspace-vi"
    released = TR.edition_root("vi").notebook("release", A)
    with seat("lab", "--edition=vi", f"--folder={workspace}", log_name="lab-vi") as server:
        lab = Lab(driver, server, ARTIFACTS, "vi-01")
        assert (workspace / A / f"{NB}.ipynb").read_bytes() == released.read_bytes(), \
            "the Vietnamese workspace starts as the edition's release"
        lab.open(f"{A}/{NB}.ipynb")
        heading = driver.find_element(By.CSS_SELECTOR, ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-RenderedMarkdown h1")
        assert unicodedata.normalize("NFC", heading.text).startswith("Chương 01"), heading.text
        shown = [c["source"] for c in lab.cells() if c["type"] == "markdown"]
        assert shown == [c.source for c in P.read_nb(released).cells if c.cell_type == "markdown"]
        text = lab.validate("untouched")
        assert "test_softmax_rows" in text or "NotImplementedError" in text, text

        # the solutions typed in, then a wrong answer over one of them (the zoo's unscaled scores)
        variant = next(v for v in variants_for(A) if v.name == "attention_no_scale")
        solutions = P.solution_answers(P.read_nb(REPOSITORY.notebook("source", A)))
        for gid, text in solutions.items():
            lab.replace_cell(gid, text)
        cells = lab.run_all()
        assert not [c for c in cells if error_text(c)], "the solutions pass the visible tests"
        printed = "\n".join(out.get("text", "") for c in cells for out in c["outputs"])
        for line in ("trung bình có trọng số: 4.2", "trọng số: [[0.731059, 0.268941]]",
                     "khớp với F.scaled_dot_product_attention: True"):
            assert line in printed, f"a demo cell prints in Vietnamese, the English numbers: {line!r} not in\n{printed}"
        lab.scroll_to(next(c["index"] for c in cells if "trọng số: [[" in str(c["outputs"])))
        lab.shot("printed")
        bug = {gid: text for gid, text in variant.answers(solutions).items() if text != solutions[gid]}
        for gid, text in bug.items():
            lab.replace_cell(gid, text)
            lab.run_cell(lab.index_of(gid))
        vi = kernel_catalog("vi")
        for test_gid, english in variant.expect.items():
            cell = lab.run_cell(lab.index_of(test_gid))
            lab.shot(f"wrong-{test_gid}")
            shown = unicodedata.normalize("NFC", error_text(cell))
            message = next((line for line in shown.splitlines() if line.startswith("CheckFailed: ")), "")
            assert message and english not in message, f"{test_gid}: a check's message, not in English:\n{shown}"
            shown = message  # the calling line above it is the test cell's code: English in both editions
            assert any(letter in shown for letter in "ăâđêôơưạảấầẩậắằẳặẹẻếềểệịỉọỏốồổộớờởợụủứừửựỳỷỹ"), \
                f"{test_gid}: the failure is not in Vietnamese:\n{shown}"
            assert vi.translate(message) == message, "nothing of it is left to translate"
