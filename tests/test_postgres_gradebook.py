"""A class graded by the one pipeline into a PostgreSQL gradebook serves ``feedback``,
``export`` and the formgrader's gradebook pages, read through the formgrader's own HTTP API
(a real ``jupyter server`` with nbgrader's extension, on this course root).

Part of the slow stage (``make test-slow``): it needs PostgreSQL (``.ci/install-postgres``).
"""

from __future__ import annotations

import csv
import json
import secrets
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest
from nboracle.classroom import batch
from nboracle.classroom import pipeline as P
from nboracle.classroom.course_root import CourseRoot
from support import CLASS_ASSIGNMENT as A
from support import CLASS_NOTEBOOK as NB
from support import CLASS_POINTS, PostgresUnavailable, start_postgres

from instructor.repository import REPO

pytestmark = [pytest.mark.pipeline, pytest.mark.slow]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    try:
        server = start_postgres()
    except PostgresUnavailable as err:
        pytest.skip(f"no PostgreSQL server can start here ({err}); .ci/install-postgres installs one")
    path = tmp_path_factory.mktemp("pg-course")
    shutil.copy2(REPO / "nbgrader_config.py", path / "nbgrader_config.py")
    with open(path / "nbgrader_config.py", "a") as config:
        config.write(f"\nc.CourseDirectory.db_url = {server.url!r}\n")
    shutil.copytree(REPO / "source" / A, path / "source" / A)
    root = CourseRoot(path)
    root.release(A)
    release, answers = root.release_and_answers(A)
    root.submit(A, "solution", P.fill(release, answers))
    root.submit(A, "stub", release)
    reports = batch.grade_class(root, A, runner=batch.InProcess(), progress=False)
    yield root, reports, server
    server.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def formgrader(graded):
    root = graded[0]
    port, token = _free_port(), secrets.token_hex(16)
    proc = subprocess.Popen([str(P.BIN / "jupyter"), "server", f"--ServerApp.root_dir={root.path}",
                             f"--ServerApp.port={port}", "--ServerApp.port_retries=0", "--no-browser",
                             "--allow-root", f"--IdentityProvider.token={token}"],
                            cwd=root.path, env=P.tool_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def get(path: str):
        request = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                         headers={"Authorization": f"token {token}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    deadline = time.monotonic() + 120
    while True:
        try:
            get("/formgrader/api/status")
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"jupyter server did not start: {proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.5)
    yield get
    proc.terminate()
    proc.wait(timeout=30)


def test_the_pipeline_wrote_the_class_into_postgresql(graded):
    root, reports, server = graded
    assert root.gradebook_url == server.url and not root.gradebook.exists()
    assert {s: (r.status, r.score) for s, r in reports.items()} == {"solution": ("graded", CLASS_POINTS), "stub": ("graded", 0)}
    assert {s: r.auto_score for s, r in root.results(A).items()} == {"solution": CLASS_POINTS, "stub": 0}


def test_feedback_and_export_read_postgresql(graded):
    root = graded[0]
    for html in root.path.glob(f"feedback/*/{A}/{NB}.html"):
        html.unlink()
    root.feedback(A)  # nbgrader generate_feedback, from the server's gradebook
    assert all(root.notebook("feedback", A, s).exists() for s in ("solution", "stub"))
    rows = {r["student_id"]: r for r in csv.DictReader(root.export(root.path / "grades.csv").open())}
    assert float(rows["solution"]["score"]) == CLASS_POINTS and rows["stub"]["score"] == "0.0"


def test_the_formgraders_gradebook_pages_read_postgresql(graded, formgrader):
    from nbgrader.api import Gradebook

    with Gradebook(graded[2].url) as gb:
        max_score = gb.find_assignment(A).max_score  # automatic and manual points
    assignments = {a["name"]: a for a in formgrader("/formgrader/api/assignments")}
    assert assignments[A]["num_submissions"] == 2
    submissions = {s["student"]: s for s in formgrader(f"/formgrader/api/submissions/{A}")}
    assert (submissions["solution"]["score"], submissions["stub"]["score"]) == (CLASS_POINTS, 0)
    assert submissions["solution"]["max_score"] == max_score >= CLASS_POINTS and submissions["solution"]["autograded"]
    notebooks = {n["student"]: n for n in formgrader(f"/formgrader/api/submitted_notebooks/{A}/{NB}")}
    assert notebooks["solution"]["score"] == CLASS_POINTS and notebooks["stub"]["score"] == 0
    students = {s["id"] for s in formgrader("/formgrader/api/students")}
    assert students >= {"solution", "stub"}
