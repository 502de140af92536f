"""The class report as the instructor opens it: from the instructor's seat (``make formgrader``), in Chromium.

Five students of chapter 01 are graded by the class batch; the page ``mistakes/01_two_keys.html``
is opened through the seat's Jupyter server (``/files/...``, the server the formgrader runs in),
and must show the plot, the ranking with the section to re-teach, every test and who made which.
Screenshots: ``.artifacts/browser/<time>/class-report-*.png``.
"""

from __future__ import annotations

from nboracle.classroom import batch
from nboracle.classroom import pipeline as P
from seats import ARTIFACTS, seat

from instructor.repository import REPOSITORY
from instructor.zoo import variants_for

A = "01_two_keys"


def test_the_instructor_opens_the_class_report(driver, tmp_path):
    from selenium.webdriver.common.by import By

    root = REPOSITORY.scratch_copy(tmp_path / "course", [A])
    release, answers = root.release_and_answers(A)
    zoo = {v.name: v for v in variants_for(A)}
    class_ = {"correct": answers, "empty": {}, "no-scale-1": zoo["attention_no_scale"].answers(answers),
              "no-scale-2": zoo["attention_no_scale"].answers(answers), "axis0": zoo["softmax_axis0"].answers(answers)}
    for student, cells in class_.items():
        root.submit(A, student, P.fill(release, cells))
    batch.grade_class(root, A, runner=batch.InProcess(), progress=False)
    pages = batch.write_class_report(root, A)
    with seat("formgrader", f"--root={root.path}", log_name="class-report") as server:
        driver.set_window_size(1400, 2400)
        driver.get(f"{server.url}/files/mistakes/{A}.html?token={server.token}")
        assert driver.find_element(By.TAG_NAME, "h1").text == f"What the class got wrong: {A}"
        image = driver.find_element(By.TAG_NAME, "img")
        assert driver.execute_script("return arguments[0].complete && arguments[0].naturalWidth", image) > 500
        tables = driver.find_elements(By.TAG_NAME, "table")
        ranking = [row.text for row in tables[0].find_elements(By.TAG_NAME, "tr")[1:]]
        assert ranking[0].startswith("1 2 (40%)") and "attention_no_scale" in ranking[0] and "Part B" in ranking[0]
        assert "softmax_axis0" in ranking[1]
        graded_tests = [c for c in release.cells
                        if c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution")]
        assert len(tables[1].find_elements(By.TAG_NAME, "tr")) == 1 + len(graded_tests), "one row per test"
        assert "no-scale-1, no-scale-2" in driver.find_element(By.TAG_NAME, "body").text
        driver.save_screenshot(str(ARTIFACTS / "class-report-01-assignment.png"))
        driver.get(f"{server.url}/files/mistakes/term.html?token={server.token}")
        assert "What the class got wrong this term" in driver.find_element(By.TAG_NAME, "h1").text
        assert "no-sqrt-scaling" in driver.find_element(By.TAG_NAME, "table").text
        driver.save_screenshot(str(ARTIFACTS / "class-report-02-term.png"))
    assert pages["html"].parent == root.path / "mistakes"
