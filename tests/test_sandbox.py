"""The OS sandbox around grading kernels, attacked through the real nbgrader CLI (chapter 01).

Phase 1 grades two students who play fair: ``honest`` (the solution) and ``bug-axis0`` (the
zoo's wrong softmax axis). Their grades, files and the course files are then snapshotted.
Phase 2 grades, in ONE ``nbgrader autograde`` run, one student per OS-level attack: each hands
in the same wrong code as ``bug-axis0`` plus one extra cell with the attack. Each must score
exactly what ``bug-axis0`` scores, and afterwards everything but the attacker's own rows and
files must be byte-for-byte as before, with no hidden test text in any feedback page.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import nbformat
import pytest
from nboracle.classroom import pipeline as P
from nboracle.classroom.course_root import CourseRoot
from nboracle.grader import sandbox
from support import CLASS_POINTS, hidden_lines, source_nb

from instructor.repository import REPOSITORY
from instructor.zoo import variants_for

A, NB = "01_two_keys", "two_keys"
HONEST, CONTROL = "honest", "bug-axis0"
pytestmark = pytest.mark.pipeline

ATTEMPT = '''
def attempt(what, action):
    try:
        result = action()
        print(f"ATTACK SUCCEEDED {what}: {str(result)[:2000]}")
    except BaseException as err:
        print(f"denied {what}: {type(err).__name__}: {err}")
'''

# Each attack: the code of its extra cell. ROOT, PORT and MARKER are filled in by the test; the
# kernel's working directory is <ROOT>/autograded/<student>/01_two_keys, so ../../.. is ROOT.
ATTACKS = {
    "adv-read-gradebook": ATTEMPT + '''
import sqlite3
def hidden_tests(path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    return "\\n".join(source for (source,) in db.execute("select source from source_cell"))
attempt("read the gradebook (relative)", lambda: hidden_tests("../../../gradebook.db"))
attempt("read the gradebook (absolute)", lambda: hidden_tests("ROOT/gradebook.db"))
attempt("read source/", lambda: open("ROOT/source/01_two_keys/two_keys.ipynb").read())
print(open("ROOT/source/01_two_keys/two_keys.py").read())
''',
    "adv-write-own-grades": ATTEMPT + '''
import sqlite3
def top_marks(path):
    db = sqlite3.connect(path)
    db.execute("""update grade set manual_score = 99 where notebook_id in (
        select sn.id from submitted_notebook sn join submitted_assignment sa on sn.assignment_id = sa.id
        where sa.student_id = 'adv-write-own-grades')""")
    db.execute("update grade_cells set max_score = 0")
    db.commit()
    return "written"
attempt("write own grades (relative)", lambda: top_marks("../../../gradebook.db"))
top_marks("ROOT/gradebook.db")
''',
    "adv-write-other-grades": ATTEMPT + '''
import sqlite3
def zero(path):
    db = sqlite3.connect(path)
    db.execute("""update grade set manual_score = 0 where notebook_id in (
        select sn.id from submitted_notebook sn join submitted_assignment sa on sn.assignment_id = sa.id
        where sa.student_id = 'honest')""")
    db.execute("delete from comment")
    db.commit()
    return "written"
attempt("zero another student (relative)", lambda: zero("../../../gradebook.db"))
zero("ROOT/gradebook.db")
''',
    "adv-edit-source": ATTEMPT + '''
def append(path, text="\\nassert False  # sabotage\\n"):
    with open(path, "a") as f:
        f.write(text)
    return "written"
attempt("edit source .py (relative)", lambda: append("../../../source/01_two_keys/two_keys.py"))
attempt("edit source .ipynb", lambda: append("ROOT/source/01_two_keys/two_keys.ipynb", " "))
attempt("edit release", lambda: append("ROOT/release/01_two_keys/two_keys.ipynb", " "))
attempt("edit the config", lambda: append("ROOT/nbgrader_config.py", "\\nc.Execute.timeout = 1\\n"))
append("ROOT/source/01_two_keys/two_keys.py")
''',
    "adv-write-outside": ATTEMPT + '''
import os, shutil
def put(path):
    with open(path, "w") as f:
        f.write("escaped")
    return "written"
attempt("write ../..", lambda: put("../../escape.txt"))
attempt("write ../../..", lambda: put("../../../escape.txt"))
attempt("write the course root", lambda: put("ROOT/escape.txt"))
attempt("write /root", lambda: put("/root/escape.txt"))
put("/tmp/escape-MARKER.txt")  # the sandbox's own /tmp: allowed, and thrown away
attempt("overwrite another student", lambda: put("ROOT/autograded/honest/01_two_keys/two_keys.ipynb"))
attempt("overwrite a feedback page", lambda: put("ROOT/feedback/honest/01_two_keys/two_keys.html"))
attempt("delete a submission", lambda: shutil.rmtree("ROOT/submitted/honest"))
put("ROOT/submitted/honest/01_two_keys/two_keys.ipynb")
''',
    "adv-network": ATTEMPT + '''
import socket
attempt("connect to the host's loopback", lambda: socket.create_connection(("127.0.0.1", PORT), timeout=3))
def route_out():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect(("192.0.2.1", 53))  # UDP connect: a route lookup, no packet is sent
    return s.getsockname()
attempt("route to an outside address", route_out)
route_out()
''',
    "adv-memory": '''
import time
started = time.time()
try:
    x = bytearray(30 * 2**30)  # 30 GB at once
except MemoryError:
    print("30 GB at once: MemoryError")
chunks = []
try:
    for i in range(8):  # 1 GB at a time, touched
        chunks.append(bytearray(2**30))
finally:
    print(f"held {len(chunks)} GB before the cap, {time.time() - started:.1f} s")
    chunks.clear()
''',
    "adv-fork-loop": '''
import os, sys, time
print("KERNEL", " ".join(sys.argv))
children = []
try:
    for i in range(400):  # bounded: a real fork bomb does not stop
        pid = os.fork()
        if pid == 0:
            time.sleep(2)
            os._exit(0)
        children.append(pid)
finally:
    print(f"forked {len(children)} processes before the cap")
    for pid in children:
        os.waitpid(pid, 0)
''',
    "adv-background": '''
import os, sys, subprocess
print("KERNEL", " ".join(sys.argv))
LATER = """
import sqlite3, time
time.sleep(4)  # the grader has finished by now
for path in ["ROOT/gradebook.db", "../../../gradebook.db"]:
    try:
        db = sqlite3.connect(path)
        db.execute("update grade set manual_score = 99")
        db.commit()
    except Exception:
        pass
try:
    open("ROOT/late-MARKER.txt", "w").write("still here")
except Exception:
    pass
time.sleep(60)
"""
if os.fork() == 0:  # double fork + setsid: a daemon the kernel does not wait for
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", LATER, "MARKER"])
    os._exit(0)
os.wait()
print("daemon started")
''',
    "adv-look-around": '''
import json, os, sys
print("KERNEL", " ".join(sys.argv))
def listing(path):
    try:
        return sorted(os.listdir(path))
    except OSError as err:
        return f"{type(err).__name__}: {err}"
for p in ["ROOT", "ROOT/autograded", "..", "../..", "../../..", "/", "/root", os.path.expanduser("~"),
          "/home", "/etc", "/tmp"]:  # one line a folder: a long listing cut by the output limit spoils no other
    print("SEEN " + json.dumps({p: listing(p)}))
''',
    # Kernels fork from one warm zygote per grader (nboracle.grader.warm): what one kernel leaves
    # must be gone for the next (nbgrader grades students in sorted order: "1-leave" goes first).
    "adv-traces-1-leave": '''
import os, socket, sys, time
print("KERNEL", " ".join(sys.argv))
open("/tmp/trace-MARKER", "w").write("left")
open("/dev/shm/trace-MARKER", "w").write("left")
os.makedirs(os.path.expanduser("~/.ipython/profile_default/startup"), exist_ok=True)
if os.fork() == 0:  # a process that outlives the cell, listening on an abstract socket
    os.setsid()
    listener = socket.socket(socket.AF_UNIX)
    listener.bind("\\0trace-MARKER")
    listener.listen(1)
    time.sleep(60)
    os._exit(0)
import torch
torch.TRACE = "MARKER"  # a module the zygote imported once
print("traces left", time.time())
''',
    "adv-traces-2-find": ATTEMPT + '''
import ctypes, os, socket, subprocess, sys, time
print("KERNEL", " ".join(sys.argv), time.time())
attempt("find the trace in /tmp", lambda: open("/tmp/trace-MARKER").read())
attempt("find the trace in /dev/shm", lambda: open("/dev/shm/trace-MARKER").read())
attempt("reach the previous kernel's socket", lambda: socket.socket(socket.AF_UNIX).connect("\\0trace-MARKER"))
import torch
attempt("read the previous kernel's module state", lambda: torch.TRACE)
attempt("see the zygote's pool", lambda: os.listdir("/.kernel-pool"))
libc = ctypes.CDLL(None, use_errno=True)
def call(result):
    if result != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return "done"
attempt("mount a file system", lambda: call(libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, None)))
def user_namespace():  # from a process of one thread (unshare refuses a threaded one)
    said = subprocess.run([sys.executable, "-c", "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
                           "print('made' if libc.unshare(0x10000000) == 0 else os.strerror(ctypes.get_errno()))"],
                          capture_output=True, text=True).stdout.strip()
    if said != "made":
        raise PermissionError(said)
    return said
attempt("make a user namespace", user_namespace)
held = [line for line in open("/proc/self/status").read().splitlines()
        if line.startswith("Cap") and int(line.split()[1], 16)]
print("CAPS", held)
print("PIDS", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
''',
}


def attack_nb(release, answers, code):
    """The released notebook with the given answers and ``code`` as a new cell after the first answer."""
    nb = P.fill(release, answers)
    first = next(i for i, c in enumerate(nb.cells) if (c.metadata.get("nbgrader") or {}).get("solution"))
    nb.cells.insert(first + 1, nbformat.v4.new_code_cell(code))
    return nb


def tree_hashes(root: Path, skip: set[str]) -> dict[str, str]:
    """sha256 of every file under ``root`` except in folders of students in ``skip``."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.name.startswith(".nbgrader"):  # nbgrader's own log
            continue
        if path.is_file() and not (len(rel.parts) > 1 and rel.parts[1] in skip
                                   and rel.parts[0] in ("submitted", "autograded", "feedback")):
            if rel.parts[0] in ("submitted", "autograded", "feedback", "source", "release") \
                    or len(rel.parts) == 1:
                out[str(rel)] = hashlib.sha256(path.read_bytes()).hexdigest()
    out.pop("gradebook.db", None)
    return out


def gradebook_rows(db: Path, skip: set[str]) -> dict[str, list[str]]:
    """Every row of every table, except rows that belong to students in ``skip``."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    own = set(skip)
    own |= {r[0] for r in con.execute(
        f"select id from submitted_assignment where student_id in ({','.join('?' * len(skip))})", list(skip))}
    own |= {r[0] for r in con.execute(
        f"select id from submitted_notebook where assignment_id in ({','.join('?' * len(own))})", list(own))}
    tables = [r[0] for r in con.execute("select name from sqlite_master where type = 'table'")]
    rows = {t: sorted(repr(r) for r in con.execute(f"select * from {t}") if not own & set(r)) for t in tables}
    con.close()
    return rows


def processes_mentioning(needles: list[str]) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if any(n in cmdline for n in needles):
                found.append(f"{proc.name}: {cmdline[:200]}")
    return found


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    ok, reason = sandbox.sandbox_status()
    if not ok:  # the attacks below are bounded, but run them only where they are contained
        pytest.fail(f"the grading sandbox cannot start here: {reason}")
    course = REPOSITORY.scratch_copy(tmp_path_factory.mktemp("sandbox"), [A])
    root = course.path
    release, answers = course.release_and_answers(A)
    axis0 = {v.name: v for v in variants_for(A)}["softmax_axis0"].answers(answers)
    course.submit(A, HONEST, P.fill(release, answers))
    course.submit(A, CONTROL, P.fill(release, axis0))
    course.autograde(A)
    course.feedback(A)
    attackers = set(ATTACKS)
    before = tree_hashes(root, attackers), gradebook_rows(root / "gradebook.db", attackers)

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    marker = f"i13-{uuid.uuid4().hex}"
    fill = {"ROOT": str(root), "PORT": str(listener.getsockname()[1]), "MARKER": marker}
    for student, code in ATTACKS.items():
        code = re.sub("|".join(fill), lambda m: fill[m.group(0)], code)
        course.submit(A, student, attack_nb(release, axis0, code))
    started = time.time()
    course.autograde(A, "adv-*")
    course.feedback(A, "adv-*")
    graded_in = time.time() - started
    yield {"root": root, "before": before, "listener": listener, "marker": marker, "graded_in": graded_in,
           "results": course.results(A), "attackers": attackers}
    listener.close()


def seen_listings(root: Path, student: str, needed=None) -> dict:
    """The folders the look-around attack listed, each read from its own ``SEEN`` line of the output."""
    seen = {}
    for line in attack_output(root, student).splitlines():
        if line.startswith("SEEN "):
            try:
                seen.update(json.loads(line[len("SEEN "):]))
            except json.JSONDecodeError:  # a line the grader's output limit cut
                pass
    missing = [p for p in (needed if needed is not None else seen) if p not in seen]
    assert not missing, f"the attack's output lacks the listing of {missing}"
    return seen


def attack_output(root: Path, student: str) -> str:
    nb = P.read_nb(CourseRoot(root).notebook("autograded", A, student))
    cell = next(c for c in nb.cells if c.cell_type == "code" and ("attempt(" in c.source or "KERNEL" in c.source
                                                                  or "bytearray" in c.source))
    parts = []
    for out in cell.outputs:
        parts.append(out.get("text", "") if out.output_type == "stream"
                     else f"{out.get('ename', '')}: {out.get('evalue', '')}" if out.output_type == "error" else "")
    return "\n".join(parts)


def test_an_honest_solution_keeps_full_marks_in_the_sandbox(attacked):
    results = attacked["results"]
    assert results[HONEST].auto_score == results[HONEST].auto_max == CLASS_POINTS
    assert 0 < results[CONTROL].auto_score < CLASS_POINTS


def test_every_attack_scores_exactly_what_its_wrong_code_earns(attacked):
    results, control = attacked["results"], attacked["results"][CONTROL]
    for student in ATTACKS:
        assert student in results, f"{student} was not graded"
        got = results[student]
        assert (got.auto_score, got.auto_max) == (control.auto_score, control.auto_max), student
        assert sorted(got.failed()) == sorted(control.failed()), student


def test_no_attack_succeeded_and_each_refusal_is_visible(attacked):
    root = attacked["root"]
    # what the sandbox answered, as the autograded notebook shows it (for review): the gradebook
    # path does not exist inside (sqlite reports an empty database or none), nor do source/ and
    # the other students; the root is read-only; no route out; the caps
    no_db = ("unable to open database file", "no such table")
    expected = {
        "adv-read-gradebook": [no_db, ("No such file or directory",)],
        "adv-write-own-grades": [no_db],
        "adv-write-other-grades": [no_db],
        "adv-edit-source": [("No such file or directory",)],
        "adv-write-outside": [("Read-only file system",), ("No such file or directory",)],
        "adv-network": [("Connection refused",), ("Network is unreachable",)],
        "adv-memory": [("30 GB at once: MemoryError",), ("MemoryError: ",)],
        "adv-fork-loop": [("Resource temporarily unavailable",)],
        "adv-traces-2-find": [("denied find the trace in /tmp: FileNotFoundError",),
                              ("denied find the trace in /dev/shm: FileNotFoundError",),
                              ("denied reach the previous kernel's socket: ConnectionRefusedError",),
                              ("denied read the previous kernel's module state: AttributeError",),
                              ("denied see the zygote's pool: FileNotFoundError",),
                              ("denied mount a file system: PermissionError: [Errno 1]",),
                              ("denied make a user namespace: PermissionError: No space left on device",),
                              ("CAPS []",)],
    }
    for student, needles in expected.items():
        text = attack_output(root, student)
        assert "ATTACK SUCCEEDED" not in text, f"{student}: {text[:1500]}"
        for alternatives in needles:
            assert any(n in text for n in alternatives), f"{student}: {alternatives} not in {text[:1500]}"
    held = re.search(r"held (\d+) GB before the cap", attack_output(root, "adv-memory"))
    assert held and int(held.group(1)) <= 4, "the memory cap is about 4 GB per kernel"
    forked = re.search(r"forked (\d+) processes", attack_output(root, "adv-fork-loop"))
    assert forked and int(forked.group(1)) < 400, "the process cap stops a fork loop"
    assert "daemon started" in attack_output(root, "adv-background")
    assert "traces left" in attack_output(root, "adv-traces-1-leave")
    left = float(attack_output(root, "adv-traces-1-leave").split("traces left")[1].split()[0])
    assert float(attack_output(root, "adv-traces-2-find").split("KERNEL")[1].splitlines()[0].split()[-1]) > left
    pids = re.search(r"PIDS \[([\d, ]*)\]", attack_output(root, "adv-traces-2-find"))
    assert pids and set(map(int, pids.group(1).split(", "))) <= {1, 2}, "a kernel sees only its own processes"


def test_students_kernels_forked_warm_inside_the_sandbox(attacked):
    """Every attacker's kernel was forked from the grader's zygote (the attacks above hold for it)."""
    for student in ATTACKS:
        said = P.read_nb(CourseRoot(attacked["root"]).notebook("autograded", A, student)).metadata[
            sandbox.KERNEL_METADATA]
        assert said == {"sandboxed": True, "warm": True}, student


def test_the_host_loopback_was_not_reached(attacked):
    with pytest.raises(BlockingIOError):
        attacked["listener"].accept()


def test_the_kernel_sees_none_of_the_course_root(attacked):
    root = attacked["root"]
    seen = seen_listings(root, "adv-look-around", needed=[str(root), f"{root}/autograded", "..", "../..",
                                                           "../../..", "/", "/root", "/home", "/etc", "/tmp"])
    assert seen[str(root)] == ["autograded"], "only the path to the notebook's own folder exists"
    assert seen[f"{root}/autograded"] == ["adv-look-around"] == seen["../.."]
    assert seen["../../.."] == ["autograded"]
    assert seen["/root"] in ([], [".pyenv"]) or "Error" in str(seen["/root"]), "no home directory"
    flat = json.dumps(seen)
    for secret in ("gradebook.db", "source", "release", "submitted", "feedback", HONEST, CONTROL, ".git",
                   "nbgrader_config.py", ".pyenv/shims"):
        assert f'"{secret}"' not in flat, f"the kernel can see {secret}"
    # besides its home, the private /tmp holds only the mount points of what is bound into it:
    # the notebook's folder, and the Python environment and course package when they live under
    # /tmp (a clone checked out there, as a CI run may be): read-only binds, nothing else of them
    bound = [root, *sandbox._python_roots(), sandbox._course_package()]
    allowed = {"home", *(p.relative_to("/tmp").parts[0] for p in bound if p and p.is_relative_to("/tmp"))}
    assert {n for n in seen["/tmp"] if not n.startswith(sandbox.PREFIX)} <= allowed, "a private /tmp"


def test_nothing_outside_the_attackers_own_rows_and_files_changed(attacked):
    root, attackers = attacked["root"], attacked["attackers"]
    time.sleep(max(0.0, 6 - attacked["graded_in"]))  # the daemon would have written after 4 s
    files_before, rows_before = attacked["before"]
    assert tree_hashes(root, attackers) == files_before
    assert gradebook_rows(root / "gradebook.db", attackers) == rows_before
    assert not list(root.glob("*escape*")) and not list(root.glob("late-*"))
    assert not list((root / "autograded").glob("*escape*"))
    assert not Path(f"/tmp/escape-{attacked['marker']}.txt").exists()
    assert not Path("/root/escape.txt").exists()


def test_no_feedback_page_contains_hidden_tests(attacked):
    root = attacked["root"]
    secret = hidden_lines(source_nb(A))
    pages = list((root / "feedback").rglob("*.html"))
    assert len(pages) == len(ATTACKS) + 2
    for page in pages:
        text = html.unescape(page.read_text())
        leaked = [line for line in secret if line in text]
        assert not leaked, f"{page} shows hidden test lines: {leaked[:3]}"
    for student in ATTACKS:
        assert not [line for line in secret if line in attack_output(root, student)], student


def test_kernels_and_their_children_are_gone_after_grading(attacked):
    root = attacked["root"]
    files = []
    for student in ("adv-fork-loop", "adv-background", "adv-look-around", "adv-traces-1-leave"):
        files += re.findall(r"-f (\S+\.json)", attack_output(root, student))
    assert len(files) == 4, "each kernel printed its connection file"
    # a kernel forked from the zygote shows the zygote's command line, which names its pool folder
    pools = {str(Path(f).parents[2]) for f in files if "-pool-" in Path(f).parents[2].name}
    assert pools, "the kernels were forked from a zygote"
    assert not processes_mentioning([*files, *pools, attacked["marker"]]), "a sandboxed process outlived grading"
    assert not [pool for pool in pools if Path(pool).exists()], "the zygote's pool folder is removed"
    for connection_file in files:  # the sandbox's private folder (sockets, scratch copy) is removed
        assert not Path(connection_file).parents[1].exists()
    leftovers = [p for parent in sandbox._cgroup_parents().values() for f in files
                 for p in parent.glob(f"{Path(f).parents[1].name}*")]
    assert not leftovers, f"cgroups left behind: {leftovers}"


# ---------------------------------------------------------------- without a sandbox


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "instructor", *args], capture_output=True, text=True,
                          env={**P.tool_env(), **env}, cwd=REPOSITORY.path, timeout=300)


def test_an_unavailable_sandbox_refuses_to_grade_students():
    for command in (["autograde", "01_two_keys"], ["grade-class", "01_two_keys"]):
        proc = _cli(*command, COURSE_SANDBOX_BWRAP="/nonexistent/bwrap")
        assert proc.returncode == 2, proc.stderr
        assert "refusing to grade: the grading sandbox cannot start" in proc.stderr
        assert "--no-sandbox" in proc.stderr


def test_no_sandbox_warns_loudly():
    # an unknown assignment: the warning comes first, then the command stops before grading
    proc = _cli("autograde", "--no-sandbox", "no_such_assignment")
    assert "WITHOUT the OS sandbox" in proc.stderr and "switched off" in proc.stderr
    assert "no assignment 'no_such_assignment'" in proc.stderr


def test_plain_nbgrader_refuses_without_sandbox_and_off_really_is_off(tmp_path):
    course = REPOSITORY.scratch_copy(tmp_path / "course", [A])
    root = course.path
    release, answers = course.release_and_answers(A)
    course.submit(A, "peek", attack_nb(release, answers, ATTACKS["adv-look-around"].replace("ROOT", str(root))))
    refused = subprocess.run([str(P.BIN / "nbgrader"), "autograde", A, "--create"], cwd=root, text=True,
                             capture_output=True, env={**P.tool_env(), "COURSE_SANDBOX_BWRAP": "/nonexistent"})
    assert "refusing to grade: the grading sandbox cannot start" in refused.stderr
    assert not course.notebook("autograded", A, "peek").exists()
    off = subprocess.run([str(P.BIN / "nbgrader"), "autograde", A, "--create", "--force"], cwd=root, text=True,
                         capture_output=True, env={**P.tool_env(), "COURSE_SANDBOX": "off"})
    assert off.returncode == 0, off.stderr[-2000:]
    seen = seen_listings(root, "peek", needed=[str(root)])
    assert "gradebook.db" in seen[str(root)], "without the sandbox the kernel sees the gradebook"
    assert course.results(A)["peek"].auto_score == CLASS_POINTS


def test_sandbox_status_reports_why():
    ok, reason = sandbox.sandbox_status()
    assert ok and "bubblewrap" in reason
    env = {**os.environ, "COURSE_SANDBOX_BWRAP": "/nonexistent"}
    code = "from nboracle.grader import sandbox; print(sandbox.sandbox_status())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout
    assert "(False, \"bwrap not found ('/nonexistent' is not executable)\")" in out
    off = subprocess.run([sys.executable, "-c", code], env={**env, "COURSE_SANDBOX": "off"},
                         capture_output=True, text=True).stdout
    assert "switched off" in off


@pytest.mark.skipif(not sandbox.sandbox_status()[0], reason="no working bubblewrap on this machine")
def test_a_plot_in_the_sandbox_finds_the_font_settings(tmp_path):
    """matplotlib's text in a sandboxed kernel finds fontconfig's settings: no error in the output."""
    plot = ("import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot as plt\n"
            "plt.figure(); plt.title('attention'); plt.savefig('/tmp/plot.png'); print('saved')")
    args = sandbox._base_args(sandbox.bwrap_path())
    done = subprocess.run([*args, sys.executable, "-c", plot], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "saved" in done.stdout, done.stderr[-2000:]
    assert "Fontconfig" not in done.stderr, done.stderr[-2000:]
