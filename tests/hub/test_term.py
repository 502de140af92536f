"""A term of 01_two_keys on a real JupyterHub, in headless Chromium.

The instructor releases the assignment; amara (the solution) and bruno (a bug from the zoo) log
in through the hub's login page, fetch it in the Assignments panel, type their answers into the
notebook's cells, Validate, submit; amara submits again later. The instructor collects and
autogrades (the scores equal the one-machine batch for the same notebooks), generates and
releases feedback; each student fetches it and reads their own score, with no hidden test in
it. The instructor clicks the formgrader's buttons (generate, release, collect, autograde,
feedback) in the formgrader service's pages; the assistant types the hand grade into the
formgrader's manual-grading page; reading scores back goes through the formgrader's REST API with
each one's own hub token. Screenshots of every step in .artifacts/hub/<time>/.
"""

from __future__ import annotations

import pwd
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from conftest import ADMIN, ARTIFACTS
from hubclient import Person
from lab import Lab
from nboracle.classroom import pipeline as P
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from instructor import hub as H
from instructor.repository import REPO, REPOSITORY
from instructor.zoo import variants_for

A = "01_two_keys"
BUG = "attention_no_scale"
NAME = REPOSITORY.notebook_name(A)
FG = f"/services/{H.SERVICE}/formgrader"
WRITTEN = {"amara": "Two keys that match the query equally share its weight: each gets one half.",
           "bruno": "The weights are the scores themselves."}


class Seat:
    """What Lab's helper needs of a server: its URL and a token."""

    def __init__(self, url: str, token: str):
        self.url, self.token = url, token


def answers_of(student: str) -> dict[str, str]:
    solutions = P.solution_answers(P.read_nb(REPOSITORY.notebook("source", A)))
    if student == "amara":
        return solutions
    variant = next(v for v in variants_for(A) if v.name == BUG)
    return variant.answers(solutions)


def shot(driver, what: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot.n = getattr(shot, "n", 0) + 1
    driver.save_screenshot(str(ARTIFACTS / f"{shot.n:02d}-{what}.png"))


def wait(driver, condition, timeout=120, what="condition"):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.3).until(lambda d: condition(), message=what)


def browser_login(driver, hub, name: str) -> None:
    """The hub's login page, as a person: user name, password, Sign in; wait for their Lab."""
    driver.execute_cdp_cmd("Network.clearBrowserCookies", {})  # every path's: the hub's, the servers'
    driver.get(f"{hub.url}/hub/login")
    wait(driver, lambda: driver.find_elements(By.ID, "username_input"), 30, "the login form")
    driver.find_element(By.ID, "username_input").send_keys(name)
    driver.find_element(By.ID, "password_input").send_keys(hub.password(name))
    shot(driver, f"{name}-login")
    driver.find_element(By.ID, "login_submit").click()
    wait(driver, lambda: f"/user/{name}/lab" in driver.current_url and driver.execute_script(
        "return !!(window.jupyterapp && window.jupyterapp.shell)"), 240, f"{name}'s Lab after login")
    time.sleep(1)


def assignments_panel(driver, lab: Lab) -> None:
    # on a loaded machine Lab's shell is up before nbgrader's extension has registered its commands
    wait(driver, lambda: driver.execute_script(
        "return window.jupyterapp.commands.hasCommand('nbgrader:open-assignment-list')"), 120,
        "nbgrader's Assignment List command")
    lab.command("nbgrader:open-assignment-list")
    wait(driver, lambda: driver.find_elements(By.ID, "released_assignments_list"), 60, "the Assignments panel")


PANEL = {}  # what each student read in the Assignments panel: (name, what) -> text


def due_label(driver, section: str, timeout: int = 60) -> str:
    """The text the nboracle-due-dates extension wrote beside the assignment in ``section``."""
    css = f"#{section} .nboracle-due"
    wait(driver, lambda: any(e.text.strip() for e in driver.find_elements(By.CSS_SELECTOR, css)), timeout,
         f"the due date in {section}")
    return " | ".join(e.text.strip() for e in driver.find_elements(By.CSS_SELECTOR, css) if e.text.strip())


def press_row_button(driver, section: str, label: str, timeout: int = 120, assignment: str = A) -> None:
    """Click ``label`` in the row of ``assignment`` in ``section`` as a person would: the first such button that
    is shown and enabled, scrolled into view. The panel re-renders its lists on every refresh, so a button found
    may be gone or covered by the time it is clicked: then it is found again and clicked, until ``timeout``."""
    from selenium.common.exceptions import ElementNotInteractableException, StaleElementReferenceException

    xpath = (f"//div[@id='{section}']//div[contains(@class,'list_item')]"
             f"[.//*[contains(normalize-space(.),'{assignment}')]]"
             f"//button[normalize-space()='{label}']")

    def clicked() -> bool:
        try:
            button = next((b for b in driver.find_elements(By.XPATH, xpath) if b.is_displayed() and b.is_enabled()),
                          None)
            if button is None:
                return False
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", button)
            button.click()
            return True
        except (ElementNotInteractableException, StaleElementReferenceException):
            return False

    wait(driver, clicked, timeout, f"a click on {label} in {section}")


def count_rows(driver, section: str, assignment: str = A) -> int:
    return len(driver.find_elements(By.XPATH, f"//div[@id='{section}']//div[contains(@class,'list_item')]"
                                              f"[.//*[contains(normalize-space(.),'{assignment}')]]"))


def formgrader(person: Person, method: str, path: str, fg: str = FG, **kw):
    reply = requests_via(person, method, f"{fg}/api/{path}", **kw)
    assert reply.status_code == 200, f"{method} {path}: {reply.status_code} {reply.text[:500]}"
    body = reply.json()
    if isinstance(body, dict) and body.get("success") is False:
        raise AssertionError(f"{path}: {body.get('error') or body.get('log')}")
    return body


def requests_via(person: Person, method: str, path: str, **kw):
    import requests

    return requests.request(method, f"{person.url}{path}", headers={"Authorization": f"token {person.token}"},
                            timeout=600, **kw)


def show_formgrader(driver, hub, page: str, what: str) -> str:
    driver.get(f"{hub.url}{FG}/{page}")
    time.sleep(3)
    shot(driver, what)
    return driver.find_element(By.TAG_NAME, "body").text


def type_score(driver, grade_id: str, score: float) -> None:
    """On the manual-grading page, type ``score`` into the written cell's box and leave it (Tab):
    the page saves a score when its box changes, as for an assistant."""
    box = wait(driver, lambda: (driver.find_elements(By.CSS_SELECTOR, f"input.score[id='{grade_id}']") or [None])[0],
               60, f"the score box of {grade_id}")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", box)
    box.click()
    box.clear()
    box.send_keys(f"{score:g}", Keys.TAB)


def _saved(person, submission_id: str, grade_id: str):
    grades = formgrader(person, "GET", "grades", params={"submission_id": submission_id})
    return next(g["manual_score"] for g in grades if g["name"] == grade_id)


def fg_click(driver, hub, page: str, icon: str, what: str, row: str = A, failing: bool = False) -> str:
    """On a formgrader page, click the ``icon`` button of ``row`` (as the instructor does) and
    wait for nbgrader's success dialog; return its text (an error dialog fails the test; with
    ``failing``, the error dialog is expected and a success dialog fails it)."""
    driver.get(f"{hub.url}{FG}/{page}")
    xpath = (f"//tr[td[contains(normalize-space(.), '{row}')]]"
             f"//*[contains(concat(' ', normalize-space(@class), ' '), ' {icon} ')]")
    button = wait(driver, lambda: (driver.find_elements(By.XPATH, xpath) or [None])[0], 60, f"{icon} of {row}")
    time.sleep(0.5)
    button.click()
    wait(driver, lambda: driver.find_elements(By.CSS_SELECTOR, "#success-modal.in, #error-modal.in"),
         600, f"the dialog of {what}")
    time.sleep(0.8)
    shot(driver, f"formgrader-{what}")
    failed = driver.find_elements(By.CSS_SELECTOR, "#error-modal.in")
    text = (failed or driver.find_elements(By.CSS_SELECTOR, "#success-modal.in"))[0].text
    assert bool(failed) == failing, f"{what}: {text[:2000]}"
    return text


def click_through(driver, element, what: str) -> None:
    """Click ``element`` as a person does; when another element lies over it (the Assignment
    List's toolbar note overlapped the course menu's caret once, at (580, 81)), give the page 15 s
    to settle, then send the click to the element itself."""
    from selenium.common.exceptions import ElementClickInterceptedException, TimeoutException

    def clicked() -> bool:
        try:
            element.click()
        except ElementClickInterceptedException:
            time.sleep(0.5)
            return False
        return True

    try:
        wait(driver, clicked, 15, what)
    except TimeoutException:
        driver.execute_script("arguments[0].click();", element)


def student_works(driver, hub, name: str) -> tuple[Person, str]:
    """Log in, fetch, fill in, save, Validate, submit; return (person, Validate's text)."""
    browser_login(driver, hub, name)
    person = Person(hub.url, name, hub.password(name))
    lab = Lab(driver, Seat(f"{hub.url}/user/{name}", person.token), ARTIFACTS, f"{name}")
    assignments_panel(driver, lab)
    PANEL[name, "released"] = due_label(driver, "released_assignments_list")
    shot(driver, f"{name}-assignments-released")
    press_row_button(driver, "released_assignments_list", "Fetch")
    wait(driver, lambda: count_rows(driver, "fetched_assignments_list") >= 1, 60, "the fetched assignment")
    shot(driver, f"{name}-fetched")
    lab.open(f"{A}/{NAME}.ipynb", "opened")
    for gid, text in answers_of(name).items():
        lab.replace_cell(gid, text)
    for cell in lab.cells():  # the written answers (graded by hand)
        if cell["type"] == "markdown" and cell["solution"]:
            lab.replace_cell(cell["grade_id"], WRITTEN[name])
    lab.save()
    lab.shot("filled")
    validated = lab.validate(name)
    assignments_panel(driver, lab)
    press_row_button(driver, "fetched_assignments_list", "Submit")
    wait(driver, lambda: count_rows(driver, "submitted_assignments_list") >= 1, 120, "the submission listed")
    PANEL[name, "submitted"] = driver.find_element(By.ID, "submitted_assignments_list").text
    shot(driver, f"{name}-submitted")
    return person, validated


@pytest.fixture(scope="module")
def term(hub, driver):
    """The whole term, once; the tests below read what it left."""
    out = {}
    # --- the instructor releases 01_two_keys (generate, then release to the exchange)
    browser_login(driver, hub, "prof-ines")
    shot(driver, "prof-ines-lab")
    prof = Person(hub.url, "prof-ines", hub.password("prof-ines"))
    out["prof"] = prof
    # the due date is set before Generate, so the released notebook says it (DueDateCell); the
    # late-submission test below moves it to its own deadline
    from datetime import datetime, timedelta, timezone

    due = (datetime.now(timezone.utc) + timedelta(days=14)).replace(hour=17, minute=0, second=0, microsecond=0)
    formgrader(prof, "PUT", f"assignment/{A}", json={"duedate_notimezone": due.strftime("%Y-%m-%dT%H:%M:%S"),
                                                     "duedate_timezone": "UTC"})
    out["due"] = due
    show_formgrader(driver, hub, "manage_assignments", "formgrader-before-release")
    fg_click(driver, hub, "manage_assignments", "glyphicon-education", "generated")
    fg_click(driver, hub, "manage_assignments", "glyphicon-cloud-upload", "released")
    out["released_page"] = show_formgrader(driver, hub, "manage_assignments", "formgrader-released")

    # --- two students
    amara, out["alice_validate"] = student_works(driver, hub, "amara")
    bruno, out["bob_validate"] = student_works(driver, hub, "bruno")
    # amara submits again later (the panel's Submit on her fetched copy)
    browser_login(driver, hub, "amara")
    lab = Lab(driver, Seat(f"{hub.url}/user/amara", amara.token), ARTIFACTS, "amara-again")
    assignments_panel(driver, lab)
    time.sleep(2)
    press_row_button(driver, "fetched_assignments_list", "Submit")
    wait(driver, lambda: "2" in driver.find_element(By.ID, "submitted_assignments_list").text
         or count_rows(driver, "submitted_assignments_list") >= 2, 60, "amara's second submission")
    time.sleep(1)
    shot(driver, "amara-submitted-again")
    out["amara"], out["bruno"] = amara, bruno

    # --- the instructor collects and autogrades
    browser_login(driver, hub, "prof-ines")
    fg_click(driver, hub, "manage_assignments", "glyphicon-cloud-download", "collected")
    for student in ("amara", "bruno"):
        fg_click(driver, hub, f"manage_submissions/{A}", "glyphicon-flash", f"autograded-{student}", row=student)
    out["submissions"] = formgrader(prof, "GET", f"submissions/{A}")
    out["graded_page"] = show_formgrader(driver, hub, f"manage_submissions/{A}", "formgrader-autograded")

    # --- the assistant grades amara's written answer by hand: types the score into the
    # formgrader's manual-grading page (the API only finds the page and reads the result back)
    browser_login(driver, hub, "ta-jonas")
    ta = Person(hub.url, "ta-jonas", hub.password("ta-jonas"))
    out["ta"] = ta
    notebooks = formgrader(ta, "GET", f"submitted_notebooks/{A}/{NAME}")
    alice_nb = next(n for n in notebooks if n["student"] == "amara")
    grades = formgrader(ta, "GET", "grades", params={"submission_id": alice_nb["id"]})
    written = [g for g in grades if g["auto_score"] is None]
    assert written, grades
    out["manual_page"] = show_formgrader(driver, hub, f"submissions/{alice_nb['id']}", "ta-jonas-manual-grading")
    for grade in written:
        type_score(driver, grade["name"], grade["max_score"])
        wait(driver, lambda g=grade: _saved(ta, alice_nb["id"], g["name"]) == g["max_score"], 60,
             f"the score typed for {grade['name']} saved")
    shot(driver, "ta-jonas-manual-grade-typed")
    out["written"] = written
    out["final"] = formgrader(ta, "GET", f"submissions/{A}")

    browser_login(driver, hub, "prof-ines")
    fg_click(driver, hub, "manage_assignments", "glyphicon-comment", "feedback-generated")
    fg_click(driver, hub, "manage_assignments", "glyphicon-envelope", "feedback-released")
    show_formgrader(driver, hub, f"manage_submissions/{A}", "formgrader-feedback-released")

    # --- each student fetches their feedback
    out["feedback"] = {name: fetch_feedback(driver, hub, name, person) for name, person in (("amara", amara),
                                                                                             ("bruno", bruno))}
    return out


def fetch_feedback(driver, hub, name: str, person: Person, login: bool = True,
                   button: str = "Fetch Feedback") -> tuple[str, str, str]:
    """In the Assignments panel, Fetch Feedback (``button``: its label in the course's language); open the page
    in the browser: (its path, HTML, text). ``login``: log in first (else the browser is in ``name``'s Lab already)."""
    if login:
        browser_login(driver, hub, name)
    lab = Lab(driver, Seat(f"{hub.url}/user/{name}", person.token), ARTIFACTS, f"{name}-feedback")
    assignments_panel(driver, lab)
    time.sleep(2)
    press_row_button(driver, "submitted_assignments_list", button)
    found = []

    def feedback_file():
        listing = person.server("GET", f"api/contents/{A}/feedback").json()
        for stamp in listing.get("content") or []:
            inner = person.server("GET", f"api/contents/{stamp['path']}").json()
            found[:] = [c["path"] for c in inner.get("content") or [] if c["name"].endswith(".html")]
        return bool(found)

    wait(driver, feedback_file, 60, f"{name}'s feedback in their home")
    shot(driver, f"{name}-feedback-fetched")
    driver.get(f"{hub.url}/user/{name}/files/{found[0]}")
    time.sleep(2)
    shot(driver, f"{name}-feedback-page")
    return found[0], driver.page_source, driver.find_element(By.TAG_NAME, "body").text


def test_validate_tells_each_student(term):
    assert "passes" in term["alice_validate"].lower() or "success" in term["alice_validate"].lower(), \
        term["alice_validate"]
    assert "failed" in term["bob_validate"].lower() or "error" in term["bob_validate"].lower(), term["bob_validate"]


def test_collected_latest_and_graded_as_on_one_machine(term, hub, tmp_path):
    scores = {s["student"]: s["score"] for s in term["submissions"] if s["autograded"]}
    assert set(scores) == {"amara", "bruno"}, term["submissions"]
    assert scores["amara"] == term["submissions"][0]["max_score"] or scores["amara"] == 12, scores
    assert scores["bruno"] < scores["amara"], scores
    # the one-machine batch on the very notebooks the hub collected
    course = hub.layout.course
    root = REPOSITORY.scratch_copy(tmp_path / "batch", [A])
    for student in ("amara", "bruno"):
        root.submit(A, student, P.read_nb(course / "submitted" / student / A / f"{NAME}.ipynb"))
    root.autograde(A)
    batch = {s: r.auto_score for s, r in root.results(A).items()}
    assert batch == scores, (batch, scores)
    # amara's second submission is the one collected (the exchange keeps both)
    inbound = hub.layout.exchange / H.COURSE_ID / "inbound"
    assert len([p for p in inbound.iterdir() if p.name.startswith(f"amara+{A}+")]) == 2


def test_each_student_reads_own_feedback_without_hidden_tests(term):
    source = REPOSITORY.notebook("source", A).read_text()
    hidden = re.findall(r"### BEGIN HIDDEN TESTS\\n(.*?)### END HIDDEN TESTS", source, re.S)
    assert hidden
    hidden_lines = {line.strip().strip('",').replace('\\"', '"') for block in hidden
                    for line in block.split("\\n") if len(line.strip()) > 25}
    scores = {s["student"]: s for s in term["final"]}
    assert scores["amara"]["score"] == scores["amara"]["max_score"], "the assistant's points count"
    for name in ("amara", "bruno"):
        path, html, text = term["feedback"][name]
        shown = re.search(r"\(Score: ([\d.]+) / ([\d.]+)\)", text)
        assert shown, text[:400]
        assert (float(shown[1]), float(shown[2])) == (scores[name]["score"], scores[name]["max_score"]), \
            (name, shown[0], scores[name])
        assert "HIDDEN TESTS" not in html
        leaked = [line for line in hidden_lines if line in html]
        assert not leaked, f"{name}'s feedback shows hidden test lines: {leaked[:3]}"
        assert "Fontconfig" not in html, f"{name}'s feedback shows the sandbox's font warning"
    assert "attention" in term["feedback"]["bruno"][2].lower()


def test_the_formgrader_ran_sandboxed(hub):
    log = (hub.state / "hub" / "jupyterhub.log").read_text()
    assert "refuses to start" not in log
    probe = subprocess.run(["/usr/sbin/runuser", "-u", H.GRADER, "--", str(P.BIN / "python"), "-m", "nboracle.grader.sandbox"],
                           cwd=hub.layout.course, capture_output=True, text=True,
                           env={"PATH": f"{P.BIN}:/usr/bin:/bin", "PYTHONPATH": str(REPO),
                                "HOME": str(hub.layout.user_home(H.GRADER))})
    assert '"ok": true' in probe.stdout, probe.stdout + probe.stderr


# ---------------------------------------------------------------- who can see what


def as_user(user: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["/usr/sbin/runuser", "-u", user, "--", *argv], capture_output=True, text=True, cwd="/")


def test_a_student_cannot_read_others_work_the_gradebook_or_the_sources(term, hub):
    L = hub.layout
    alice_home = L.user_home("amara")
    feedback = sorted(alice_home.glob(f"{A}/feedback/*/*.html"))
    assert feedback
    private = [alice_home / A / f"{NAME}.ipynb", feedback[0], L.course / "gradebook.db",
               L.course / "source" / A / f"{NAME}.ipynb", L.course / "submitted" / "amara" / A / f"{NAME}.ipynb",
               L.course / "autograded" / "amara" / A / f"{NAME}.ipynb", REPO / "source" / A / f"{NAME}.ipynb"]
    for path in private:
        assert path.exists(), path
        proc = as_user("bruno", "cat", str(path))
        assert proc.returncode != 0 and "Permission denied" in proc.stderr, f"bruno reads {path}"
    # the exchange: bruno may hand in, not list what others handed in or the feedback folder
    course = L.exchange / H.COURSE_ID
    for folder in (course / "inbound", course / "feedback"):
        proc = as_user("bruno", "ls", str(folder))
        assert proc.returncode != 0 and "Permission denied" in proc.stderr, f"bruno lists {folder}"
    # what is released to everyone holds no hidden test
    released = (course / "outbound" / A / f"{NAME}.ipynb").read_text()
    assert "HIDDEN" not in released and "BEGIN SOLUTION" not in released


def _not_served(reply) -> bool:
    return reply.status_code in (302, 403, 404)


def test_a_students_token_reaches_only_their_own_things(term, hub):
    import requests

    bruno = Person(hub.url, "bruno", hub.password("bruno"))
    assert bruno.hub("GET", "/user").json()["name"] == "bruno"
    assert bruno.hub("GET", "/users").status_code == 403
    assert bruno.hub("GET", "/users/amara").status_code in (403, 404)
    assert bruno.hub("POST", "/users/amara/tokens", json={}).status_code in (403, 404)
    assert bruno.hub("GET", "/groups").status_code == 403

    def get(path):
        return requests.get(f"{hub.url}{path}", headers={"Authorization": f"token {bruno.token}"},
                            allow_redirects=False, timeout=60)

    for path in (f"/user/amara/api/contents/{A}", f"/user/amara/files/{A}/{NAME}.ipynb",
                 f"{FG}/api/submissions/{A}", f"{FG}/api/students",
                 f"/services/{H.SERVICE}/api/contents/gradebook.db",
                 f"/services/{H.SERVICE}/files/source/{A}/{NAME}.ipynb"):
        reply = get(path)
        assert _not_served(reply), f"bruno's token gets {path}: {reply.status_code}"
    assert get(f"/user/bruno/api/contents/{A}").status_code == 200


def test_the_assistant_grades_but_is_not_an_admin(term, hub):
    ta = term["ta"]
    assert requests_via(ta, "GET", f"{FG}/api/submissions/{A}").status_code == 200
    assert ta.hub("GET", "/users").status_code == 403
    assert ta.hub("POST", "/users/amara/server").status_code in (403, 404)
    assert not ta.hub("GET", "/user").json().get("admin")
    assert WRITTEN["amara"][:40] in term["manual_page"], "the manual-grading page shows amara's answer"
    reply = ta.server("GET", f"api/contents/{A}", user="amara", allow_redirects=False)
    assert _not_served(reply), reply.status_code


# ---------------------------------------------------------------- a late submission, graded in the sandbox


def as_student(hub, name: str, *args: str) -> subprocess.CompletedProcess:
    """``nbgrader ARGS`` as the student, with the environment the hub gives their server."""
    L = hub.layout
    env = {"HOME": str(L.user_home(name)), "USER": name, "LOGNAME": name, "LANG": "C.UTF-8",
           "PATH": f"{P.BIN}:/usr/bin:/bin", "PYTHONPATH": str(REPO),
           "JUPYTER_CONFIG_PATH": ":".join(map(str, (L.student_etc, L.common, REPO)))}
    proc = subprocess.run(["/usr/sbin/runuser", "-u", name, "--", str(P.BIN / "nbgrader"), *args],
                          cwd=L.user_home(name), env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


PROBE = '''
import json as _json, os as _os
def _reads(path):
    try:
        open(path, "rb").read(1)
        return True
    except Exception:
        return False
print("PROBE " + _json.dumps({"env": sorted(k for k in _os.environ if "TOKEN" in k or k.startswith("JUPYTERHUB")),
                             "gradebook": _reads(%r), "source": _reads(%r), "amara": _reads(%r)}))
'''


def test_the_student_reads_the_due_date_in_the_fetched_notebook(term, hub):
    """nbgrader's Assignment List shows no due date: the notebook amara fetched says it, under its title
    (screenshot amara-opened)."""
    fetched = P.read_nb(hub.layout.user_home("amara") / A / f"{NAME}.ipynb")
    said = [cell for cell in fetched.cells if cell.source.startswith("**Due:")]
    assert len(said) == 1 and fetched.cells.index(said[0]) == 1, [c.source[:80] for c in fetched.cells[:3]]
    assert f"{term['due']:%A %d %B %Y, %H:%M} UTC" in said[0].source


def test_the_assignment_list_says_the_due_date(term):
    """nbgrader's Assignment List shows no due date; with the nboracle-due-dates extension the
    released assignment says it, and when it is (screenshot amara-assignments-released)."""
    import re

    due = term["due"]
    said = PANEL["amara", "released"]
    assert f"Due {due:%a %d %b %Y, %H:%M} UTC" in said, said
    assert re.search(r"\(in 1[34] days\)", said), said
    assert "after the due date" not in PANEL["amara", "submitted"], PANEL["amara", "submitted"]


def test_a_late_submission_is_marked_late_graded_sandboxed_and_alone(term, hub, driver):
    """chidi (through nbgrader as her own user, not the browser) hands in after the deadline a
    notebook whose code looks for the grader's tokens and files; re-collecting grades her
    alone: amara's manual grade and bruno's score stay."""
    import json

    from nbgrader.api import Gradebook

    L, prof = hub.layout, term["prof"]
    from datetime import datetime, timezone

    # the deadline passes now: after amara's and bruno's submissions, before chidi's
    deadline = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    formgrader(prof, "PUT", f"assignment/{A}", json={"duedate_notimezone": deadline, "duedate_timezone": "UTC"})
    # a moved due date reaches students when the assignment is generated and released again
    formgrader(prof, "POST", f"assignment/{A}/assign")
    formgrader(prof, "POST", f"assignment/{A}/unrelease")
    formgrader(prof, "POST", f"assignment/{A}/release")
    time.sleep(1.5)
    as_student(hub, "chidi", "fetch_assignment", A)
    mine = L.user_home("chidi") / A / f"{NAME}.ipynb"
    answers = answers_of("amara")
    first = next(iter(answers))
    answers[first] += PROBE % (str(L.course / "gradebook.db"), str(L.course / "source" / A / f"{NAME}.ipynb"),
                               str(L.course / "submitted" / "amara" / A / f"{NAME}.ipynb"))
    P.write_nb(P.fill(P.read_nb(mine), answers), mine)
    subprocess.run(["chown", "chidi:chidi", str(mine)], check=True)
    as_student(hub, "chidi", "submit", A)

    before = {s["student"]: s for s in formgrader(prof, "GET", f"submissions/{A}")}
    formgrader(prof, "POST", f"assignment/{A}/collect")
    formgrader(prof, "POST", f"submission/{A}/chidi/autograde")
    after = {s["student"]: s for s in formgrader(prof, "GET", f"submissions/{A}")}
    assert after["chidi"]["score"] == 12, after["chidi"]
    for name in ("amara", "bruno"):
        assert after[name]["score"] == before[name]["score"], (name, before[name], after[name])
    assert after["amara"]["score"] == after["amara"]["max_score"], "the assistant's grade is kept"

    with Gradebook(f"sqlite:///{L.course / 'gradebook.db'}") as gb:
        assert gb.find_submission(A, "chidi").total_seconds_late > 0
        assert gb.find_submission(A, "amara").total_seconds_late == 0

    graded = P.read_nb(L.course / "autograded" / "chidi" / A / f"{NAME}.ipynb")
    lines = [line for cell in graded.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
             for line in out.get("text", "").splitlines() if line.startswith("PROBE ")]
    assert lines, "the probe ran"
    seen = json.loads(lines[0][len("PROBE "):])
    assert seen == {"env": [], "gradebook": False, "source": False, "amara": False}, seen

    # chidi's Assignments panel: the due date now in force, and her hand-in after it
    browser_login(driver, hub, "chidi")
    chidi = Person(hub.url, "chidi", hub.password("chidi"))
    assignments_panel(driver, Lab(driver, Seat(f"{hub.url}/user/chidi", chidi.token), ARTIFACTS, "chidi"))
    moved = datetime.strptime(deadline, "%Y-%m-%dT%H:%M:%S")
    fetched = due_label(driver, "fetched_assignments_list")
    assert f"Due {moved:%a %d %b %Y, %H:%M} UTC (passed)" in fetched, fetched
    wait(driver, lambda: "after the due date" in driver.find_element(By.ID, "submitted_assignments_list").text,
         60, "chidi's submission marked after the due date")
    shot(driver, "chidi-assignments-late")


def test_a_server_stopped_mid_work_keeps_the_work(term, hub):
    """chidi saves half her work, her server is stopped (the hub culls it, or she logs out), and
    starts again: the notebook is as she saved it (through her server's REST API)."""
    chidi = Person(hub.url, "chidi", hub.password("chidi"))
    chidi.start()
    path = f"{A}/{NAME}.ipynb"
    model = chidi.server("GET", f"api/contents/{path}").json()
    cells = model["content"]["cells"]
    cells[-1]["source"] = "half done: chidi"
    saved = chidi.server("PUT", f"api/contents/{path}", json={"type": "notebook", "content": model["content"]})
    assert saved.status_code == 200, saved.text[:300]
    chidi.stop()
    assert not chidi.hub("GET", "/users/chidi").json().get("servers"), "the server stopped"
    chidi.start()
    again = chidi.server("GET", f"api/contents/{path}").json()
    assert again["content"]["cells"][-1]["source"] == "half done: chidi"
    chidi.stop()


# ---------------------------------------------------------------- the exchange believes the server, not the student


def test_the_exchange_believes_the_server_not_the_students_nbgrader(term, hub, driver):
    """chidi hands in under amara's name (``--student=amara``): the lecturer's Collect refuses it
    in an error dialog naming chidi's account, and amara's graded work stays hers. bruno, after the
    deadline and after his submission was graded, hands in again with his nbgrader told another
    time (``--Exchange.timezone=Etc/GMT+12`` and a fixed ``timestamp_format``): the graded one
    stays, the new one is kept beside it recorded at the time the server saw it arrive, and the
    same dialog tells the lecturer how to take it."""
    from datetime import datetime

    from nbgrader.utils import parse_utc

    L = hub.layout
    before = {s["student"]: s["score"] for s in formgrader(term["prof"], "GET", f"submissions/{A}")}
    secret = L.course / "submitted" / "amara" / A / "submission_secret.txt"
    amaras = secret.read_text()
    as_student(hub, "chidi", "submit", A, "--student=amara")
    as_student(hub, "bruno", "submit", A, "--Exchange.timezone=Etc/GMT+12",
               "--Exchange.timestamp_format=2020-01-06 08:00:00.000000 UTC")
    sent = datetime.utcnow()
    browser_login(driver, hub, "prof-ines")
    told = fg_click(driver, hub, "manage_assignments", "glyphicon-cloud-download", "collect-refused", failing=True)
    assert "REFUSED 1 submission" in told and "the account chidi handed it in, in the name of amara" in told, told
    assert "NOT REPLACED: bruno handed 01_two_keys in again" in told and "replace_graded=True" in told, told
    assert secret.read_text() == amaras, "amara's collected work is hers"
    assert list((L.course / "refused" / "chidi" / A).iterdir()), "a copy of the refused submission for the lecturer"
    (kept,) = (L.course / "resubmitted" / "bruno" / A).iterdir()
    arrived = parse_utc((kept / "timestamp.txt").read_text())
    assert abs((arrived - sent).total_seconds()) < 90, (arrived, sent)
    assert (kept / "timestamp-claimed.txt").read_text().startswith("2020-01-06 08:00:00")
    after = {s["student"]: s["score"] for s in formgrader(term["prof"], "GET", f"submissions/{A}")}
    assert after == before, (before, after)
    again = fg_click(driver, hub, "manage_assignments", "glyphicon-cloud-download", "collect-again")
    assert "reported before" in again and "NOT REPLACED" not in again, again


# ---------------------------------------------------------------- the term's roster, export, extension, backup


def hub_command(hub, *args: str, state: Path | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """``python -m instructor.hub --state <the term> ARGS`` as the lecturer (root) runs it (``state``: another
    state folder); ``check``: it must succeed."""
    proc = subprocess.run([str(P.BIN / "python"), "-m", "instructor.hub", f"--state={state or hub.state}", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={"PATH": f"{P.BIN}:/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONPATH": str(REPO), "LANG": "C.UTF-8"})
    assert not check or proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def read_csv(path) -> list[dict]:
    import csv

    with open(path, newline="", encoding="utf-8-sig") as handle:  # the LMS files carry a byte-order mark
        return list(csv.DictReader(handle))


def test_a_student_joins_and_leaves_mid_term_without_a_restart(term, hub, tmp_path):
    """The roster's names are in the formgrader; a student added from a CSV while the others
    work logs in with a first password of their own; nobody's server restarts; a dropped
    student can no longer log in."""
    prof = term["prof"]
    # the hub's administrator is a role of its own (conftest: admin add before the start), no lecturer's
    assert hub_command(hub, "admin", "list").stdout.split() == [ADMIN]
    olga = Person(hub.url, ADMIN, hub.password(ADMIN))
    assert olga.hub("GET", "/user").json()["admin"] and not prof.hub("GET", "/user").json()["admin"]
    students = {s["id"]: s for s in formgrader(prof, "GET", "students")}
    assert (students["amara"]["first_name"], students["amara"]["last_name"], students["amara"]["email"]) == \
        ("Amara", "Okeke", "amara.okeke@uni.example"), students["amara"]

    def started():
        return {n: olga.hub("GET", f"/users/{n}").json()["servers"][""]["started"] for n in ("amara", "bruno")}

    before = started()
    joining = tmp_path / "joining.csv"
    joining.write_text("id,first_name,last_name,email,section\ndara,Dara,Quinn,dara.quinn@uni.example,B\n")
    out = hub_command(hub, "roster", "import", str(joining)).stdout
    assert "no server was restarted" in out, out
    assert started() == before, "a roster change restarted a server"
    passwords = {hub.password(n) for n in ("amara", "bruno", "chidi", "dara")}
    assert len(passwords) == 4 and all(len(p) >= 12 for p in passwords), "first passwords are random, one each"
    dara = Person(hub.url, "dara", hub.password("dara"))
    assert dara.hub("GET", "/user").json()["name"] == "dara"
    assert "dara" in {s["id"] for s in formgrader(prof, "GET", "students")}

    leaving = tmp_path / "leaving.csv"
    leaving.write_text("id,first_name,last_name,email,section\neli,Eli,Moreau,eli.moreau@uni.example,A\n")
    hub_command(hub, "roster", "import", str(leaving))
    password = hub.password("eli")
    Person(hub.url, "eli", password)
    hub_command(hub, "roster", "drop", "eli")
    with pytest.raises(PermissionError):
        Person(hub.url, "eli", password)
    assert olga.hub("GET", "/users/eli").status_code == 404
    assert started() == before


SECOND = "sorting-example"  # the second course: the example course of another subject (examples/)
EXAMPLE = REPO / "examples" / "sorting_course"
A2 = "01_numpy_warmup"
SECOND_ROSTER = """id,first_name,last_name,email,section,role
prof-mina,Mina,Haddad,mina.haddad@uni.example,,instructor
ta-jonas,Jonas,Berg,jonas.berg@uni.example,,ta
amara,Amara,Okeke,amara.okeke@uni.example,E,student
fola,Fola,Adeyemi,fola.adeyemi@uni.example,E,student
"""


def test_a_second_course_on_the_same_hub(term, hub, driver, tmp_path):
    """`course add` between classes: a second course (the example course of another subject, with
    its own nbgrader config) with its own roster, formgrader, gradebook and export; people on both
    rosters keep one account (the Vietnamese edition is added too, for the next test); after the restart each
    student's Assignment List offers their own courses only, the second course's instructor reaches her formgrader only, and
    the first course's term is as it was. A student on both rosters of courses with an assignment
    of the same name is refused (both would be fetched into ~/<assignment>/)."""
    first = tmp_path / "first-before.csv"
    hub_command(hub, "export", "--to", str(first))
    roster = tmp_path / "second.csv"
    roster.write_text(SECOND_ROSTER)

    def course_add(*extra):
        return hub_command(hub, "course", "add", SECOND, "--roster", str(roster), *extra, check=False)

    clash = course_add()  # this course's chapters again, with amara in both classes
    assert clash.returncode != 0 and "amara" in clash.stderr and A in clash.stderr, clash.stdout + clash.stderr
    assert not (hub.state / "courses.json").exists() and not (hub.state / "courses").exists(), "nothing recorded"
    added = course_add("--source", str(EXAMPLE / "source"))  # its own config, beside its source/
    assert added.returncode == 0, added.stdout + added.stderr
    assert f"/services/formgrader-{SECOND}/" in added.stdout and "make hub-stop" in added.stdout, added.stdout
    assert str(EXAMPLE / "nbgrader_config.py") in added.stdout, added.stdout
    again = course_add("--source", str(EXAMPLE / "source"))
    assert again.returncode != 0 and "already has the course" in again.stderr, again.stderr
    vi_added = add_the_vietnamese_edition(hub, tmp_path)  # the next test's course, started by the same restart
    assert f"/services/formgrader-{VI}/" in vi_added and "its language: vi" in vi_added, vi_added
    passwords = {n: hub.password(n) for n in ("amara", "ta-jonas")}
    started = hub.restart()
    assert f"course {SECOND}" in started, started
    assert {n: hub.password(n) for n in passwords} == passwords, "one account, one password, for both courses"

    second_fg = f"/services/formgrader-{SECOND}/formgrader"
    mina = Person(hub.url, "prof-mina", hub.password("prof-mina"))
    jonas = Person(hub.url, "ta-jonas", hub.password("ta-jonas"))
    prof = Person(hub.url, "prof-ines", hub.password("prof-ines"))
    assert not mina.hub("GET", "/user").json()["admin"], "another course's instructor is no hub admin"
    assert _not_served(requests_via(mina, "GET", f"{FG}/api/assignments", allow_redirects=False))
    assert formgrader(jonas, "GET", "assignments") and isinstance(formgrader(jonas, "GET", "assignments", fg=second_fg), list)
    formgrader(mina, "POST", f"assignment/{A2}/assign", fg=second_fg)
    formgrader(mina, "POST", f"assignment/{A2}/release", fg=second_fg)
    students = {s["id"]: s for s in formgrader(mina, "GET", "students", fg=second_fg)}
    assert set(students) == {"amara", "fola"} and students["fola"]["last_name"] == "Adeyemi", students

    # fola, of the second course only: her Assignment List, Fetch, her answers, Submit
    browser_login(driver, hub, "fola")
    fola = Person(hub.url, "fola", hub.password("fola"))
    lab = Lab(driver, Seat(f"{hub.url}/user/fola", fola.token), ARTIFACTS, "fola")
    assignments_panel(driver, lab)
    press_row_button(driver, "released_assignments_list", "Fetch", assignment=A2)
    wait(driver, lambda: count_rows(driver, "fetched_assignments_list", A2) >= 1, 60, "fola's fetched assignment")
    source = P.read_nb(next((EXAMPLE / "source" / A2).glob("*.ipynb")))
    mine = hub.layout.user_home("fola") / A2 / next((EXAMPLE / "source" / A2).glob("*.ipynb")).name
    P.write_nb(P.fill(P.read_nb(mine), P.solution_answers(source)), mine)
    subprocess.run(["chown", "fola:fola", str(mine)], check=True)
    press_row_button(driver, "fetched_assignments_list", "Submit", assignment=A2)
    wait(driver, lambda: count_rows(driver, "submitted_assignments_list", A2) >= 1, 120, "fola's submission listed")
    shot(driver, "fola-second-course-submitted")

    def courses(person: Person) -> list[str]:
        person.start()
        reply = requests_via(person, "GET", f"/user/{person.name}/courses").json()
        assert reply["success"], reply
        return sorted(reply["value"])

    amara, bruno = (Person(hub.url, n, hub.password(n)) for n in ("amara", "bruno"))
    assert courses(fola) == [SECOND]
    assert courses(amara) == sorted([SECOND, H.COURSE_ID])
    assert courses(bruno) == [H.COURSE_ID]
    # each lecturer alone in her course: neither is a hub admin, neither opens the other's formgrader
    # (its gradebook, students and hidden tests) nor any student's server, running as they are
    assert not prof.hub("GET", "/user").json()["admin"], "the first course's instructor is no hub admin either"
    assert _not_served(requests_via(prof, "GET", f"{second_fg}/api/assignments", allow_redirects=False))
    assert _not_served(requests_via(prof, "GET", f"/services/formgrader-{SECOND}/api/contents", allow_redirects=False))
    for lecturer, student in ((prof, "fola"), (prof, "amara"), (mina, "amara"), (mina, "bruno")):
        assert _not_served(lecturer.server("GET", "api/contents", user=student, allow_redirects=False)), student
        assert lecturer.hub("POST", f"/users/{student}/server").status_code in (403, 404), student
        assert lecturer.hub("GET", f"/users/{student}").status_code in (403, 404), student
    assert prof.hub("GET", "/users").status_code == mina.hub("GET", "/users").status_code == 403
    # amara's panel offers both of her courses in its course menu
    browser_login(driver, hub, "amara")
    assignments_panel(driver, Lab(driver, Seat(f"{hub.url}/user/amara", amara.token), ARTIFACTS, "amara-courses"))
    menu = wait(driver, lambda: (driver.find_elements(By.CSS_SELECTOR, "#course_list_dropdown:not([disabled])")
                                 or [None])[0], 60, "the panel's course menu")
    click_through(driver, menu, "the panel's course menu")
    wait(driver, lambda: {e.text.strip() for e in driver.find_elements(By.CSS_SELECTOR, "#course_list li")}
         == {SECOND, H.COURSE_ID}, 60, "amara's two courses in the panel's menu")
    shot(driver, "amara-two-courses")
    second_item = next(e for e in driver.find_elements(By.CSS_SELECTOR, "#course_list li") if e.text.strip() == SECOND)
    second_item.click()  # the example's assignment is hers to fetch; her 01_two_keys stays with the first course
    wait(driver, lambda: count_rows(driver, "released_assignments_list", A2) == 1, 60, "the second course's assignment")
    assert count_rows(driver, "fetched_assignments_list", A) == 0
    shot(driver, "amara-second-course")
    # dara, of the first course only, asks her server to fetch the second course's assignment (what the panel's
    # Fetch sends): nothing is fetched, and the listing it answers with has nothing of that course
    dara = Person(hub.url, "dara", hub.password("dara"))
    dara.start()
    reply = requests_via(dara, "POST", "/user/dara/assignments/fetch", data={"course_id": SECOND, "assignment_id": A2})
    assert reply.status_code == 200 and reply.json() == {"success": True, "value": []}, reply.text[:300]
    assert not (hub.layout.user_home("dara") / A2).exists(), "dara fetched from a course she is not in"

    # the second course's instructor collects and autogrades in her course: fola full marks there, nowhere else
    formgrader(mina, "POST", f"assignment/{A2}/collect", fg=second_fg)
    formgrader(mina, "POST", f"submission/{A2}/fola/autograde", fg=second_fg)
    graded = {s["student"]: s for s in formgrader(mina, "GET", f"submissions/{A2}", fg=second_fg)}
    automatic = sum(c.metadata.nbgrader.get("points", 0) for c in source.cells if c.metadata.get("nbgrader", {}).get(
        "grade") and not (c.metadata.nbgrader.get("solution") and c.cell_type == "markdown"))
    assert graded["fola"]["score"] == automatic > 0, (graded["fola"], automatic)  # every automatic point
    assert "fola" not in {s["student"] for s in formgrader(prof, "GET", f"submissions/{A}")}
    second_grades = tmp_path / "second-grades.csv"
    out = hub_command(hub, "export", "--course", SECOND, "--to", str(second_grades)).stdout
    assert SECOND in out, out
    rows = {r["student_id"]: r for r in read_csv(second_grades) if r["assignment"] == A2}
    assert set(rows) == {"amara", "fola"} and rows["fola"]["submitted"] == "yes" and rows["amara"]["submitted"] == "no"
    assert rows["fola"]["email"] == "fola.adeyemi@uni.example"
    first_after = tmp_path / "first-after.csv"
    hub_command(hub, "export", "--to", str(first_after))
    assert read_csv(first_after) == read_csv(first), "the first course's term is as it was"
    # the course list and its rosters, for the lecturer
    listed = hub_command(hub, "course", "list").stdout
    assert H.COURSE_ID in listed and f"/services/formgrader-{SECOND}/" in listed, listed
    assert "fola" in hub_command(hub, "roster", "--course", SECOND, "list").stdout


VI = "attention-vi"  # the Vietnamese edition as a course of its own (docs/TRANSLATING.md), added beside SECOND
VI_FG = f"/services/formgrader-{VI}/formgrader"
BUG_CAUSE = "the scores are not divided by sqrt(d_k)"  # the likely cause BUG's hidden tests name
VI_ROSTER = """id,first_name,last_name,email,section,role
prof-linh,Linh,Nguyễn,linh.nguyen@uni.example,,instructor
ta-jonas,Jonas,Berg,jonas.berg@uni.example,,ta
vy,Vy,Trần,vy.tran@uni.example,V,student
"""


def add_the_vietnamese_edition(hub, tmp_path: Path) -> str:
    """The recipe of docs/JUPYTERHUB.md: `make translate` writes editions/vi/source/ (git-ignored; here
    chapter 01, as it does), then `course add attention-vi --roster lop.csv --source editions/vi/source`
    (its config beside it, c.MessageCatalog.language = "vi"); what course add printed."""
    from instructor import translate as TR

    source = TR.build_sources("vi", assignments=[A]).path / "source"
    roster = tmp_path / "lop.csv"
    roster.write_text(VI_ROSTER, encoding="utf-8")
    return hub_command(hub, "course", "add", VI, "--roster", str(roster), "--source", str(source)).stdout


def server_environment(name: str) -> dict[str, str]:
    """The environment of ``name``'s running server (root reads /proc), which her kernels and Validate inherit."""
    uid = pwd.getpwnam(name).pw_uid
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or proc.stat().st_uid != uid:
                continue
            if b"jupyterhub.singleuser" in (proc / "cmdline").read_bytes().split(b"\0"):
                pairs = (proc / "environ").read_bytes().decode().split("\0")
                return dict(pair.split("=", 1) for pair in pairs if "=" in pair)
        except OSError:
            continue
    raise AssertionError(f"no server of {name} runs")


def test_the_vietnamese_edition_is_a_course_of_its_own(term, hub, driver, tmp_path):
    """issue 55: the Vietnamese edition added with `course add` (the previous test, before its restart), as its
    students and its instructor meet it. Its language comes from its config, with no edit of the hub's config:
    vy, its student, has COURSE_LANGUAGE=vi in her server; ta-jonas, in English courses too, has English. vy
    fetches chapter 01 in the Assignments panel, whose headings and buttons are Vietnamese (nbgrader's own words,
    written again by the course's Lab extension): Lab shows its prose in Vietnamese; she types bruno's code (the
    zoo's unscaled scores) and Validate names the failures in Vietnamese; she submits. prof-linh collects and
    autogrades in her course's formgrader: every cell scores what bruno's same code scored in the English course;
    vy's feedback page, fetched in the panel, is Vietnamese. Screenshots vy-*.png."""
    import unicodedata

    from course.language import ENV, kernel_catalog
    from instructor import messages as M
    from instructor import translate as TR

    if VI not in {c.id for c in hub.layout.courses()}:  # this test alone (-k): the course, then the restart
        add_the_vietnamese_edition(hub, tmp_path)
        hub.restart()
    listed = {line.split()[0]: line for line in hub_command(hub, "course", "list").stdout.splitlines()}
    assert "language vi" in listed[VI] and "language en" in listed[SECOND], listed
    linh = Person(hub.url, "prof-linh", hub.password("prof-linh"))
    due = term["due"]  # the English course's due date, set before Generate: the notebook and the panel say it
    formgrader(linh, "PUT", f"assignment/{A}", fg=VI_FG,
               json={"duedate_notimezone": due.strftime("%Y-%m-%dT%H:%M:%S"), "duedate_timezone": "UTC"})
    formgrader(linh, "POST", f"assignment/{A}/assign", fg=VI_FG)
    formgrader(linh, "POST", f"assignment/{A}/release", fg=VI_FG)

    # vy: her server speaks Vietnamese; the fetched chapter is the edition's, its prose Vietnamese in Lab
    browser_login(driver, hub, "vy")
    vy = Person(hub.url, "vy", hub.password("vy"))
    assert server_environment("vy").get(ENV) == "vi"
    lab = Lab(driver, Seat(f"{hub.url}/user/vy", vy.token), ARTIFACTS, "vy")
    assignments_panel(driver, lab)
    label = unicodedata.normalize("NFC", due_label(driver, "released_assignments_list"))
    assert f"{due:%d/%m/%Y}" in label and "Hạn nộp" in label and "(còn 1" in label and "Due" not in label, label
    # nbgrader's own words in the panel, in her course's language: the headings and the buttons (same buttons)
    headings = lambda: [unicodedata.normalize("NFC", e.text.strip())  # noqa: E731
                        for e in driver.find_elements(By.CSS_SELECTOR, ".panel-group .panel-heading")]
    wait(driver, lambda: headings() == ["Bài tập đã phát", "Bài tập đã lấy về", "Bài tập đã nộp"], 30,
         "the panel's headings in Vietnamese")
    panel_text = unicodedata.normalize("NFC", driver.find_element(By.CSS_SELECTOR, ".panel-group").find_element(
        By.XPATH, "..").text)
    assert "của khóa:" in panel_text and "assignments for course" not in panel_text, panel_text[:300]
    shot(driver, "vy-assignments-released")
    press_row_button(driver, "released_assignments_list", "Lấy về")
    wait(driver, lambda: count_rows(driver, "fetched_assignments_list") >= 1, 60, "vy's fetched chapter")
    shot(driver, "vy-fetched")
    lab.open(f"{A}/{NAME}.ipynb", "opened-vietnamese")
    heading = driver.find_element(By.CSS_SELECTOR, ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-RenderedMarkdown h1")
    assert unicodedata.normalize("NFC", heading.text).startswith("Chương 01"), heading.text
    edition = P.read_nb(TR.edition_root("vi").notebook("release", A))
    fetched = P.read_nb(hub.layout.user_home("vy") / A / f"{NAME}.ipynb")
    dated = [c.source for c in fetched.cells if c.metadata.get("nbgrader_oracle", {}).get("due_date_cell")]
    assert len(dated) == 1 and unicodedata.normalize("NFC", dated[0]).startswith("**Hạn nộp: 17:00 UTC"), dated
    prose = [c.source for c in fetched.cells if c.cell_type == "markdown" and c.source not in dated]
    assert prose == [c.source for c in edition.cells if c.cell_type == "markdown"], "the edition's prose, cell for cell"

    # bruno's code, typed into her cells; Validate names its failures in Vietnamese (bruno's were English)
    for gid, text in answers_of("bruno").items():
        lab.replace_cell(gid, text)
    for cell in lab.cells():
        if cell["type"] == "markdown" and cell["solution"]:
            lab.replace_cell(cell["grade_id"], "Trọng số chính là các điểm số.")
    lab.save()
    said = unicodedata.normalize("NFC", lab.validate("wrong-vietnamese"))
    bruno_read = re.findall(r"CheckFailed: (.*too peaked.*)", term["bob_validate"])  # the visible test's check
    assert bruno_read, term["bob_validate"]
    failed = re.findall(r"CheckFailed: (.*)", said)
    assert kernel_catalog("vi").translate(bruno_read[0]) in failed, said  # what bruno read in English, in Vietnamese
    assert failed and not [line for line in failed if "too peaked" in line or kernel_catalog("vi").translate(line) != line], said
    assignments_panel(driver, lab)
    press_row_button(driver, "fetched_assignments_list", "Nộp bài")
    wait(driver, lambda: count_rows(driver, "submitted_assignments_list") >= 1, 120, "vy's submission listed")
    shot(driver, "vy-submitted")

    # ta-jonas, an assistant of the English courses and of this one: English (docs/JUPYTERHUB.md)
    jonas = Person(hub.url, "ta-jonas", hub.password("ta-jonas"))
    jonas.start()
    assert server_environment("ta-jonas").get(ENV, "") == ""
    jonas.stop()

    # prof-linh collects and autogrades in her formgrader: the same code, the same points, cell by cell
    formgrader(linh, "POST", f"assignment/{A}/collect", fg=VI_FG)
    formgrader(linh, "POST", f"submission/{A}/vy/autograde", fg=VI_FG)
    graded = {s["student"]: s for s in formgrader(linh, "GET", f"submissions/{A}", fg=VI_FG)}
    english_scores = {s["student"]: s for s in term["submissions"]}
    assert graded["vy"]["score"] == english_scores["bruno"]["score"] < graded["vy"]["max_score"], \
        (graded["vy"], english_scores["bruno"])
    assert graded["vy"]["max_score"] == english_scores["bruno"]["max_score"]

    def cell_scores(person: Person, fg: str, student: str) -> dict:
        notebook = next(n for n in formgrader(person, "GET", f"submitted_notebooks/{A}/{NAME}", fg=fg)
                        if n["student"] == student)
        return {g["name"]: g["auto_score"] for g in formgrader(person, "GET", "grades", fg=fg,
                                                                 params={"submission_id": notebook["id"]})}

    assert cell_scores(linh, VI_FG, "vy") == cell_scores(term["prof"], FG, "bruno")
    formgrader(linh, "POST", f"assignment/{A}/vy/generate_feedback", fg=VI_FG)
    formgrader(linh, "POST", f"assignment/{A}/vy/release_feedback", fg=VI_FG)

    # her feedback page, fetched in the panel: Vietnamese, bruno's score
    path, html, text = fetch_feedback(driver, hub, "vy", vy, login=False, button="Lấy feedback")  # her Lab, still open
    text = unicodedata.normalize("NFC", text)
    english, cause = BUG_CAUSE, M.catalog("vi").translate(BUG_CAUSE)  # a hidden test's: the grader's catalog
    assert "Chương 01" in text and cause != english and cause in text and english not in text, text[:3000]
    for failure in driver.find_elements(By.XPATH, f"//*[contains(text(), '{cause}')]")[:1]:  # what she reads there
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", failure)
    shot(driver, "vy-feedback-failure")
    shown = re.search(r"\(Điểm: ([\d.]+) / ([\d.]+)\)", text)  # the page's own words too (editions/vi/templates)
    assert shown and float(shown[1]) == graded["vy"]["score"], text[:400]
    assert "Ô kiểm tra" in text and "Score:" not in text and "Test cell" not in text, text[:400]
    assert "HIDDEN TESTS" not in html


PANEL_LISTING = """
import json, os, sys
from nbgrader.server_extensions.assignment_list.handlers import AssignmentList
panel = AssignmentList()
panel.root_dir = os.getcwd()
print(json.dumps(panel.list_assignments(course_id=sys.argv[1])))
"""


def test_a_lecturer_in_hanoi_types_local_time_and_a_second_release_click_asks(term, hub, driver):
    """issue 51, in the browser as the lecturer met it. The course's zone is Asia/Ho_Chi_Minh
    (c.NbGraderAPI.timezone in the course root's config, read again at each request): the Edit dialog
    offers it, takes 23:30 local as 16:30 UTC, and a zone it cannot read ('ICT') is said in the dialog
    with nothing saved (nbgrader left it on "Saving..." for ever, or took UTC). The Release column's
    second state (where a second click of Release lands) asks before it unreleases: dismissed, the
    assignment stays released. Released again, amara's Assignment List says the due date in Hà Nội's
    time and the minutes left (nbgrader-oracle's Lab extension)."""
    import re
    from datetime import datetime, timedelta

    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    L, prof = hub.layout, term["prof"]
    config = L.course / "nbgrader_config.py"
    kept, before = config.read_text(), formgrader(prof, "GET", f"assignment/{A}")["duedate"]
    with open(config, "a") as handle:  # root appends: the file stays grader-attention's
        handle.write('\nc.NbGraderAPI.timezone = "Asia/Ho_Chi_Minh"  # a lecturer in Ha Noi (issue 51)\n')
    row = f"//tr[td[contains(normalize-space(.), '{A}')]]"

    def edit_due(local: str, zone: str | None):
        driver.get(f"{hub.url}{FG}/manage_assignments")
        wait(driver, lambda: driver.find_elements(By.XPATH, f"{row}//span[contains(@class, 'glyphicon-pencil')]"),
             60, "the Edit button")[0].click()
        modal = wait(driver, lambda: driver.find_elements(By.CSS_SELECTOR, "#edit-assignment-modal.in"), 30, "Edit")[0]
        field = modal.find_element(By.CSS_SELECTOR, "input.modal-timezone")
        assert field.get_attribute("value") == "Asia/Ho_Chi_Minh" and "Asia/Ho_Chi_Minh" in modal.text, modal.text
        driver.execute_script("arguments[0].value = arguments[1];",
                              modal.find_element(By.CSS_SELECTOR, "input.modal-duedate"), local)
        if zone is not None:
            field.clear()
            field.send_keys(zone)
        modal.find_element(By.CSS_SELECTOR, "button.save").click()
        return modal

    try:
        browser_login(driver, hub, "prof-ines")
        hanoi = datetime.utcnow() + timedelta(hours=7)
        soon = (hanoi + timedelta(minutes=92)).replace(second=0, microsecond=0)  # local wall clock in Ha Noi
        edit_due(f"{soon:%Y-%m-%dT%H:%M}", None)  # the zone as offered: the course's
        wait(driver, lambda: not driver.find_elements(By.CSS_SELECTOR, "#edit-assignment-modal.in"), 30, "saved")
        shot(driver, "formgrader-due-in-hanoi-time")
        utc = soon - timedelta(hours=7)
        assert formgrader(prof, "GET", f"assignment/{A}")["duedate"] == utc.isoformat()
        modal = edit_due("2030-01-01T09:00", "ICT")
        wait(driver, lambda: modal.find_elements(By.CSS_SELECTOR, ".nboracle-save-error"), 30, "the refusal")
        time.sleep(0.5)
        shot(driver, "formgrader-due-zone-refused")
        said = modal.find_element(By.CSS_SELECTOR, ".nboracle-save-error").text
        assert "'ICT' is no time zone" in said and "Asia/Ho_Chi_Minh" in said, said
        assert modal.find_element(By.CSS_SELECTOR, "button.save").text == "Save"
        assert formgrader(prof, "GET", f"assignment/{A}")["duedate"] == utc.isoformat(), "a refused save changed it"

        # a second click on the Release column: a question first; dismissed, still released
        driver.get(f"{hub.url}{FG}/manage_assignments")
        remove = f"{row}//span[contains(@class, 'glyphicon-remove')]"
        wait(driver, lambda: driver.find_elements(By.XPATH, remove), 60, "the Unrelease button")[0].click()
        alert = WebDriverWait(driver, 10).until(EC.alert_is_present())
        assert "Unrelease" in alert.text and "fetched" in alert.text, alert.text
        alert.dismiss()
        time.sleep(1.5)
        assert formgrader(prof, "GET", f"assignment/{A}")["status"] == "released"
        # the new due date reaches students with the next release: generate, unrelease (accepted), release
        fg_click(driver, hub, "manage_assignments", "glyphicon-education", "generated-in-hanoi-time")
        driver.get(f"{hub.url}{FG}/manage_assignments")
        wait(driver, lambda: driver.find_elements(By.XPATH, remove), 60, "the Unrelease button")[0].click()
        WebDriverWait(driver, 10).until(EC.alert_is_present()).accept()
        wait(driver, lambda: driver.find_elements(By.CSS_SELECTOR, "#success-modal.in"), 120, "unreleased")
        assert formgrader(prof, "GET", f"assignment/{A}")["status"] == "draft"
        fg_click(driver, hub, "manage_assignments", "glyphicon-cloud-upload", "released-in-hanoi-time")

        browser_login(driver, hub, "amara")
        lab = Lab(driver, Seat(f"{hub.url}/user/amara", term["amara"].token), ARTIFACTS, "amara-hanoi")
        assignments_panel(driver, lab)
        said = due_label(driver, "fetched_assignments_list")
        shot(driver, "amara-due-in-hanoi-time")
        assert f"Due {soon:%a %d %b %Y, %H:%M} Asia/Ho_Chi_Minh (UTC+07:00)" in said, said
        assert re.search(r"\(in 1 h (2[5-9]|3[01]) min\)", said), said  # exact to the minute, not "(in 1 hour)"
    finally:
        config.write_text(kept)
        formgrader(prof, "PUT", f"assignment/{A}", json={"duedate_notimezone": before, "duedate_timezone": "UTC"})


def assignment_list(state: Path, name: str) -> list[tuple]:
    """What ``name``'s Assignment List shows of 01_two_keys in the term of ``state`` (nbgrader's own
    handler, run as her in her home there): each submission's time, 'after the due date', feedback."""
    import json

    L = H.Layout(state)
    env = {"HOME": str(L.user_home(name)), "USER": name, "LOGNAME": name, "LANG": "C.UTF-8",
           "PATH": f"{P.BIN}:/usr/bin:/bin", "PYTHONPATH": str(REPO),
           "JUPYTER_CONFIG_PATH": ":".join(map(str, (L.common, REPO)))}  # one course asked for: no hub needed
    proc = subprocess.run(["/usr/sbin/runuser", "-u", name, "--", str(P.BIN / "python"), "-c", PANEL_LISTING,
                           H.COURSE_ID], cwd=L.user_home(name), env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    reply = json.loads(proc.stdout.strip().splitlines()[-1])
    assert reply["success"], reply
    return sorted((info["status"], [(s["timestamp"], s["after_due"], [n["has_local_feedback"] for n in s["notebooks"]])
                                    for s in info.get("submissions", [])])
                  for info in reply["value"] if info["assignment_id"] == A)


def home_files(home: Path) -> dict[str, tuple[bytes, str]]:
    """Everything a person has in their home (but pip's and Jupyter's scratch), with its owner."""
    return {str(p.relative_to(home)): (p.read_bytes(), pwd.getpwuid(p.stat().st_uid).pw_name)
            for p in home.rglob("*") if p.is_file() and not p.is_symlink()
            and not str(p.relative_to(home)).startswith((".cache/", ".local/share/jupyter/runtime/"))}


def test_the_export_an_extension_the_grading_terminal_and_a_backup(term, hub, driver, tmp_path):
    """After the late submission: the LMS export has every student of the roster (dara, who
    joined and submitted nothing, too) with names, late flags and scores; an extension for chidi
    makes him on time; the formgrader's terminal (a login shell as the service account) has the
    course's tools and exports the same gradebook; a backup restored into a fresh state folder
    exports the same grades."""
    export = tmp_path / "lms.csv"
    hub_command(hub, "export", "--to", str(export))
    rows = {r["student_id"]: r for r in read_csv(export) if r["assignment"] == A}
    assert set(rows) == {"amara", "bruno", "chidi", "dara"}, rows.keys()
    assert rows["amara"]["email"] == "amara.okeke@uni.example" and rows["amara"]["section"] == "A"
    assert rows["amara"]["score"] == rows["amara"]["max_score"] == "14.0", rows["amara"]
    assert rows["chidi"]["late"] == "yes" and rows["amara"]["late"] == "" and rows["bruno"]["late"] == ""
    assert rows["dara"]["submitted"] == "no" and rows["dara"]["score"] == "0.0"
    canvas = tmp_path / "canvas.csv"
    hub_command(hub, "export", "--to", str(canvas), "--layout", "canvas")
    assert read_csv(canvas)[0]["Student"] == "Points Possible"

    late_by = float(rows["chidi"]["seconds_late"])
    out = hub_command(hub, "extend", A, "chidi", "--hours", "1").stdout
    assert "on time" in out, out
    hub_command(hub, "export", "--to", str(export))
    after = {r["student_id"]: r for r in read_csv(export) if r["assignment"] == A}
    assert after["chidi"]["late"] == "" and late_by < 3600, after["chidi"]

    # the formgrader service's terminal: a login shell as grader-attention in the course root
    L = hub.layout
    terminal = subprocess.run(
        ["/usr/sbin/runuser", "-u", H.GRADER, "--", "bash", "-lc",
         "cd ~/course && command -v nbgrader python && python -m instructor export --to terminal-grades.csv"
         " >/dev/null && cat terminal-grades.csv"],
        cwd="/", capture_output=True, text=True, timeout=300, env=H.grader_env(L))
    assert terminal.returncode == 0, terminal.stdout + terminal.stderr
    assert f"{P.BIN}/nbgrader" in terminal.stdout and "chidi.eze@uni.example" in terminal.stdout

    # what the class got wrong (issue 40): in the same terminal the class batch reads the formgrader's grades of
    # what submitted/ holds (unchanged submissions are not graded again) and writes the instructor's pages, which
    # the instructor opens on the hub; a student's token does not reach them
    report = subprocess.run(
        ["/usr/sbin/runuser", "-u", H.GRADER, "--", "bash", "-lc", f"cd ~/course && python -m instructor grade-class {A}"],
        cwd="/", capture_output=True, text=True, timeout=900, env=H.grader_env(L))
    assert "mistakes:" in report.stdout, report.stdout + report.stderr
    page = f"/services/{H.SERVICE}/files/mistakes/{A}.html"
    reply = requests_via(term["prof"], "GET", page)
    assert reply.status_code == 200 and "What the class got wrong" in reply.text, (reply.status_code, reply.text[:300])
    assert "bruno" in reply.text  # who made which: for the instructor only
    bruno = Person(hub.url, "bruno", hub.password("bruno"))
    for path in (page, f"/services/{H.SERVICE}/files/mistakes/term.html"):
        assert _not_served(requests_via(bruno, "GET", path, allow_redirects=False)), path
    browser_login(driver, hub, "prof-ines")
    driver.get(f"{hub.url}{page}")
    time.sleep(2)
    shot(driver, "prof-ines-class-report")
    assert "What the class got wrong" in driver.find_element(By.TAG_NAME, "body").text

    students = ("amara", "bruno", "chidi", "fola")
    panels = {name: assignment_list(hub.state, name) for name in ("amara", "bruno")}
    assert panels["amara"][-1][0] == "submitted" and all(not late for _, late, _ in panels["amara"][-1][1])
    assert any(all(fed) for *_, fed in panels["amara"][-1][1]), "amara's fetched feedback, listed"
    archive = tmp_path / "term.tar.gz"
    hub_command(hub, "backup", "--to", str(archive))
    second_before = tmp_path / "second-before.csv"
    hub_command(hub, "export", "--course", SECOND, "--to", str(second_before))
    assert any(r["student_id"] == "fola" and r["submitted"] == "yes" for r in read_csv(second_before))
    restored = Path(tempfile.mkdtemp(prefix="attention-hub-restored-", dir="/var/tmp"))
    homes = {name: pwd.getpwnam(name).pw_dir for name in ("amara", "prof-ines")}
    try:
        subprocess.run(["chmod", "755", str(restored)], check=True)
        # while this term's hub runs its accounts: refused, and nothing moved (this is the module's last test)
        proc = hub_command(hub, "restore", str(archive), state=restored, check=False)
        assert proc.returncode != 0 and "stop that hub first" in proc.stderr, proc.stdout + proc.stderr
        assert {name: pwd.getpwnam(name).pw_dir for name in homes} == homes and not list(restored.iterdir())
        hub_command(hub, "stop")
        hub_command(hub, "restore", str(archive), state=restored)
        again = tmp_path / "restored.csv"
        hub_command(hub, "export", "--to", str(again), state=restored)
        assert read_csv(again) == read_csv(export)
        second_again = tmp_path / "second-restored.csv"
        hub_command(hub, "export", "--course", SECOND, "--to", str(second_again), state=restored)
        assert read_csv(second_again) == read_csv(second_before), "the second course restored with the first"
        assert (restored / "exchange" / H.COURSE_ID / "inbound").stat().st_mode & 0o777 == 0o733
        # every student's home as it was (notebooks, unsubmitted work, submissions' cache, fetched feedback),
        # owned by them; their Assignment Lists as before: submissions on time stay on time, feedback fetched
        for name in students:
            was = home_files(hub.layout.user_home(name))
            if name in panels:  # amara and bruno fetched their feedback
                assert any(f.startswith(f"{A}/feedback/") for f in was), sorted(was)
            assert home_files(restored / "home" / name) == was, name
        assert {name: assignment_list(restored, name) for name in panels} == panels
        # the lecturer's next collect in the restored term takes nothing again: its grades are the same
        collected = H.as_grader(H.Layout(restored), str(P.BIN / "nbgrader"), "collect", A, "--update", check=False)
        assert "Updating submission" not in collected.stderr and "Collecting submission" not in collected.stderr, \
            collected.stderr
        hub_command(hub, "export", "--to", str(again), state=restored)
        assert read_csv(again) == read_csv(export)
    finally:
        hub_command(hub, "stop", state=restored, check=False)
        shutil.rmtree(restored, ignore_errors=True)
