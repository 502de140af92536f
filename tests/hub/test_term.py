"""A term of 01_two_keys on a real JupyterHub, in headless Chromium.

The instructor releases the assignment; alice (the solution) and bob (a bug from the zoo) log
in through the hub's login page, fetch it in the Assignments panel, type their answers into the
notebook's cells, Validate, submit; alice submits again later. The instructor collects and
autogrades (the scores equal the one-machine batch for the same notebooks), generates and
releases feedback; each student fetches it and reads their own score, with no hidden test in
it. The instructor clicks the formgrader's buttons (generate, release, collect, autograde,
feedback) in the formgrader service's pages; the assistant types the hand grade into the
formgrader's manual-grading page; reading scores back goes through the formgrader's REST API with
each one's own hub token. Screenshots of every step in .artifacts/hub/<time>/.
"""

from __future__ import annotations

import re
import subprocess
import time

import pytest
from conftest import ARTIFACTS
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
WRITTEN = {"alice": "Two keys that match the query equally share its weight: each gets one half.",
           "bob": "The weights are the scores themselves."}


class Seat:
    """What Lab's helper needs of a server: its URL and a token."""

    def __init__(self, url: str, token: str):
        self.url, self.token = url, token


def answers_of(student: str) -> dict[str, str]:
    solutions = P.solution_answers(P.read_nb(REPOSITORY.notebook("source", A)))
    if student == "alice":
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
    driver.find_element(By.ID, "password_input").send_keys(H.password(name))
    shot(driver, f"{name}-login")
    driver.find_element(By.ID, "login_submit").click()
    wait(driver, lambda: f"/user/{name}/lab" in driver.current_url and driver.execute_script(
        "return !!(window.jupyterapp && window.jupyterapp.shell)"), 240, f"{name}'s Lab after login")
    time.sleep(1)


def assignments_panel(driver, lab: Lab) -> None:
    lab.command("nbgrader:open-assignment-list")
    wait(driver, lambda: driver.find_elements(By.ID, "released_assignments_list"), 60, "the Assignments panel")


def row_button(driver, section: str, label: str, timeout: int = 120):
    xpath = (f"//div[@id='{section}']//div[contains(@class,'list_item')][.//*[contains(normalize-space(.),'{A}')]]"
             f"//button[normalize-space()='{label}']")
    return wait(driver, lambda: (driver.find_elements(By.XPATH, xpath) or [None])[0], timeout,
                f"{label} in {section}")


def count_rows(driver, section: str) -> int:
    return len(driver.find_elements(
        By.XPATH, f"//div[@id='{section}']//div[contains(@class,'list_item')][.//*[contains(normalize-space(.),'{A}')]]"))


def formgrader(person: Person, method: str, path: str, **kw):
    reply = requests_via(person, method, f"{FG}/api/{path}", **kw)
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


def fg_click(driver, hub, page: str, icon: str, what: str, row: str = A) -> str:
    """On a formgrader page, click the ``icon`` button of ``row`` (as the instructor does) and
    wait for nbgrader's success dialog; return its text (an error dialog fails the test)."""
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
    assert not failed, f"{what}: {text[:2000]}"
    return text


def student_works(driver, hub, name: str) -> tuple[Person, str]:
    """Log in, fetch, fill in, save, Validate, submit; return (person, Validate's text)."""
    browser_login(driver, hub, name)
    person = Person(hub.url, name, H.password(name))
    lab = Lab(driver, Seat(f"{hub.url}/user/{name}", person.token), ARTIFACTS, f"{name}")
    assignments_panel(driver, lab)
    time.sleep(1)
    shot(driver, f"{name}-assignments-released")
    row_button(driver, "released_assignments_list", "Fetch").click()
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
    row_button(driver, "fetched_assignments_list", "Submit").click()
    wait(driver, lambda: count_rows(driver, "submitted_assignments_list") >= 1, 120, "the submission listed")
    time.sleep(1)
    shot(driver, f"{name}-submitted")
    return person, validated


@pytest.fixture(scope="module")
def term(hub, driver):
    """The whole term, once; the tests below read what it left."""
    out = {}
    # --- the instructor releases 01_two_keys (generate, then release to the exchange)
    browser_login(driver, hub, "prof-ada")
    shot(driver, "prof-ada-lab")
    prof = Person(hub.url, "prof-ada", H.password("prof-ada"))
    out["prof"] = prof
    show_formgrader(driver, hub, "manage_assignments", "formgrader-before-release")
    fg_click(driver, hub, "manage_assignments", "glyphicon-education", "generated")
    fg_click(driver, hub, "manage_assignments", "glyphicon-cloud-upload", "released")
    out["released_page"] = show_formgrader(driver, hub, "manage_assignments", "formgrader-released")

    # --- two students
    alice, out["alice_validate"] = student_works(driver, hub, "alice")
    bob, out["bob_validate"] = student_works(driver, hub, "bob")
    # alice submits again later (the panel's Submit on her fetched copy)
    browser_login(driver, hub, "alice")
    lab = Lab(driver, Seat(f"{hub.url}/user/alice", alice.token), ARTIFACTS, "alice-again")
    assignments_panel(driver, lab)
    time.sleep(2)
    row_button(driver, "fetched_assignments_list", "Submit").click()
    wait(driver, lambda: "2" in driver.find_element(By.ID, "submitted_assignments_list").text
         or count_rows(driver, "submitted_assignments_list") >= 2, 60, "alice's second submission")
    time.sleep(1)
    shot(driver, "alice-submitted-again")
    out["alice"], out["bob"] = alice, bob

    # --- the instructor collects and autogrades
    browser_login(driver, hub, "prof-ada")
    fg_click(driver, hub, "manage_assignments", "glyphicon-cloud-download", "collected")
    for student in ("alice", "bob"):
        fg_click(driver, hub, f"manage_submissions/{A}", "glyphicon-flash", f"autograded-{student}", row=student)
    out["submissions"] = formgrader(prof, "GET", f"submissions/{A}")
    out["graded_page"] = show_formgrader(driver, hub, f"manage_submissions/{A}", "formgrader-autograded")

    # --- the assistant grades alice's written answer by hand: types the score into the
    # formgrader's manual-grading page (the API only finds the page and reads the result back)
    browser_login(driver, hub, "ta-ben")
    ta = Person(hub.url, "ta-ben", H.password("ta-ben"))
    out["ta"] = ta
    notebooks = formgrader(ta, "GET", f"submitted_notebooks/{A}/{NAME}")
    alice_nb = next(n for n in notebooks if n["student"] == "alice")
    grades = formgrader(ta, "GET", "grades", params={"submission_id": alice_nb["id"]})
    written = [g for g in grades if g["auto_score"] is None]
    assert written, grades
    out["manual_page"] = show_formgrader(driver, hub, f"submissions/{alice_nb['id']}", "ta-ben-manual-grading")
    for grade in written:
        type_score(driver, grade["name"], grade["max_score"])
        wait(driver, lambda g=grade: _saved(ta, alice_nb["id"], g["name"]) == g["max_score"], 60,
             f"the score typed for {grade['name']} saved")
    shot(driver, "ta-ben-manual-grade-typed")
    out["written"] = written
    out["final"] = formgrader(ta, "GET", f"submissions/{A}")

    browser_login(driver, hub, "prof-ada")
    fg_click(driver, hub, "manage_assignments", "glyphicon-comment", "feedback-generated")
    fg_click(driver, hub, "manage_assignments", "glyphicon-envelope", "feedback-released")
    show_formgrader(driver, hub, f"manage_submissions/{A}", "formgrader-feedback-released")

    # --- each student fetches their feedback
    out["feedback"] = {}
    for name, person in (("alice", alice), ("bob", bob)):
        browser_login(driver, hub, name)
        lab = Lab(driver, Seat(f"{hub.url}/user/{name}", person.token), ARTIFACTS, f"{name}-feedback")
        assignments_panel(driver, lab)
        time.sleep(2)
        row_button(driver, "submitted_assignments_list", "Fetch Feedback").click()
        found = []

        def feedback_file(person=person, found=found):
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
        out["feedback"][name] = (found[0], driver.page_source, driver.find_element(By.TAG_NAME, "body").text)
    return out


def test_validate_tells_each_student(term):
    assert "passes" in term["alice_validate"].lower() or "success" in term["alice_validate"].lower(), \
        term["alice_validate"]
    assert "failed" in term["bob_validate"].lower() or "error" in term["bob_validate"].lower(), term["bob_validate"]


def test_collected_latest_and_graded_as_on_one_machine(term, hub, tmp_path):
    scores = {s["student"]: s["score"] for s in term["submissions"] if s["autograded"]}
    assert set(scores) == {"alice", "bob"}, term["submissions"]
    assert scores["alice"] == term["submissions"][0]["max_score"] or scores["alice"] == 11, scores
    assert scores["bob"] < scores["alice"], scores
    # the one-machine batch on the very notebooks the hub collected
    course = hub.layout.course
    root = REPOSITORY.scratch_copy(tmp_path / "batch", [A])
    for student in ("alice", "bob"):
        root.submit(A, student, P.read_nb(course / "submitted" / student / A / f"{NAME}.ipynb"))
    root.autograde(A)
    batch = {s: r.auto_score for s, r in root.results(A).items()}
    assert batch == scores, (batch, scores)
    # alice's second submission is the one collected (the exchange keeps both)
    inbound = hub.layout.exchange / H.COURSE_ID / "inbound"
    assert len([p for p in inbound.iterdir() if p.name.startswith(f"alice+{A}+")]) == 2


def test_each_student_reads_own_feedback_without_hidden_tests(term):
    source = REPOSITORY.notebook("source", A).read_text()
    hidden = re.findall(r"### BEGIN HIDDEN TESTS\\n(.*?)### END HIDDEN TESTS", source, re.S)
    assert hidden
    hidden_lines = {line.strip().strip('",').replace('\\"', '"') for block in hidden
                    for line in block.split("\\n") if len(line.strip()) > 25}
    scores = {s["student"]: s for s in term["final"]}
    assert scores["alice"]["score"] == scores["alice"]["max_score"], "the assistant's points count"
    for name in ("alice", "bob"):
        path, html, text = term["feedback"][name]
        shown = re.search(r"\(Score: ([\d.]+) / ([\d.]+)\)", text)
        assert shown, text[:400]
        assert (float(shown[1]), float(shown[2])) == (scores[name]["score"], scores[name]["max_score"]), \
            (name, shown[0], scores[name])
        assert "HIDDEN TESTS" not in html
        leaked = [line for line in hidden_lines if line in html]
        assert not leaked, f"{name}'s feedback shows hidden test lines: {leaked[:3]}"
        assert "Fontconfig" not in html, f"{name}'s feedback shows the sandbox's font warning"
    assert "attention" in term["feedback"]["bob"][2].lower()


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
    alice_home = L.user_home("alice")
    feedback = sorted(alice_home.glob(f"{A}/feedback/*/*.html"))
    assert feedback
    private = [alice_home / A / f"{NAME}.ipynb", feedback[0], L.course / "gradebook.db",
               L.course / "source" / A / f"{NAME}.ipynb", L.course / "submitted" / "alice" / A / f"{NAME}.ipynb",
               L.course / "autograded" / "alice" / A / f"{NAME}.ipynb", REPO / "source" / A / f"{NAME}.ipynb"]
    for path in private:
        assert path.exists(), path
        proc = as_user("bob", "cat", str(path))
        assert proc.returncode != 0 and "Permission denied" in proc.stderr, f"bob reads {path}"
    # the exchange: bob may hand in, not list what others handed in or the feedback folder
    course = L.exchange / H.COURSE_ID
    for folder in (course / "inbound", course / "feedback"):
        proc = as_user("bob", "ls", str(folder))
        assert proc.returncode != 0 and "Permission denied" in proc.stderr, f"bob lists {folder}"
    # what is released to everyone holds no hidden test
    released = (course / "outbound" / A / f"{NAME}.ipynb").read_text()
    assert "HIDDEN" not in released and "BEGIN SOLUTION" not in released


def _not_served(reply) -> bool:
    return reply.status_code in (302, 403, 404)


def test_a_students_token_reaches_only_their_own_things(term, hub):
    import requests

    bob = Person(hub.url, "bob", H.password("bob"))
    assert bob.hub("GET", "/user").json()["name"] == "bob"
    assert bob.hub("GET", "/users").status_code == 403
    assert bob.hub("GET", "/users/alice").status_code in (403, 404)
    assert bob.hub("POST", "/users/alice/tokens", json={}).status_code in (403, 404)
    assert bob.hub("GET", "/groups").status_code == 403

    def get(path):
        return requests.get(f"{hub.url}{path}", headers={"Authorization": f"token {bob.token}"},
                            allow_redirects=False, timeout=60)

    for path in (f"/user/alice/api/contents/{A}", f"/user/alice/files/{A}/{NAME}.ipynb",
                 f"{FG}/api/submissions/{A}", f"{FG}/api/students",
                 f"/services/{H.SERVICE}/api/contents/gradebook.db",
                 f"/services/{H.SERVICE}/files/source/{A}/{NAME}.ipynb"):
        reply = get(path)
        assert _not_served(reply), f"bob's token gets {path}: {reply.status_code}"
    assert get(f"/user/bob/api/contents/{A}").status_code == 200


def test_the_assistant_grades_but_is_not_an_admin(term, hub):
    ta = term["ta"]
    assert requests_via(ta, "GET", f"{FG}/api/submissions/{A}").status_code == 200
    assert ta.hub("GET", "/users").status_code == 403
    assert ta.hub("POST", "/users/alice/server").status_code in (403, 404)
    assert not ta.hub("GET", "/user").json().get("admin")
    assert WRITTEN["alice"][:40] in term["manual_page"], "the manual-grading page shows alice's answer"
    reply = ta.server("GET", f"api/contents/{A}", user="alice", allow_redirects=False)
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
                             "gradebook": _reads(%r), "source": _reads(%r), "alice": _reads(%r)}))
'''


def test_a_late_submission_is_marked_late_graded_sandboxed_and_alone(term, hub):
    """carol (through nbgrader as her own user, not the browser) hands in after the deadline a
    notebook whose code looks for the grader's tokens and files; re-collecting grades her
    alone: alice's manual grade and bob's score stay."""
    import json

    from nbgrader.api import Gradebook

    L, prof = hub.layout, term["prof"]
    from datetime import datetime, timezone

    # the deadline passes now: after alice's and bob's submissions, before carol's
    deadline = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    formgrader(prof, "PUT", f"assignment/{A}", json={"duedate_notimezone": deadline, "duedate_timezone": "UTC"})
    time.sleep(1.5)
    as_student(hub, "carol", "fetch_assignment", A)
    mine = L.user_home("carol") / A / f"{NAME}.ipynb"
    answers = answers_of("alice")
    first = next(iter(answers))
    answers[first] += PROBE % (str(L.course / "gradebook.db"), str(L.course / "source" / A / f"{NAME}.ipynb"),
                               str(L.course / "submitted" / "alice" / A / f"{NAME}.ipynb"))
    P.write_nb(P.fill(P.read_nb(mine), answers), mine)
    subprocess.run(["chown", "carol:carol", str(mine)], check=True)
    as_student(hub, "carol", "submit", A)

    before = {s["student"]: s for s in formgrader(prof, "GET", f"submissions/{A}")}
    formgrader(prof, "POST", f"assignment/{A}/collect")
    formgrader(prof, "POST", f"submission/{A}/carol/autograde")
    after = {s["student"]: s for s in formgrader(prof, "GET", f"submissions/{A}")}
    assert after["carol"]["score"] == 11, after["carol"]
    for name in ("alice", "bob"):
        assert after[name]["score"] == before[name]["score"], (name, before[name], after[name])
    assert after["alice"]["score"] == after["alice"]["max_score"], "the assistant's grade is kept"

    with Gradebook(f"sqlite:///{L.course / 'gradebook.db'}") as gb:
        assert gb.find_submission(A, "carol").total_seconds_late > 0
        assert gb.find_submission(A, "alice").total_seconds_late == 0

    graded = P.read_nb(L.course / "autograded" / "carol" / A / f"{NAME}.ipynb")
    lines = [line for cell in graded.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
             for line in out.get("text", "").splitlines() if line.startswith("PROBE ")]
    assert lines, "the probe ran"
    seen = json.loads(lines[0][len("PROBE "):])
    assert seen == {"env": [], "gradebook": False, "source": False, "alice": False}, seen


def test_a_server_stopped_mid_work_keeps_the_work(term, hub):
    """carol saves half her work, her server is stopped (the hub culls it, or she logs out), and
    starts again: the notebook is as she saved it (through her server's REST API)."""
    carol = Person(hub.url, "carol", H.password("carol"))
    carol.start()
    path = f"{A}/{NAME}.ipynb"
    model = carol.server("GET", f"api/contents/{path}").json()
    cells = model["content"]["cells"]
    cells[-1]["source"] = "half done: carol"
    saved = carol.server("PUT", f"api/contents/{path}", json={"type": "notebook", "content": model["content"]})
    assert saved.status_code == 200, saved.text[:300]
    carol.stop()
    assert not carol.hub("GET", "/users/carol").json().get("servers"), "the server stopped"
    carol.start()
    again = carol.server("GET", f"api/contents/{path}").json()
    assert again["content"]["cells"][-1]["source"] == "half done: carol"
    carol.stop()
