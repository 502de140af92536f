"""The Vietnamese edition's seat (``make lab LANG=vi``) in a real browser (docs/TRANSLATING.md).

The workspace ``workspace-vi/`` starts as ``editions/vi/release/``; JupyterLab shows chapter 01
in Vietnamese (its rendered markdown), and nbgrader's Validate, with the edition's config, names
the untouched exercises. The tests' failure messages are still English (not checked here).
"""

from __future__ import annotations

import unicodedata

from lab import Lab
from nboracle.classroom import pipeline as P
from seats import ARTIFACTS, seat
from selenium.webdriver.common.by import By

from instructor import translate as TR

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
