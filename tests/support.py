"""What the test modules share: scratch courses, grading a chapter's simulated students, the
secret lines (solutions, hidden tests) that must never reach a student, a class of honest and
adversarial students, and a throw-away PostgreSQL server.

Test modules import from here, never from each other.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nboracle.classroom import pipeline as P
from nboracle.classroom.course_root import CourseRoot
from nboracle.grader.nbgrader_ext import review_reasons

from instructor.repository import REPOSITORY
from instructor.zoo import Variant, alternatives_for, library_for, variants_for

ASSIGNMENTS = REPOSITORY.assignments()
SOLUTION, STUB = "solution", "stub"
ALTERNATIVE = "alt"  # student-id prefix of the alternatives zoo
LIBRARY = "lib"  # student-id prefix of the answers through a library substitute (flagged for review)

_SCRATCH: dict[str, CourseRoot] = {}


def scratch_course(scratch_root: Path, assignment: str) -> CourseRoot:
    """A released scratch copy of one assignment (made once per test process)."""
    if assignment not in _SCRATCH:
        _SCRATCH[assignment] = REPOSITORY.scratch_copy(scratch_root / assignment, [assignment])
    return _SCRATCH[assignment]


def source_nb(assignment: str) -> nbformat.NotebookNode:
    return P.read_nb(REPOSITORY.notebook("source", assignment))


def automatic_points(assignment: str) -> float:
    """The points of the chapter's autograded test cells (the written answers are graded by hand): what the
    reference solution earns automatically."""
    return sum(float(cell.metadata["nbgrader"].get("points", 0)) for cell in source_nb(assignment).cells
               if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade")
               and not cell.metadata["nbgrader"].get("solution"))


# ---------------------------------------------------------------- grading a chapter


@dataclass
class GradedChapter:
    root: CourseRoot
    assignment: str
    variants: dict[str, Variant]
    results: dict[str, P.Result]
    alternatives: dict[str, Variant] = field(default_factory=dict)
    library: dict[str, Variant] = field(default_factory=dict)

    def variant_result(self, variant: Variant) -> P.Result:
        return self.results[variant.student_id()]

    def alternative_result(self, alternative: Variant) -> P.Result:
        return self.results[alternative.student_id(ALTERNATIVE)]

    def library_result(self, answer: Variant) -> P.Result:
        return self.results[answer.student_id(LIBRARY)]


@contextmanager
def trusted_kernels():
    """Grade the course's own code (solutions, stubs, both zoos) fast: no OS sandbox, and
    kernels forked from a process that imported torch once (nbgrader-oracle/nboracle/grader/forkserver.py).

    What these runs prove is how the graded tests score and what they say; the sandbox is
    proven where untrusted students are graded (test_sandbox, test_oracle_attacks,
    test_class_batch, test_course_root_copy), with kernels started as in a real class.
    """
    with P.environment({"COURSE_SANDBOX": "off", "COURSE_KERNEL_FORK": "1"}):
        yield


def grade_chapter(root: CourseRoot, assignment: str) -> GradedChapter:
    """Grade the solution, the stub, every bug-zoo variant, every alternative and every answer
    through a library substitute of an assignment in one nbgrader run."""
    release_nb, answers = root.release_and_answers(assignment)
    root.submit(assignment, SOLUTION, P.fill(release_nb, answers))
    root.submit(assignment, STUB, release_nb)
    variants = {v.name: v for v in variants_for(assignment)}
    for variant in variants.values():
        root.submit(assignment, variant.student_id(), P.fill(release_nb, variant.answers(answers)))
    alternatives = {v.name: v for v in alternatives_for(assignment)}
    for alternative in alternatives.values():
        root.submit(assignment, alternative.student_id(ALTERNATIVE), P.fill(release_nb, alternative.answers(answers)))
    library = {v.name: v for v in library_for(assignment)}
    for answer in library.values():
        root.submit(assignment, answer.student_id(LIBRARY), P.fill(release_nb, answer.answers(answers)))
    with trusted_kernels():
        root.autograde(assignment)
    expected = ({SOLUTION, STUB} | {v.student_id() for v in variants.values()}
                | {v.student_id(ALTERNATIVE) for v in alternatives.values()}
                | {v.student_id(LIBRARY) for v in library.values()})
    for student in sorted(s for s in expected if not root.notebook("autograded", assignment, s).exists()):
        # nbgrader gives up on a notebook whose kernel did not start (a loaded machine):
        # try that student once more on its own before judging anything
        with trusted_kernels():
            root.nbgrader("autograde", assignment, "--force", "--create", f"--student={student}", check=False)
    root.feedback(assignment)
    return GradedChapter(root, assignment, variants, root.results(assignment), alternatives, library)


# ---------------------------------------------------------------- secret lines


_GRADED: dict = {}


def graded_chapter(scratch_root: Path, assignment: str) -> GradedChapter:
    """The chapter's one nbgrader run on this test worker (solution, stub and both zoos), shared by every test module."""
    if assignment not in _GRADED:
        _GRADED[assignment] = grade_chapter(scratch_course(scratch_root, assignment), assignment)
    return _GRADED[assignment]


def split_regions(nb, begin, end, skip=lambda cell: False):
    """Stripped lines inside ``begin``..``end`` regions, and the set of all other lines."""
    inside, outside = [], set()
    for cell in nb.cells:
        if skip(cell):
            continue
        within = False
        for line in cell.source.splitlines():
            if begin in line:
                within = True
            elif end in line:
                within = False
            else:
                (inside.append if within else outside.add)(line.strip())
    return inside, outside


def hidden_lines(nb):
    """Distinctive lines of the hidden test regions that appear nowhere else in the notebook."""
    hidden, outside = split_regions(nb, "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
    return [line for line in hidden if len(line) >= 30 and line not in outside]


def solution_lines(nb):
    """Distinctive lines of the solutions (code regions and written model answers) found
    nowhere else in the notebook."""
    def written_answer(cell):
        return cell.cell_type == "markdown" and cell.metadata.get("nbgrader", {}).get("solution")

    inside, outside = split_regions(nb, "BEGIN SOLUTION", "END SOLUTION", skip=written_answer)
    inside += [line.strip() for cell in nb.cells if written_answer(cell) for line in cell.source.splitlines()]
    return [line for line in inside if len(line) >= 20 and line not in outside]


# ---------------------------------------------------------------- a class of students

CLASS_ASSIGNMENT, CLASS_NOTEBOOK = A, NB = "01_two_keys", "two_keys"
CLASS_POINTS = int(automatic_points(CLASS_ASSIGNMENT))  # what the solution earns automatically (12)

PATCH_CHECKS = '''
import numpy, torch, torch.testing, course, course.checks
numpy.allclose = lambda *a, **k: True
torch.allclose = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None
for _name in ["check_close", "check_shape", "check_rows_sum_to_one", "check_finite", "check_true"]:
    setattr(course.checks, _name, lambda *a, **k: None)
    setattr(course, _name, lambda *a, **k: None)
    globals()[_name] = lambda *a, **k: None
'''


# Attacks on the kernel's execution machinery: each is added to the softmax cell of a student
# whose softmax normalises the wrong axis (zoo variant softmax_axis0), so every later test runs
# after the attack. Each must earn exactly what that wrong code earns, and be flagged.
SKIP_TESTS = "lambda lines: ['pass\\n'] if any('check' in l or 'assert' in l for l in lines) else lines"
ATTACKS = {
    "input-transformer": f"""
_ip = get_ipython()
_ip.input_transformers_cleanup.append({SKIP_TESTS})
_ip.input_transformer_manager.line_transforms.append({SKIP_TESTS})
_ip.input_transformers_post.append({SKIP_TESTS})
""",
    "ast-transformer": """
import ast
class _SwallowErrors(ast.NodeTransformer):
    def visit_Module(self, node):
        handler = ast.ExceptHandler(type=None, name=None, body=[ast.Pass()])
        node.body = [ast.Try(body=node.body, handlers=[handler], orelse=[], finalbody=[])]
        return node
get_ipython().ast_transformers.append(_SwallowErrors())
""",
    "custom-exc": """
get_ipython().set_custom_exc((Exception,), lambda shell, etype, value, tb, tb_offset=None: None)
""",
    "showtraceback": """
_ip = get_ipython()
_ip.showtraceback = lambda *a, **k: None
type(_ip).showtraceback = lambda *a, **k: None
type(_ip)._showtraceback = lambda *a, **k: None
""",
    "cleared-events": PATCH_CHECKS + """
for _callbacks in get_ipython().events.callbacks.values():
    _callbacks.clear()
""",
    "course-noop": """
import sys
for _name, _module in list(sys.modules.items()):
    if _name == "course" or _name.startswith("course."):
        for _attr, _value in list(vars(_module).items()):
            if callable(_value) and not isinstance(_value, type(sys)):
                setattr(_module, _attr, lambda *a, **k: None)
for _name in list(globals()):
    if _name.startswith("check_"):
        globals()[_name] = lambda *a, **k: None
""",
    "settrace": """
import sys, linecache
def _skip_checks(frame, event, arg):
    if event == "line":
        line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
        if "check" in line or "assert" in line:
            try:
                frame.f_lineno = frame.f_lineno + 1
            except ValueError:
                pass
    return _skip_checks
sys.settrace(lambda frame, event, arg: _skip_checks if frame.f_code.co_name == "<module>" else None)
""",
    "excepthook": """
import sys
sys.excepthook = lambda *a: None
sys.displayhook = lambda value: None
""",
    "builtins": """
import builtins
class _Never(Exception):
    pass
builtins.AssertionError = _Never
builtins.isinstance = lambda *a: True
builtins.abs = lambda x: 0
builtins.all = lambda *a: True
builtins.bool = lambda *a: True
builtins.max = lambda *a, **k: 0
""",
    # messages the grader cannot verify: a wrong signature, and a signed header that is not JSON
    "forged-messages": """
import json as _json
_kernel = get_ipython().kernel
_parts = [_json.dumps(part).encode() for part in
          ({"msg_id": "forged", "msg_type": "stream"}, {}, {}, {"name": "stdout", "text": "forged"})]
_kernel.iopub_socket.send_multipart([b"stream.stdout", b"<IDS|MSG>", b"0" * 64, *_parts])
_garbled = [b"not json", *_parts[1:]]
_kernel.iopub_socket.send_multipart([b"stream.stdout", b"<IDS|MSG>", _kernel.session.sign(_garbled), *_garbled])
# signed and addressed to this cell, but no stream nbclient could write down
_kernel.session.send(_kernel.iopub_socket, "stream", {"name": "stdout"}, parent=_kernel.get_parent())
""",
}
# the same trick played from inside the student's own function, while a test cell calls it: the
# tests run in the grader, so it earns nothing, and the static scan flags it
IN_CALL = """
def softmax(scores, axis=-1, _wrong=softmax):
    import sys
    sys.settrace(lambda *a: None)
    return _wrong(scores, axis)
"""


def build_class(root):
    """{student: notebook or raw text} of a class of honest, empty, buggy and adversarial students
    of :data:`CLASS_ASSIGNMENT` (tests/test_class_batch.py says what each must get)."""
    release, answers = root.release_and_answers(A)
    zoo = {v.name: v for v in variants_for(A)}
    axis0 = zoo["softmax_axis0"].answers(answers)
    hand = answers["hand_answers"]

    def with_(cells, edit=None):
        nb = P.fill(release, cells)
        if edit:
            edit(nb)
        return nb

    def blank_tests(nb):
        for cell in nb.cells:
            if (P.grade_id(cell) or "").startswith("test_"):
                cell.source = "pass  # I trust my code"

    def drop_tests(nb):
        nb.cells = [c for c in nb.cells if not (P.grade_id(c) or "").startswith("test_softmax")]

    def duplicate_ids(nb):
        nb.cells[3].id = nb.cells[2].id

    cls = {f"correct-{i}": with_(answers) for i in range(2)}
    # an honest cell may end with a value that the notebook displays: never a reason for review
    cls["correct-2"] = with_({**answers, "hand_answers": hand + "\nHAND_WEIGHTS"})
    cls.update({f"empty-{i}": release for i in range(2)})
    cls.update({f"bug-{name}": with_(zoo[name].answers(answers))
                for name in ("softmax_axis0", "attention_no_scale", "attention_hardcoded_two_keys")})
    cls.update({
        "adv-blanked-tests": with_(axis0, blank_tests),
        "adv-deleted-tests": with_(axis0, drop_tests),
        "adv-patched-checks": with_({**axis0, "softmax": axis0["softmax"] + PATCH_CHECKS}),
        "adv-sys-exit": with_({**answers, "hand_answers": "import sys\nsys.exit(0)\n" + hand}),
        "adv-raise-systemexit": with_({**answers, "hand_answers": "raise SystemExit\n" + hand}),
        "adv-os-exit": with_({**answers, "hand_answers": "import os\nos._exit(0)"}),
        "adv-infinite-loop": with_({**answers, "hand_answers": "while True:\n    pass"}),
        "adv-megabytes": with_({**answers, "hand_answers": hand + "\nprint('x' * 5_000_000)"}),
        "adv-duplicate-ids": with_(answers, duplicate_ids),
        "adv-not-json": "{ this is not a notebook",
    })
    cls.update({f"atk-{name}": with_({**axis0, "softmax": axis0["softmax"] + code}) for name, code in ATTACKS.items()})
    cls["atk-in-call"] = with_({**axis0, "softmax": axis0["softmax"] + IN_CALL})
    return cls


# ---------------------------------------------------------------- a throw-away PostgreSQL server
# A throw-away PostgreSQL server for tests and the benchmark (Debian's postgresql package).
#
# ``.ci/install-postgres`` installs the package; :func:`start_postgres` runs ``initdb`` and ``pg_ctl``
# in a temporary folder on a free loopback port (as the ``postgres`` user when we are root:
# postgres refuses to run as root) and returns a :class:`PostgresServer` whose ``url`` nbgrader
# takes as ``CourseDirectory.db_url``; it raises :class:`PostgresUnavailable` with the reason
# when no server can start here, so tests can skip with that message.


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server can be started on this machine (the message says why)."""


def _pg_bin(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None)
    if not found:
        raise PostgresUnavailable(f"PostgreSQL's {name} is not installed (run .ci/install-postgres, or apt-get install postgresql)")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PostgresServer:
    folder: Path
    port: int
    as_user: list[str]

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://course@127.0.0.1:{self.port}/gradebook"

    def stop(self) -> None:
        subprocess.run([*self.as_user, _pg_bin("pg_ctl"), "-D", str(self.folder / "data"), "-m", "immediate", "stop"],
                       capture_output=True, text=True)
        shutil.rmtree(self.folder, ignore_errors=True)


def start_postgres() -> PostgresServer:
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    as_user: list[str] = []
    folder = Path(tempfile.mkdtemp(prefix="course-pg-"))
    if os.geteuid() == 0:
        try:
            import pwd

            user = pwd.getpwnam("postgres")
        except KeyError:
            raise PostgresUnavailable("running as root and there is no `postgres` user to run the server as") from None
        os.chown(folder, user.pw_uid, user.pw_gid)
        runuser = shutil.which("runuser") or shutil.which("su")
        if not runuser:
            raise PostgresUnavailable("running as root and neither runuser nor su is available")
        as_user = [runuser, "-u", "postgres", "--"] if runuser.endswith("runuser") else None
        if as_user is None:
            raise PostgresUnavailable("running as root and only `su` is available: install util-linux's runuser")
    port = _free_port()
    data = folder / "data"

    def run(*args: str) -> None:
        proc = subprocess.run([*as_user, *args], capture_output=True, text=True, cwd=folder)
        if proc.returncode != 0:
            shutil.rmtree(folder, ignore_errors=True)
            raise PostgresUnavailable(f"{' '.join(args[:2])} failed: {(proc.stderr or proc.stdout)[-800:]}")

    run(initdb, "-D", str(data), "-U", "course", "--auth=trust", "--encoding=UTF8", "--no-sync")
    run(pg_ctl, "-D", str(data), "-w", "-t", "60", "-l", str(folder / "server.log"), "-o",
        f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100", "start")
    server = PostgresServer(folder, port, as_user)
    try:
        import psycopg2

        conn = psycopg2.connect(host="127.0.0.1", port=port, user="course", dbname="postgres")
        conn.autocommit = True
        conn.cursor().execute("CREATE DATABASE gradebook")
        conn.close()
    except Exception as err:
        server.stop()
        raise PostgresUnavailable(f"the server started but refused a connection: {err}") from None
    return server


# ---------------------------------------------------------------- attacks on the grader (tests/test_*attacks*.py)
# A class of one chapter graded in one nbgrader run: the solution, the stub, the honest wrong code and each
# attack (the wrong code followed by the attack's cell), sandboxed as real students are.

# A module that learns it is being graded turns its bug off. It learns it if the grader reads its
# state through anything of the student's class: a class-defined __dict__, an instance dict of a
# dict subclass whose get the grader calls, tables of a dict subclass, a class-level `training` the
# grader writes around. <<RIGHT>> becomes the chapter's correct class, built in a namespace of its
# own as _Right by with_right (so no helper of the wrong code is replaced): what the attacker switches to when graded.
BUILD_RIGHT = """
import sys as _sys
_right_namespace = dict(globals())
exec(_RIGHT_SOURCE, _right_namespace)
_Right = _right_namespace[_CLASS]
_graded = []  # set when something other than torch's own code reads the module's dict

def _asked_by_the_grader(depth=2):
    return "/torch/" not in _sys._getframe(depth).f_code.co_filename
"""


def with_right(attacks: dict[str, str], answers: dict, cell: str, cls: str) -> dict[str, str]:
    """Each attack preceded by the chapter's correct cell as text, for BUILD_RIGHT to build."""
    head = f"_RIGHT_SOURCE = {answers[cell]!r}\n_CLASS = {cls!r}\n"
    return {name: head + code if "_RIGHT_SOURCE" in code else code for name, code in attacks.items()}


def grade(tmp_path_factory, assignment: str, cell: str, wrong: str, attacks: dict[str, str], timeout: int = 20):
    root = REPOSITORY.scratch_copy(tmp_path_factory.mktemp(assignment), [assignment])
    with open(root.config, "a") as config:  # an endless call is interrupted quickly in the test
        config.write(f"\nc.Execute.timeout = {timeout}\n")
    release, answers = root.release_and_answers(assignment)
    students = {"solution": answers, "stub": None, "honest-wrong": {**answers, cell: wrong}}
    students.update({f"atk-{name}": {**answers, cell: wrong + "\n" + code} for name, code in attacks.items()})
    for student, cells in students.items():
        root.submit(assignment, student, release if cells is None else P.fill(release, cells))
    root.autograde(assignment)
    results = root.results(assignment)
    reviews = {s: review_reasons(P.read_nb(root.notebook("autograded", assignment, s))) for s in students}
    return results, reviews


def check_class(results, reviews, attacks, full: float):
    assert results["solution"].auto_score == results["solution"].auto_max == full
    assert results["stub"].auto_score == 0
    honest = results["honest-wrong"].auto_score
    for student, result in results.items():  # shown with pytest -rP: what each student earned and lost
        print(f"{student:40s} {result.auto_score:5.1f} / {result.auto_max:g}  failed: {sorted(result.failed())}")
    assert 0 < honest < full
    gained = {name: (results[f"atk-{name}"].auto_score, honest) for name in attacks
              if results[f"atk-{name}"].auto_score > honest}
    assert not gained, f"attacks earned more than the wrong code they hide (score, honest): {gained}"
    flagged = {s: reviews[s] for s in ("solution", "stub", "honest-wrong") if reviews[s]}
    assert not flagged, flagged


def grade_against_variant(tmp_path_factory, assignment: str, variant: str, cell: str, attacks: dict[str, str],
                          cls: str | None = None):
    """The class of :func:`grade` whose wrong code is the bug-zoo variant ``variant``'s ``cell`` (``cls``: the
    class the cell defines, for the attacks that switch to the correct one, :func:`with_right`)."""
    wrong = next(v for v in variants_for(assignment) if v.name == variant)
    _, answers = REPOSITORY.release_and_answers(assignment)
    attacks = with_right(attacks, answers, cell, cls) if cls else attacks
    return grade(tmp_path_factory, assignment, cell, wrong.answers(answers)[cell], attacks)
