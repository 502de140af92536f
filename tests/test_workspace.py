"""The student's workspace (make lab) and how a failed check reads: fast, no server, no browser."""

from __future__ import annotations

import shutil
import subprocess
import sys

import nbformat

from instructor import workspace as W
from instructor.repository import REPO


def _course(tmp_path, names):
    repo = tmp_path / "repo"
    for name in names:
        shutil.copytree(REPO / "release" / name, repo / "release" / name)
        shutil.copytree(REPO / "source" / name, repo / "source" / name)
    return repo


def test_workspace_copies_once_and_never_overwrites(tmp_path):
    repo = _course(tmp_path, ["01_two_keys"])
    dest = repo / "workspace"
    added = W.prepare(repo, dest)
    mine = dest / "01_two_keys" / "two_keys.ipynb"
    assert added == [mine] and mine.read_bytes() == (repo / "release/01_two_keys/two_keys.ipynb").read_bytes()
    assert W.started(repo, dest) == []

    nb = nbformat.read(str(mine), as_version=4)
    nb.cells[0].source += "\nmy note"
    nbformat.write(nb, str(mine))
    edited = mine.read_bytes()
    shutil.copytree(REPO / "release" / "03_masks", repo / "release" / "03_masks")  # released later
    shutil.copytree(REPO / "source" / "03_masks", repo / "source" / "03_masks")
    added = W.prepare(repo, dest)
    assert added == [dest / "03_masks" / "masks.ipynb"], "only the new chapter is added"
    assert mine.read_bytes() == edited, "a student's notebook is never overwritten"
    assert W.started(repo, dest) == [("01_two_keys", mine)]


def test_lab_env_shows_plots_and_uses_the_course_config(tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    env = W.lab_env(tmp_path / "state")
    assert "MPLBACKEND" not in env, "Lab passes it to every kernel: Agg hides every plot"
    assert str(REPO) in env["JUPYTER_CONFIG_PATH"].split(":")
    settings = tmp_path / "state" / "user-settings" / "@jupyterlab" / "apputils-extension"
    assert '"fetchNews": "false"' in (settings / "notification.jupyterlab-settings").read_text()


def test_workspace_and_exchange_are_ignored_by_git():
    out = subprocess.run(["git", "check-ignore", "workspace/x.ipynb", ".exchange/x", ".artifacts/x"],
                         cwd=REPO, text=True, capture_output=True).stdout.split()
    assert out == ["workspace/x.ipynb", ".exchange/x", ".artifacts/x"]


def _run_cells(cells, extra_arguments=()):
    """Run cells in a fresh kernel (which inherits this process's environment); the last error."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    NotebookClient(nb, kernel_name="python3", allow_errors=True, extra_arguments=list(extra_arguments)).execute()
    return [o for o in nb.cells[-1].outputs if o.output_type == "error"][0]


CELLS = ["import numpy as np\nfrom course import check_close",
         "x = np.ones(3)\ncheck_close('out', x, np.zeros(3))  # the visible test line"]


def test_a_failed_check_shows_its_message_and_the_calling_line_only(monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    error = _run_cells(CELLS)
    text = "\n".join(error.traceback)
    assert error.ename == "CheckFailed" and error.evalue.startswith("out is off: largest difference 1")
    assert "check_close('out', x, np.zeros(3))" in text, text
    assert "course/checks.py" not in text and "_fail" not in text and len(error.traceback) == 2, text


def test_while_grading_a_failed_check_shows_the_message_alone(monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")  # hidden tests are in the notebook then
    error = _run_cells(CELLS)
    assert len(error.traceback) == 1 and "the visible test line" not in error.traceback[0]
    assert "out is off" in error.traceback[0]


def test_with_the_graders_minimal_tracebacks_the_message_alone(monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)  # e.g. a sandbox that drops the env
    error = _run_cells(CELLS, ["--InteractiveShell.xmode=Minimal"])
    assert len(error.traceback) == 1 and "out is off" in error.traceback[0]


def test_check_without_a_notebook_explains_an_empty_workspace(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "instructor", "check"], cwd=REPO, text=True,
                          capture_output=True)
    assert proc.returncode in (0, 1) and ("no chapter started" in proc.stdout or "points" in proc.stdout)


def test_local_exchange_unless_a_shared_one_is_configured(tmp_path, monkeypatch):
    from traitlets.config.loader import PyFileConfigLoader

    def exchange_root():
        return PyFileConfigLoader("nbgrader_config.py", str(REPO)).load_config().Exchange.get("root")

    monkeypatch.delenv("JUPYTER_CONFIG_PATH", raising=False)
    assert exchange_root() == str(REPO / ".exchange")
    (tmp_path / "nbgrader_config.py").write_text('c = get_config()\nc.Exchange.root = "/srv/nbgrader/exchange"\n')
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(tmp_path))  # as /etc/jupyter on the hub
    assert exchange_root() is None, "the hub's shared exchange must win"
