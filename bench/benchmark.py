"""Speed figures of the course, measured side by side in one run (never a timed test).

    python bench/benchmark.py                 # everything
    python bench/benchmark.py --only notebooks

1. notebooks: each source notebook executed top to bottom (nbclient), against its budget
   (``source/budgets.txt``), with ``COURSE_QUICK_DEMOS=1``: a demo of minutes (chapter 10's
   1,000-step training, which autograde skips) runs short, as in the suite;
2. autograde: one student's autograde over plain nbclient execution of the same notebook;
3. class: throughput of the class batch with --jobs 1 versus --jobs 2;
4. startup: a bare nbgrader start, and what rfc3987_syntax would add to it;
5. lab: ``make lab`` start-up to a usable notebook (headless Chromium: server up, notebook
   open, kernel idle), and the first cell run.
6. batch: per student in a class batch (--jobs 1), the batch (autograde and feedback in
   long-lived workers) over plain nbclient execution of the same notebooks, and the old way
   (one `nbgrader autograde` and one `nbgrader generate_feedback` process per student).
7. sandbox: nbgrader autograde per student and a bare kernel start, inside the OS sandbox
   (nbgrader-oracle/nboracle/grader/sandbox.py) over without it, interleaved on the same students.
8. cluster: the class batch on a Dask LocalCluster of 2 worker processes versus --jobs 2
   (``--cluster-students``, default 200, on 01_two_keys), the instructor side alone (the
   pipeline with the grading replaced by the results just prepared), and the estimate for
   1,000 students x 8 chapters on 10 and 50 machines (``--only cluster``).
9. check: ``make check NB=...`` on a solved notebook whose source did not change, over plain
   nbclient execution of the same notebook, interleaved (``--only check``; ``--check-chapters``,
   default 01 and 09, ``all`` for every chapter).
10. oracle: nbgrader autograde per student with graded tests in the grader's process
    (nbgrader-oracle/nboracle/grader/oracle.py, ``COURSE_ORACLE=on``) over today's in-kernel tests (``off``),
    interleaved on the same students, per chapter (``--oracle-chapters``; target <= 1.15).
11. fork: one nbgrader run of ``--students`` students without the sandbox, kernels forked from
    a process that imported torch once (nbgrader-oracle/nboracle/grader/forkserver.py, what the test suite uses for
    the course's own code) over kernels started as usual, 01 and 09 (``--only fork``).
12. training: chapter 07's locked ``train`` (301 steps, the solution's model, one thread) with
    ``AdamW(..., fused=True)``, as the notebook has it, over the plain per-parameter loop,
    interleaved; the losses of both must agree (``--only training``).

The machine is shared and noisy: each figure is the median of ``--repeat`` runs.

Each section's figure is written into its row of the table in docs/SPEED.md, between the
``<!-- bench:begin -->`` and ``<!-- bench:end -->`` markers, with the date, the load and the
arguments of the run; rows of sections not run stay as they were, prose outside the markers is
never touched (``--no-write-docs`` only prints).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# headless figures for the notebooks executed here (the Makefile no longer exports it: Lab
# would hand it to every kernel); the Lab seats measured in section 5 drop it again
os.environ.setdefault("MPLBACKEND", "Agg")

import nbformat  # noqa: E402
from nbclient import NotebookClient  # noqa: E402
from nboracle.classroom import batch  # noqa: E402
from nboracle.classroom import pipeline as P  # noqa: E402
from nboracle.classroom.course_root import CourseRoot  # noqa: E402
from nboracle.grader import sandbox  # noqa: E402

from instructor.repository import REPO, REPOSITORY  # noqa: E402

A = "01_two_keys"

SPEED = Path(__file__).resolve().parents[1] / "docs" / "SPEED.md"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
# what each section measures, in the table's order (the section's name is its row's key and
# the anchor of its notes below the table in docs/SPEED.md)
WHAT = {
    "notebooks": "source notebooks top to bottom (budgets: `source/budgets.txt`)",
    "autograde": "one student: autograde over plain nbclient execution",
    "batch": "per student in a class batch (`--jobs 1`) over plain execution",
    "class": "class batch, `--jobs 2` over `--jobs 1`",
    "check": "`make check NB=...`, source unchanged, over plain execution",
    "startup": "`nbgrader --version` start-up",
    "lab": "`make lab` to a usable notebook, over plain `jupyter lab`",
    "sandbox": "autograde per student in the OS sandbox over without it",
    "cluster": "class batch on a Dask LocalCluster of 2 over `--jobs 2`",
    "oracle": "graded tests in the grader (the oracle) over in the kernel",
    "fork": "forked grading kernels over kernels started as usual",
    "training": "chapter 07's `train`, fused AdamW over the per-parameter loop",
}
HEADER = "| section | what | figure | run |\n|---|---|---|---|"
ROW = re.compile(r"^\| \[`(\w+)`\]")


def speed_row(section: str, figure: str, run: str) -> str:
    return f"| [`{section}`](#{section}) | {WHAT[section]} | {figure} | {run} |"


def write_docs(figures: dict[str, str | None], run: str, path: Path = SPEED) -> list[str]:
    """Put each measured section's row into the table between the markers; the rest stays as it was."""
    text = path.read_text()
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise SystemExit(f"{path}: expected one {BEGIN} ... {END} block for the bench table")
    head, rest = text.split(BEGIN)
    table, tail = rest.split(END)
    rows = {m.group(1): line for line in table.splitlines() if (m := ROW.match(line))}
    unknown = sorted(set(rows) - set(WHAT))
    if unknown:
        raise SystemExit(f"{path}: rows of unknown sections {unknown} in the bench table")
    written = [name for name, figure in figures.items() if figure]
    for name in written:
        rows[name] = speed_row(name, figures[name], run)
    body = "\n".join([HEADER] + [rows[name] for name in WHAT if name in rows])
    path.write_text(f"{head}{BEGIN}\n{body}\n{END}{tail}")
    return written


def describe_run(argv: list[str]) -> str:
    """The run column: date, cores, load average at the start, the arguments."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    args = " ".join(a for a in argv if a != "--no-write-docs")
    return (f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}, {os.cpu_count()} cores, load {load:.1f}"
            + (f", `{args}`" if args else ""))


def timed(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _env(**values: str):
    """Environment variables set for a block, then put back as they were."""
    return P.environment(values)


def execute(nb_path: Path, cwd: Path) -> None:
    nb = nbformat.read(str(nb_path), as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(cwd)}}).execute()


def bench_notebooks(repeat: int) -> str:
    print("\n## 1. source notebooks, executed top to bottom (median of", repeat, "runs)")
    print(f"{'assignment':<26}{'seconds':>9}{'budget':>8}{'time/budget':>13}")
    budgets = REPOSITORY.budgets()
    figures = []
    for name in REPOSITORY.assignments():
        nb = REPOSITORY.notebook("source", name)
        with P.environment({"COURSE_QUICK_DEMOS": "1"}):  # minutes-long demos (10's training) run short, as graded
            seconds = timed(lambda nb=nb: execute(nb, nb.parent), repeat)
        budget = budgets.get(name, float("nan"))
        print(f"{name:<26}{seconds:>9.1f}{budget:>8g}{seconds / budget:>13.2f}")
        figures.append(f"{name[:2]} {seconds:.1f}")
    return ", ".join(figures) + " s"


def _class_root(workdir: Path, n_students: int, assignment: str = A) -> CourseRoot:
    root = REPOSITORY.scratch_copy(workdir, [assignment])
    release, answers = root.release_and_answers(assignment)
    for i in range(n_students):
        root.submit(assignment, f"student-{i:02d}", P.fill(release, answers) if i % 2 == 0 else release)
    return root


def _api(root: CourseRoot):
    """nbgrader's API on ``root``, as the formgrader holds it (its server grades in its own process)."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    config = root.settings()
    config.CourseDirectory.root = str(root.path)
    return NbGraderAPI(CourseDirectory(config=config), config=config)


def bench_autograde(repeat: int) -> str:
    print("\n## 2. one student's notebook: autograde over plain nbclient execution (interleaved, median of",
          repeat, "each)")
    print("   formgrader: nbgrader's API in a process that has graded before (the formgrader's server, a class "
          "batch worker); CLI: one `nbgrader autograde` process; warm/usual: kernels forked from the sandboxed "
          "zygote (nboracle/grader/warm.py) or started as a fresh Python in bubblewrap")
    with tempfile.TemporaryDirectory() as tmp:
        root = _class_root(Path(tmp), 1)
        nb = root.notebook("submitted", A, "student-00")
        ways = {"plain": lambda: execute(nb, nb.parent)}
        for kernels in ("on", "off"):
            with _env(COURSE_KERNEL_WARM=kernels), contextlib.chdir(root.path):
                api = _api(root)
                assert api.autograde(A, "student-00", force=True, create=True)["success"]  # the server's first
            def formgrader(api=api, kernels=kernels):
                with _env(COURSE_KERNEL_WARM=kernels), contextlib.chdir(root.path):
                    assert api.autograde(A, "student-00", force=True, create=True)["success"]

            def cli(kernels=kernels):
                with _env(COURSE_KERNEL_WARM=kernels):
                    root.autograde(A, "student-00")
            ways[f"formgrader, {'warm' if kernels == 'on' else 'usual'}"] = formgrader
            ways[f"CLI, {'warm' if kernels == 'on' else 'usual'}"] = cli
        times = {name: [] for name in ways}
        for _ in range(repeat):
            for name, way in ways.items():
                times[name].append(timed(way, 1))
    median = {name: statistics.median(t) for name, t in times.items()}
    plain = median.pop("plain")
    print(f"plain execution {plain:6.2f} s")
    for name, seconds in median.items():
        print(f"{name:<20} {seconds:6.2f} s | ratio over plain {seconds / plain:5.2f}")
    return (f"formgrader **{median['formgrader, warm'] / plain:.2f}** ({median['formgrader, warm']:.1f} s / "
            f"{plain:.1f} s; usual kernels {median['formgrader, usual'] / plain:.2f}); command "
            f"{median['CLI, warm'] / plain:.2f} (usual {median['CLI, usual'] / plain:.2f})")


def bench_class(n_students: int) -> str:
    print(f"\n## 3. class batch throughput, {n_students} students of {A}")
    with tempfile.TemporaryDirectory() as tmp:
        root = _class_root(Path(tmp), n_students)
        rows = {}
        for jobs in (1, 2):
            start = time.perf_counter()
            reports = batch.grade_class(root, A, jobs=jobs, regrade=True, progress=False)
            rows[jobs] = time.perf_counter() - start
            assert all(r.status == "graded" for r in reports.values())
    for jobs, seconds in rows.items():
        print(f"--jobs {jobs}: {seconds:6.1f} s, {60 * n_students / seconds:5.1f} students/minute")
    print(f"speed-up --jobs 2 over --jobs 1: {rows[1] / rows[2]:4.2f}x")
    return (f"**{rows[1] / rows[2]:.2f}x** ({rows[1]:.1f} s vs {rows[2]:.1f} s; "
            f"{60 * n_students / rows[1]:.1f} vs {60 * n_students / rows[2]:.1f} students/minute)")


def bench_batch(n_students: int) -> str:
    print(f"\n## 6. per student in a class batch of {n_students} ({A}, --jobs 1): batch over plain execution")
    with tempfile.TemporaryDirectory() as tmp:
        root = _class_root(Path(tmp), n_students)
        names = root.students(A)
        start = time.perf_counter()
        for student in names:
            nb = root.notebook("submitted", A, student)
            execute(nb, nb.parent)
        plain = (time.perf_counter() - start) / n_students
        start = time.perf_counter()
        reports = batch.grade_class(root, A, jobs=1, regrade=True, progress=False)
        workers = (time.perf_counter() - start) / n_students
        assert all(r.status == "graded" for r in reports.values())
        start = time.perf_counter()
        for student in names:
            assert batch.grade_student(root, A, student).status == "graded"
        per_process = (time.perf_counter() - start) / n_students
    print(f"plain execution {plain:5.2f} s/student | batch with workers {workers:5.2f} s/student | "
          f"one nbgrader process per step {per_process:5.2f} s/student")
    print(f"ratio batch/plain {workers / plain:5.2f} (target <= 1.3) | "
          f"before (a process per step)/plain {per_process / plain:5.2f}")
    return f"**{workers / plain:.2f}** ({workers:.1f} s / {plain:.1f} s); a process per step: {per_process / plain:.2f}"


def bench_startup(repeat: int) -> str:
    print("\n## 4. tool start-up")
    python = sys.executable
    bare = timed(lambda: subprocess.run([python, "-c", "pass"], check=True), repeat)
    nbgrader = timed(lambda: subprocess.run([str(P.BIN / "nbgrader"), "--version"], check=True,
                                            capture_output=True), repeat)
    print(f"python -c pass {bare:5.2f} s | nbgrader --version {nbgrader:5.2f} s")
    probe = subprocess.run([python, "-c", "import importlib.util as u; print(bool(u.find_spec('rfc3987_syntax')))"],
                           capture_output=True, text=True)
    if probe.stdout.strip() == "True":
        cost = timed(lambda: subprocess.run([python, "-c", "import rfc3987_syntax"], check=True), repeat) - bare
        print(f"rfc3987_syntax is installed and adds {cost:4.2f} s to every start: `make setup` removes it")
        return f"**{nbgrader:.2f} s**, with `rfc3987_syntax` installed (it adds {cost:.2f} s)"
    print("rfc3987_syntax is not installed (make setup removes it): nothing to add")
    return f"**{nbgrader:.2f} s** (`python -c pass`: {bare:.2f} s)"


def bench_lab(repeat: int) -> str | None:
    print("\n## 5. Lab start-up: `make lab` to the first usable notebook (headless Chromium)")
    sys.path.insert(0, str(REPO / "tests" / "browser"))
    import seats  # noqa: E402 (the browser suite's helpers)

    reason = seats._missing()
    if reason:
        print(f"skipped: {reason}")
        return None
    from lab import Lab  # noqa: E402

    def measure(start_server):
        rows = []
        for _ in range(repeat):
            with tempfile.TemporaryDirectory() as tmp, seats.driver_session() as driver:
                start = time.perf_counter()
                with start_server(Path(tmp)) as server:
                    up = time.perf_counter()
                    lab = Lab(driver, server, seats.ARTIFACTS, "bench")
                    lab.open("01_two_keys/two_keys.ipynb", what="bench-opened")
                    usable = time.perf_counter()
                    lab.run_cell(1)
                    ran = time.perf_counter()
            rows.append((up - start, usable - start, ran - usable))
        return [statistics.median(r[i] for r in rows) for i in range(3)]

    def seat(tmp):
        return seats.seat("lab", f"--folder={tmp / 'workspace'}", log_name="bench-lab")

    def plain(tmp):  # what `make lab` did before: jupyter lab on a copy of release/
        shutil.copytree(REPO / "release", tmp / "release")
        argv = [str(P.BIN / "jupyter"), "lab", "--no-browser", f"--ServerApp.root_dir={tmp / 'release'}",
                "--allow-root"]
        return seats.server(argv, "bench-plain-lab", cwd=tmp)

    results = {"make lab (the workspace seat)": measure(seat), "plain jupyter lab": measure(plain)}
    print(f"{'':<32}{'server up':>10}{'usable':>9}{'1st cell':>10}   (seconds; usable = notebook open, kernel idle)")
    for name, (up, usable, first) in results.items():
        print(f"{name:<32}{up:>10.1f}{usable:>9.1f}{first:>10.1f}")
    ratio = results["make lab (the workspace seat)"][1] / results["plain jupyter lab"][1]
    print(f"time to a usable notebook, make lab over plain jupyter lab: {ratio:4.2f}")
    lab = results["make lab (the workspace seat)"]
    return f"**{ratio:.2f}** ({lab[1]:.1f} s vs {results['plain jupyter lab'][1]:.1f} s)"


def _kernel_start(manager: type) -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import course, torch")])
    with tempfile.TemporaryDirectory() as tmp:
        NotebookClient(nb, timeout=600, kernel_name="python3", kernel_manager_class=manager,
                       resources={"metadata": {"path": tmp}}).execute()


def bench_sandbox(n_students: int, repeat: int) -> str:
    print(f"\n## 7. OS sandbox: sandboxed over unsandboxed, {n_students} students of {A}, interleaved")
    ok, reason = sandbox.sandbox_status()
    print(("sandbox: " if ok else "SKIPPED, no sandbox here: ") + reason)
    if not ok:
        return
    from jupyter_client.manager import AsyncKernelManager

    times: dict[str, list[float]] = {"on": [], "off": []}
    starts: dict[str, list[float]] = {"on": [], "off": []}
    with tempfile.TemporaryDirectory() as tmp:
        root = _class_root(Path(tmp), n_students)
        for r in range(repeat):
            for i in range(n_students):
                for mode in (("on", "off") if (i + r) % 2 == 0 else ("off", "on")):
                    with _env(**{sandbox.ENV: mode}):
                        start = time.perf_counter()
                        root.autograde(A, f"student-{i:02d}")
                        times[mode].append(time.perf_counter() - start)
            for mode, manager in (("on", sandbox.SandboxedKernelManager), ("off", AsyncKernelManager)):
                with _env(**{sandbox.ENV: mode}):
                    starts[mode].append(timed(lambda m=manager: _kernel_start(m), 1))
    on, off = statistics.median(times["on"]), statistics.median(times["off"])
    print(f"autograde per student (median of {len(times['on'])}): sandboxed {on:5.2f} s | unsandboxed "
          f"{off:5.2f} s | ratio sandboxed/unsandboxed {on / off:5.2f} (target <= 1.10)")
    k_on, k_off = statistics.median(starts["on"]), statistics.median(starts["off"])
    print(f"kernel start + import course, torch (median of {len(starts['on'])}): sandboxed {k_on:5.2f} s | "
          f"unsandboxed {k_off:5.2f} s | ratio {k_on / k_off:5.2f}")
    return f"**{on / off:.2f}** ({on:.2f} s vs {off:.2f} s); kernel start {k_on:.1f} s vs {k_off:.1f} s"


class _Recording:
    """A runner that passes another one's results on and keeps them (for the prepared run)."""

    def __init__(self, runner):
        self.runner, self.name, self.results = runner, runner.name, {}

    def run(self, job, tasks):
        for result in self.runner.run(job, tasks):
            self.results[result["student"]] = result
            yield result


class _Prepared:
    """A runner whose grading is replaced by prepared results: what is left is the instructor side."""

    name = "prepared results"

    def __init__(self, results: dict):
        self.results = results

    def run(self, job, tasks):
        for student, _files in tasks:
            yield self.results[student]


def bench_cluster(n_students: int, workers: int = 2) -> str:
    """--cluster local:2 versus --jobs 2 on the same class, same run; the instructor side alone; the estimate."""
    import logging

    from distributed import Client, LocalCluster
    from nboracle.classroom import cluster as C

    print(f"\n## 8. class batch on a Dask LocalCluster ({workers} worker processes) vs --jobs {workers}, "
          f"{n_students} students of {A}")
    with tempfile.TemporaryDirectory() as tmp:
        root = _class_root(Path(tmp), n_students)
        local_stats, recording = batch.BatchStats(), _Recording(batch.LocalPool(workers))
        start = time.perf_counter()
        reports = batch.grade_class(root, A, runner=recording, regrade=True, progress=False, stats=local_stats)
        local = time.perf_counter() - start
        assert all(r.status == "graded" for r in reports.values())

        start = time.perf_counter()
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                               silence_logs=logging.ERROR)
        client = Client(cluster)
        startup = time.perf_counter() - start
        try:
            noop = timed(lambda: client.submit(int, 0, pure=False).result(), 20)
            stats = C.ClusterStats()
            start = time.perf_counter()
            reports = batch.grade_class(root, A, runner=C.Dask(client), regrade=True, progress=False, stats=stats)
            on_cluster = time.perf_counter() - start
        finally:
            client.close()
            cluster.close()
        assert all(r.status == "graded" for r in reports.values())

        # the instructor side alone: plan, record (files, gradebook batches, state), no grading
        prepared_stats = batch.BatchStats()
        start = time.perf_counter()
        batch.grade_class(root, A, runner=_Prepared(recording.results), regrade=True, progress=False,
                          stats=prepared_stats)
        instructor = (time.perf_counter() - start) / n_students
    task = statistics.median(local_stats.task_seconds.values())  # one autograde + feedback on a worker
    print(f"--jobs {workers}: {local:7.1f} s ({60 * n_students / local:5.1f} students/minute)")
    print(f"--cluster local:{workers}: {on_cluster:7.1f} s ({60 * n_students / on_cluster:5.1f} students/minute), "
          f"plus {startup:.1f} s to start the LocalCluster")
    print(f"ratio cluster/--jobs: {on_cluster / local:4.2f} (target <= 1.1)")
    print(f"per student: median {task:.2f} s grading on a worker (autograde + feedback); Dask round trip of an "
          f"empty task {noop:.3f} s; instructor side alone (prepared results: plan + record, "
          f"{prepared_stats.batches} gradebook transactions) {instructor:.3f} s = {100 * instructor / task:.2f}% "
          f"of one grading (target <= 2%)")
    # The estimate: chapter 01 is the cheapest chapter; the course average costs more by the
    # ratio of the source notebooks' execution times (docs/SPEED.md, notebooks: 01 3.0 s, mean of 8 chapters 5.5 s).
    per_core = on_cluster * workers / n_students  # core-seconds per student of chapter 01, on the cluster
    chapter_factor = 5.5 / 3.0
    print(f"\nestimate for 1,000 students x 8 chapters = 8,000 autogrades, machines like this one "
          f"({workers} worker processes each); {per_core:.1f} core-s a student for chapter 01, "
          f"x{chapter_factor:.2f} for the average chapter:")
    for machines in (1, 10, 50):
        cores = machines * workers
        grading = 8000 * per_core * chapter_factor / cores
        serial = 8000 * instructor  # the instructor side costs the same for every chapter
        total = max(grading, serial)  # the instructor records while the workers grade
        print(f"  {machines:>3} machine(s), {cores:>3} workers: grading {grading / 3600:5.2f} h, instructor side "
              f"{serial / 3600:5.2f} h -> about {total / 3600:5.2f} h")
    return (f"**{on_cluster / local:.2f}** ({on_cluster:.1f} s vs {local:.1f} s, {n_students} students); "
            f"instructor side {100 * instructor / task:.2f}% of a grading")


def bench_check(repeat: int, assignments=("01_two_keys", "09_decoder")) -> str:
    """``make check NB=...`` on a solved notebook whose chapter source did not change, beside plain execution."""
    from nboracle.classroom import selfcheck

    print("\n## 9. self-check (make check NB=...) of a solved notebook, source unchanged, over plain nbclient "
          "execution of the same notebook (interleaved, median of", repeat, "each)")
    os.environ.setdefault(sandbox.ENV, "auto")  # as `python -m instructor check` does

    def quiet(*args, **kwargs):
        pass

    from nboracle.classroom import checkserver

    figures = []
    with tempfile.TemporaryDirectory() as tmp:
        server_folder = Path(tmp) / "server"  # the bench's own check server (stopped below)
        for name in assignments:
            release, answers = REPOSITORY.release_and_answers(name)
            path = Path(tmp) / f"{REPOSITORY.notebook_name(name)}.ipynb"
            P.write_nb(P.fill(release, answers), path)
            def check_it(path=path, name=name):
                selfcheck.grade_copy(path, name, REPOSITORY, say=quiet)

            def run_it(path=path):
                execute(path, path.parent)

            def command(path=path, server="off"):  # `make check NB=...` itself: a new process, its imports included
                subprocess.run([sys.executable, "-m", "instructor", "check", str(path)], cwd=REPO, check=False,
                               capture_output=True, env={**P.tool_env(), checkserver.FOLDER: str(server_folder),
                                                         checkserver.SWITCH: server})

            first = timed(check_it, 1)  # (re)builds the self-check course only when the source changed
            command(server="on")  # checked alone, then a warm check server starts, as after a learner's first check
            ready = time.monotonic() + 120
            while not (server_folder / "check.sock").exists() and time.monotonic() < ready:
                time.sleep(0.5)
            command(server="on")  # the server's first check
            plain, check, cli, warm = [], [], [], []
            for _ in range(repeat):
                plain.append(timed(run_it, 1))
                check.append(timed(check_it, 1))
                cli.append(timed(command, 1))
                warm.append(timed(lambda: command(server="on"), 1))
            p, c, k, w = (statistics.median(v) for v in (plain, check, cli, warm))
            print(f"{name:<22} first check {first:6.1f} s | plain execution {p:6.1f} s | check {c:6.1f} s | "
                  f"ratio check/plain {c / p:5.2f} | the command (a new process) {k:6.1f} s, ratio {k / p:5.2f} | "
                  f"the command, warm check server {w:6.1f} s, ratio {w / p:5.2f}")
            figures.append((name[:2], c / p, first, k / p, w / p))
        subprocess.run([sys.executable, "-m", "instructor", "check", "--stop-server"], cwd=REPO, capture_output=True,
                       env={**P.tool_env(), checkserver.FOLDER: str(server_folder), checkserver.SWITCH: "on"})
    if len(figures) > 2:  # the table's row holds the worst; every chapter's figure is printed above
        worst = max(figures, key=lambda f: f[1])
        slowest = max(figures, key=lambda f: f[4])
        return (f"{len(figures)} chapters, worst {worst[0]} **{worst[1]:.2f}**, best "
                f"{min(f[1] for f in figures):.2f} (in one process); the command with a warm check server: worst "
                f"{slowest[0]} {slowest[4]:.2f}")
    return (", ".join(f"{f[0]} **{f[1]:.2f}**" for f in figures) + "; the command, warm server: "
            + ", ".join(f"{f[4]:.2f}" for f in figures) + " (new process: "
            + ", ".join(f"{f[3]:.2f}" for f in figures) + ")")


def bench_oracle(chapters: list[str], n_students: int, repeat: int) -> str:
    print(f"\n## 10. oracle: autograde per student, graded tests in the grader over in the kernel, "
          f"{n_students} students (half solution, half stub) per chapter, interleaved")
    figures = []
    for chapter in chapters:
        times: dict[str, list[float]] = {"on": [], "off": []}
        with tempfile.TemporaryDirectory() as tmp:
            root = _class_root(Path(tmp), n_students, chapter)
            for r in range(repeat):
                for i in range(n_students):
                    for mode in (("on", "off") if (i + r) % 2 == 0 else ("off", "on")):
                        with _env(COURSE_ORACLE=mode):
                            start = time.perf_counter()
                            root.autograde(chapter, f"student-{i:02d}")
                            times[mode].append(time.perf_counter() - start)
            # the class batch: long-lived workers pay the grader's own imports (torch) once
            batch_times: dict[str, list[float]] = {"on": [], "off": []}
            for r in range(repeat):
                for mode in (("on", "off") if r % 2 == 0 else ("off", "on")):
                    with _env(COURSE_ORACLE=mode):
                        start = time.perf_counter()
                        reports = batch.grade_class(root, chapter, jobs=1, regrade=True, progress=False)
                        batch_times[mode].append((time.perf_counter() - start) / n_students)
                    assert all(r.status == "graded" for r in reports.values())
        on, off = statistics.median(times["on"]), statistics.median(times["off"])
        print(f"{chapter:<26} nbgrader autograde per student: oracle {on:6.2f} s | in-kernel {off:6.2f} s | "
              f"ratio {on / off:5.2f} (median of {len(times['on'])})")
        on, off = statistics.median(batch_times["on"]), statistics.median(batch_times["off"])
        print(f"{'':<26} class batch (--jobs 1) per student:  oracle {on:6.2f} s | in-kernel {off:6.2f} s | "
              f"ratio {on / off:5.2f} (target <= 1.15)")
        figures.append(f"{chapter[:2]} **{on / off:.2f}**")
    return "class batch " + ", ".join(figures)


def bench_fork(chapters: list[str], n_students: int, repeat: int) -> str:
    print(f"\n## 11. forked kernels (COURSE_KERNEL_FORK=1, no sandbox: how the suite grades the course's own "
          f"code) over kernels started as usual, one nbgrader run of {n_students} students, interleaved")
    figures = []
    for chapter in chapters:
        times: dict[str, list[float]] = {"1": [], "0": []}
        with tempfile.TemporaryDirectory() as tmp:
            root = _class_root(Path(tmp), n_students, chapter)
            for r in range(repeat):
                for mode in (("1", "0") if r % 2 == 0 else ("0", "1")):
                    with _env(COURSE_SANDBOX="off", COURSE_KERNEL_FORK=mode):
                        start = time.perf_counter()
                        root.autograde(chapter)
                        times[mode].append((time.perf_counter() - start) / n_students)
        forked, usual = statistics.median(times["1"]), statistics.median(times["0"])
        print(f"{chapter:<26} per student: forked {forked:6.2f} s | usual {usual:6.2f} s | "
              f"ratio {forked / usual:5.2f} (median of {repeat})")
        figures.append(f"{chapter[:2]} **{forked / usual:.2f}** ({forked:.1f} s vs {usual:.1f} s)")
    return ", ".join(figures)


def _chapter_namespace(assignment: str, stop_at: str) -> dict:
    """The solution's code cells of ``assignment`` before cell ``stop_at`` run here (no test, no demo)."""
    import contextlib
    import io

    namespace: dict = {}
    for cell in P.read_nb(REPOSITORY.notebook("source", assignment)).cells:
        grade_id = P.grade_id(cell) or ""
        if grade_id == stop_at:
            break
        if cell.cell_type != "code" or grade_id.startswith("test_") or cell.source.startswith("# demo only"):
            continue
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(cell.source, grade_id or "<cell>", "exec"), namespace)
    return namespace


def bench_training(repeat: int) -> str:
    import torch

    print("\n## 12. chapter 07's train(): AdamW(fused=True), as the notebook has it, over the plain "
          "per-parameter loop, one thread, interleaved")
    namespace = _chapter_namespace("07_seq2seq_beam_search", "training")
    threads, real_adamw = torch.get_num_threads(), torch.optim.AdamW
    times: dict[bool, list[float]] = {True: [], False: []}
    losses: dict[bool, list[float]] = {}
    torch.set_num_threads(1)
    try:
        for r in range(repeat):
            for fused in ((True, False) if r % 2 == 0 else (False, True)):
                torch.optim.AdamW = lambda params, _fused=fused, **kw: real_adamw(params, **{**kw, "fused": _fused})
                torch.manual_seed(0)
                model = namespace["ReversalTransformer"]()
                start = time.perf_counter()
                losses[fused] = namespace["train"](model)
                times[fused].append(time.perf_counter() - start)
    finally:
        torch.optim.AdamW = real_adamw
        torch.set_num_threads(threads)
    fused, plain = statistics.median(times[True]), statistics.median(times[False])
    agree = all(abs(a - b) < 1e-4 for a, b in zip(losses[True], losses[False], strict=True))
    print(f"301 steps: fused {fused:6.2f} s | plain {plain:6.2f} s | ratio {fused / plain:5.2f} (median of {repeat}); "
          f"losses at step 0, 100, 300: {[round(losses[True][i], 4) for i in (0, 100, 300)]}, "
          f"the two runs {'agree' if agree else 'DIFFER'} to 1e-4 at every step")
    return f"**{fused / plain:.2f}** ({fused:.2f} s vs {plain:.2f} s); losses {'agree' if agree else 'DIFFER'}"


def _chapters(names: list[str]) -> tuple[str, ...]:
    """The chapters a section measures: those named, or every chapter of the course for ``all``."""
    return tuple(REPOSITORY.assignments()) if names == ["all"] else tuple(names)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["notebooks", "autograde", "class", "startup", "lab", "batch", "sandbox", "cluster",
                                                "check", "oracle", "fork", "training"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--students", type=int, default=8)
    parser.add_argument("--cluster-students", type=int, default=200, help="class size of the cluster benchmark")
    parser.add_argument("--oracle-chapters", nargs="+", default=["01_two_keys", "06_multihead_attention"])
    parser.add_argument("--oracle-students", type=int, default=2, help="students per chapter of the oracle benchmark")
    parser.add_argument("--check-chapters", nargs="+", default=["01_two_keys", "09_decoder"],
                        help="chapters of the check benchmark (`all`: every chapter)")
    parser.add_argument("--no-write-docs", action="store_true",
                        help="print only: leave the table in docs/SPEED.md as it is")
    args = parser.parse_args()
    run = describe_run(sys.argv[1:])
    print(f"# course benchmark: {shutil.which('nproc') and subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores")
    steps = {"startup": lambda: bench_startup(args.repeat), "autograde": lambda: bench_autograde(args.repeat),
             "class": lambda: bench_class(args.students), "notebooks": lambda: bench_notebooks(args.repeat),
             "lab": lambda: bench_lab(args.repeat), "batch": lambda: bench_batch(args.students),
             "sandbox": lambda: bench_sandbox(args.students, args.repeat),
             "cluster": lambda: bench_cluster(args.cluster_students), "check": lambda: bench_check(args.repeat, _chapters(args.check_chapters)),
             "oracle": lambda: bench_oracle(args.oracle_chapters, args.oracle_students, args.repeat),
             "fork": lambda: bench_fork(["01_two_keys", "09_decoder"], args.students, args.repeat),
             "training": lambda: bench_training(args.repeat)}
    figures = {}
    for name, step in steps.items():
        if args.only in (None, name):
            figures[name] = step()
    if not args.no_write_docs:
        written = write_docs(figures, run)
        print(f"\n{SPEED.relative_to(REPO)}: rows {', '.join(written) or '(none)'} written")
    return 0


if __name__ == "__main__":  # (the guard matters: Dask's worker processes re-import this file)
    sys.exit(main())
