"""The student's seat (``make lab``) and the instructor's (``make formgrader``) in a real browser.

Student, for chapter 01 (NumPy) and 03 (torch): the workspace opens, a partial notebook and a
wrong one are Validated (the dialog names the failing cells with their messages), the
solutions typed into the editors pass the visible tests after Run All and every plot cell
shows an image, a named bug from the zoo shows its message without frames from ``course/``,
saving writes no ``.py`` twin and leaves ``release/`` untouched.
Instructor: formgrader lists the assignment, opens its source notebook, generates a release,
and shows the manual-grading view of a written answer of an autograded demo submission.
"""

from __future__ import annotations

import difflib
import re
import subprocess
import time

import pytest
from lab import Lab, dump, error_text
from nboracle.classroom import pipeline as P
from seats import ARTIFACTS, REPO, seat

from instructor.repository import REPOSITORY
from instructor.zoo import variants_for

PLOT_CALL = re.compile(r"^(?!\s*(import|from)\b).*(\bplot_\w+\(|\bplt\.(show|imshow|plot|subplots)\(|\.imshow\()", re.M)

BUGS = {"01_two_keys": "attention_no_scale", "03_masks": "mask_after_softmax"}


def _bug(assignment: str):
    """(variant, grade_id, (start, end, typed)) of the chosen zoo bug, or whole cell text."""
    solutions = P.solution_answers(P.read_nb(REPOSITORY.notebook("source", assignment)))
    variants = variants_for(assignment)
    wanted = BUGS.get(assignment)
    variant = next((v for v in variants if v.name == wanted), variants[0])
    answers = variant.answers(solutions)
    changed = [g for g in solutions if answers[g] != solutions[g]]
    gid = changed[-1]
    ops = [o for o in difflib.SequenceMatcher(None, solutions[gid], answers[gid], autojunk=False).get_opcodes()
           if o[0] != "equal"]
    return variant, solutions, answers, gid, ops


def _plot_cells(cells) -> list[int]:
    return [c["index"] for c in cells if c["type"] == "code" and PLOT_CALL.search(c["source"])]


WRITTEN = ("Scaling keeps the spread of the scores near one whatever d_k is, so the softmax "
           "does not saturate and its gradients do not vanish.")


def _fill_all(lab: Lab, answers: dict[str, str]) -> None:
    """Every code solution cell, then every written answer (markdown), typed into its editor."""
    for gid, text in answers.items():
        lab.replace_cell(gid, text)
    for cell in lab.cells():
        if cell["type"] == "markdown" and cell["solution"]:
            lab.replace_cell(cell["grade_id"], WRITTEN)


def _workspace(tmp_path):
    return tmp_path / "workspace"


@pytest.mark.parametrize("assignment", ["01_two_keys", "03_masks"])
def test_student_seat(driver, tmp_path, assignment):
    name = REPOSITORY.notebook_name(assignment)
    workspace = _workspace(tmp_path)
    variant, solutions, bug_answers, bug_gid, ops = _bug(assignment)
    first = next(iter(solutions))
    with seat("lab", f"--folder={workspace}", log_name=f"lab-{assignment}") as server:
        lab = Lab(driver, server, ARTIFACTS, assignment)
        assert (workspace / assignment / f"{name}.ipynb").read_bytes() == \
            REPOSITORY.notebook("release", assignment).read_bytes(), "the workspace starts as the release"
        lab.open(f"{assignment}/{name}.ipynb")
        toasts = "return document.querySelectorAll('.jp-Notification-Toast, .Toastify__toast').length"
        assert driver.execute_script(toasts) == 0, "a pop-up (news?) on first start"

        if assignment == "01_two_keys":  # nbgrader's panels work with the local exchange
            for command, panel in (("nbgrader:open-assignment-list", "assignments"),
                                   ("nbgrader:open-course-list", "courses")):
                lab.command(command)
                lab.wait(lambda: "loading" not in driver.execute_script(
                    "return window.jupyterapp.shell.currentWidget.node.innerText;").lower(), 60, panel)
                time.sleep(2)
                text = driver.execute_script("return window.jupyterapp.shell.currentWidget.node.innerText;")
                lab.shot(f"panel-{panel}")
                assert "error" not in text.lower(), text
            lab.open(f"{assignment}/{name}.ipynb", what="reopened")

        # partial: only the first exercise done
        lab.replace_cell(first, solutions[first])
        lab.save()
        partial = lab.validate("partial")
        assert "failed" in partial.lower() or "error" in partial.lower(), partial
        assert "NotImplementedError" in partial, partial

        # the whole solution, typed into every solution cell
        _fill_all(lab, solutions)
        cells = lab.run_all()
        lab.shot("solved-run-all")
        errors = {c["index"]: error_text(c) for c in cells if error_text(c)}
        assert not errors, dump(cells)
        plots = _plot_cells(cells)
        assert plots, "no plot cell found"
        for index in plots:
            lab.scroll_to(index)
            lab.shot(f"plot-cell-{index}")
        cells = lab.cells()
        no_image = [i for i in plots if cells[i]["images"] == 0]
        assert not no_image, f"plot cells without an <img> in their output: {no_image}"
        lab.save()
        full = lab.validate("full")
        assert "success" in full.lower() and "passes all the tests" in full.lower(), full

        # a named bug, typed over the solution
        if len(ops) == 1:
            _, i1, i2, j1, j2 = ops[0]
            lab.retype(bug_gid, solutions[bug_gid][i1:i2], bug_answers[bug_gid][j1:j2]) \
                if solutions[bug_gid].count(solutions[bug_gid][i1:i2]) == 1 and i2 > i1 \
                else lab.replace_cell(bug_gid, bug_answers[bug_gid])
        else:
            for gid, text in bug_answers.items():
                if text != solutions[gid]:
                    lab.replace_cell(gid, text)
        # the student runs the cell they changed, then the tests the zoo says this bug fails
        lab.run_cell(lab.index_of(bug_gid))
        shown = {}
        for test_gid in variant.expect:
            cell = lab.run_cell(lab.index_of(test_gid))
            shown[test_gid] = error_text(cell)
            lab.shot(f"bug-{variant.name}-{test_gid}")
        failing = {gid: text for gid, text in shown.items() if text}
        assert failing, f"{variant.name}: no visible test failed: {shown}"
        for gid, text in failing.items():
            assert "/course/" not in text and "checks.py" not in text and "_fail" not in text, text
            assert text.count("\n") <= 2, f"{gid}: more than the calling line and the message:\n{text}"
        messages = "\n".join(failing.values())
        assert any(fragment in messages for fragment in variant.expect.values()), (variant.expect, messages)
        assert driver.execute_script(toasts) == 0, "a pop-up (news?) while working"
        lab.save()
        wrong = lab.validate("wrong")
        assert "failed" in wrong.lower() or "error" in wrong.lower(), wrong
        assert any(fragment in wrong for fragment in variant.expect.values()), (variant.expect, wrong)
        # no traceback into the course's code: no absolute path, no file:line (a failed cell's own source may
        # name its checks module in its import line, "course/masks_checks.py")
        assert "/course/" not in wrong and not re.search(r"\.py:\d+", wrong) and "_fail" not in wrong, wrong

    twins = sorted(p.name for p in workspace.rglob("*.py"))
    assert not twins, f"saving wrote {twins}"
    status = subprocess.run(["git", "status", "--porcelain", "release/"], cwd=REPO, text=True,
                            capture_output=True, check=True).stdout
    assert status == "", status


def _demo_course(path):
    """A scratch course with 01_two_keys released and one demo submission autograded."""
    assignment = "01_two_keys"
    root = REPOSITORY.scratch_copy(path, [assignment])
    release, answers = root.release_and_answers(assignment)
    nb = P.fill(release, answers)
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
            cell.source = WRITTEN
    root.submit(assignment, "demo-student", nb)
    root.autograde(assignment, "demo-student")
    return root, assignment


def test_instructor_seat(driver, tmp_path):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    root, assignment = _demo_course(tmp_path / "course")
    with seat("formgrader", f"--root={root.path}", log_name="formgrader") as server:
        lab = Lab(driver, server, ARTIFACTS, "formgrader")
        driver.get(f"{server.url}/lab?token={server.token}")
        lab.wait(lambda: driver.execute_script("return !!(window.jupyterapp && window.jupyterapp.shell)"), 120, "Lab")
        lab.js("await app.restored; await app.commands.execute('nbgrader:open-formgrader');")
        frame = lab.wait(lambda: driver.find_elements(By.CSS_SELECTOR, "iframe[src*='formgrader']"), 60,
                         "the formgrader tab")[0]

        def in_frame(css, what, timeout=60):
            driver.switch_to.default_content()
            driver.switch_to.frame(frame)
            return lab.wait(lambda: driver.find_elements(By.CSS_SELECTOR, css), timeout, what)

        rows = in_frame("td.name a", "the assignment list")
        assert [r.text for r in rows] == [assignment]
        driver.switch_to.default_content()
        lab.shot("assignments")

        # generate the release from the formgrader's button
        in_frame("td.assign a", "the generate button")[0].click()
        in_frame("#success-modal, #error-modal", "the generate result", 180)
        lab.wait(lambda: driver.execute_script(
            "const m = document.querySelector('#success-modal, #error-modal');"
            "return m && m.classList.contains('in') && m.innerText.trim().length > 0;"), 30, "the result to show")
        modal = driver.find_element(By.CSS_SELECTOR, "#success-modal, #error-modal")
        text, modal_id = modal.text, modal.get_attribute("id")
        driver.switch_to.default_content()
        lab.shot("generated")
        assert modal_id == "success-modal", text
        driver.switch_to.frame(frame)
        driver.find_element(By.CSS_SELECTOR, f"#{modal_id} .modal-footer button").click()
        lab.wait(lambda: not driver.find_elements(By.CSS_SELECTOR, ".modal.in"), 20, "the modal to close")

        # the assignment's name opens its source folder in Lab's file browser; open the notebook
        in_frame("td.name a", "the assignment list")[0].click()
        driver.switch_to.default_content()
        name = root.notebook_name(assignment)
        find_item = ("return Array.from(document.querySelectorAll('.jp-DirListing-item')).find("
                     "e => e.querySelector('.jp-DirListing-itemText').textContent.trim() === arguments[0]);")
        lab.wait(lambda: driver.execute_script(find_item, f"{name}.ipynb"), 30, "the source folder")
        time.sleep(1)  # the listing re-renders once more after navigating
        for _attempt in range(3):
            try:
                ActionChains(driver).double_click(driver.execute_script(find_item, f"{name}.ipynb")).perform()
                break
            except StaleElementReferenceException:
                time.sleep(0.5)
        lab.wait(lambda: driver.execute_script(
            "const w = window.jupyterapp.shell.currentWidget;"
            "return !!(w && w.context && w.context.isReady && w.context.path === arguments[0]);",
            f"source/{assignment}/{name}.ipynb"), 60, "the source notebook to open")
        lab.wait(lambda: lab.kernel_status() == "idle", 120, "the source notebook's kernel")
        time.sleep(1)
        sources = "\n".join(c["source"] for c in lab.cells())
        assert "### BEGIN SOLUTION" in sources and "### BEGIN HIDDEN TESTS" in sources
        lab.shot("source-notebook")

        # manual grading of the written answer of the autograded demo submission
        driver.execute_script("window.jupyterapp.shell.activateById(arguments[0]);", driver.execute_script(
            "return Array.from(window.jupyterapp.shell.widgets('main')).find(w => w.node.querySelector("
            "'iframe[src*=\"formgrader\"]')).id;"))
        for link in ("Manual Grading", assignment, name):
            driver.switch_to.default_content()
            driver.switch_to.frame(frame)
            lab.wait(lambda link=link: driver.find_elements(By.LINK_TEXT, link), 60, f"the link {link!r}")
            driver.find_element(By.LINK_TEXT, link).click()
        in_frame("a[href*='/formgrader/submissions/']", "the submission list")[0].click()
        in_frame("input.score, .manual input, .score input", "the manual grading form", 90)
        page = driver.find_element(By.TAG_NAME, "body").text
        answer = driver.find_element(By.XPATH, f"//*[contains(text(), {WRITTEN[:40]!r})]")
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", answer)
        time.sleep(0.5)
        driver.switch_to.default_content()
        lab.shot("manual-grading")
        assert WRITTEN[:40] in page, page[:2000]
    assert root.notebook("release", assignment).exists()
