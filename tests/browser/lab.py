"""Driving JupyterLab in Chromium: open a notebook, edit cells, run, save, Validate, read outputs.

Edits go through the cell's CodeMirror editor as a student's would: the cell is made active,
the editor focused, its text selected with the keyboard, and the new text inserted with
Chrome's ``Input.insertText`` (what a paste or an input method does: no auto-indent or
bracket closing, which make typing long code unreliable). Commands (run all, save) are Lab's
own, through the keyboard or Lab's command registry.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Lab:
    def __init__(self, driver, server, shots: Path, prefix: str):
        self.d, self.server, self.shots, self.prefix, self.n = driver, server, shots, prefix, 0

    # ------------------------------------------------------------------ basics
    def shot(self, what: str) -> Path:
        self.n += 1
        path = self.shots / f"{self.prefix}-{self.n:02d}-{what}.png"
        self.d.save_screenshot(str(path))
        return path

    def js(self, body: str, *args):
        """Run ``body`` as an async function with ``app`` (Lab) and ``nb`` (current notebook)."""
        script = """
const done = arguments[arguments.length - 1];
const args = Array.prototype.slice.call(arguments, 0, arguments.length - 1);
(async () => {
  const app = window.jupyterapp;
  const panel = app.shell.currentWidget;
  const nb = panel && panel.content;
  %s
})().then(r => done({ok: r === undefined ? null : r}), e => done({error: String(e && e.stack || e)}));
""" % body
        out = self.d.execute_async_script(script, *args)
        if "error" in out:
            raise RuntimeError(out["error"])
        return out["ok"]

    def wait(self, condition, timeout=60, what="condition"):
        return WebDriverWait(self.d, timeout, poll_frequency=0.25).until(
            lambda d: condition(), message=f"timed out waiting for {what}")

    def open(self, path: str, what: str = "opened") -> None:
        self.d.get(f"{self.server.url}/lab/tree/{path}?token={self.server.token}")
        self.wait(lambda: self.d.execute_script(
            "return !!(window.jupyterapp && window.jupyterapp.shell.currentWidget"
            " && window.jupyterapp.shell.currentWidget.context"
            " && window.jupyterapp.shell.currentWidget.context.isReady)"), 120, f"{path} to open")
        self.js("await panel.sessionContext.ready; await panel.revealed;")
        self.wait(lambda: self.kernel_status() == "idle", 120, "the kernel to start")
        time.sleep(0.5)
        self.shot(what)

    def kernel_status(self) -> str:
        return self.d.execute_script(
            "const p = window.jupyterapp.shell.currentWidget;"
            "const k = p && p.sessionContext.session && p.sessionContext.session.kernel;"
            "return k ? k.status : 'none';")

    # ------------------------------------------------------------------ cells
    def cells(self) -> list[dict]:
        """Every cell: index, type, grade_id, source, outputs (types, text), image count, prompt."""
        return self.js("""
return nb.widgets.map((cell, i) => {
  const m = cell.model;
  const meta = m.getMetadata('nbgrader') || {};
  const outs = [];
  if (m.type === 'code') {
    for (let j = 0; j < m.outputs.length; j++) {
      const o = m.outputs.get(j).toJSON();
      outs.push(o);
    }
  }
  const node = cell.node;
  return {index: i, type: m.type, grade_id: meta.grade_id || null, solution: !!meta.solution,
          grade: !!meta.grade, locked: !!meta.locked, source: m.sharedModel.getSource(),
          outputs: outs, images: node.querySelectorAll('.jp-OutputArea-output img').length,
          count: m.type === 'code' ? m.executionCount : null};
});""")

    def index_of(self, grade_id: str) -> int:
        for cell in self.cells():
            if cell["grade_id"] == grade_id:
                return cell["index"]
        raise KeyError(grade_id)

    def focus_editor(self, index: int) -> None:
        self.js("""
nb.activeCellIndex = args[0];
await nb.scrollToItem(args[0], 'center');
const cell = nb.widgets[args[0]];
await cell.ready;
if (cell.model.type === 'markdown') cell.rendered = false;
nb.mode = 'edit';
cell.editor.focus();""", index)
        self.wait(lambda: self.d.execute_script(
            "const a = document.activeElement; return !!(a && a.closest('.jp-Cell.jp-mod-active .cm-content'));"),
            10, "the cell editor to take focus")

    def replace_cell(self, grade_id: str, text: str) -> None:
        """Select everything in the cell's editor and type ``text`` in its place."""
        index = self.index_of(grade_id)
        self.focus_editor(index)
        self.d.switch_to.active_element.send_keys(Keys.CONTROL, "a")
        self.d.execute_cdp_cmd("Input.insertText", {"text": text})
        self.wait(lambda: self.cells()[index]["source"] == text, 10, f"{grade_id} to hold the new text")
        self.d.switch_to.active_element.send_keys(Keys.ESCAPE)

    def retype(self, grade_id: str, old: str, new: str) -> None:
        """Select ``old`` inside the cell's editor and type ``new`` over it (a student's fix or bug)."""
        index = self.index_of(grade_id)
        source = self.cells()[index]["source"]
        start = source.index(old)
        before = source[:start]
        line, column = before.count("\n"), len(before) - (before.rfind("\n") + 1)
        end_before = source[:start + len(old)]
        end_line, end_column = end_before.count("\n"), len(end_before) - (end_before.rfind("\n") + 1)
        self.focus_editor(index)
        self.js("nb.widgets[args[0]].editor.setSelection({start: {line: args[1], column: args[2]},"
                " end: {line: args[3], column: args[4]}});", index, line, column, end_line, end_column)
        if new:  # one insertion, as a paste: typed key by key, the editor would close brackets itself
            self.d.execute_cdp_cmd("Input.insertText", {"text": new})
        else:  # the change deletes the selection
            self.d.switch_to.active_element.send_keys(Keys.DELETE)
        expected = source[:start] + new + source[start + len(old):]
        self.wait(lambda: self.cells()[index]["source"] == expected, 10, f"{grade_id} to show the typed change")
        self.d.switch_to.active_element.send_keys(Keys.ESCAPE)

    # ------------------------------------------------------------------ commands
    def command(self, name: str) -> None:
        self.js("await app.commands.execute(args[0]);", name)

    def run_all(self, timeout: int = 240) -> list[dict]:
        """Run > Run All Cells; wait until the kernel is idle and no cell is queued (``[*]``).

        After an error the rest of the queue is dropped, as it is for a student.
        """
        self.command("notebook:run-all-cells")
        time.sleep(1)
        quiet_since = [None]

        def settled():
            busy = self.js("""
if (panel.sessionContext.session.kernel.status !== 'idle') return true;
return nb.widgets.some(c => c.model.type === 'code'
                       && c.node.querySelector('.jp-InputPrompt').textContent.includes('*'));""")
            if busy:
                quiet_since[0] = None
                return False
            quiet_since[0] = quiet_since[0] or time.monotonic()
            return time.monotonic() - quiet_since[0] > 1.5

        self.wait(settled, timeout, "run all to finish")
        return self.cells()

    def run_cell(self, index: int, timeout: int = 120) -> dict:
        """Select the cell and press Ctrl+Enter, as a student runs one cell; return it when done."""
        self.scroll_to(index)
        self.js("nb.mode = 'command'; nb.activeCellIndex = args[0]; nb.node.focus();", index)
        self.d.switch_to.active_element.send_keys(Keys.CONTROL, Keys.ENTER)
        time.sleep(0.5)
        self.wait(lambda: self.kernel_status() == "idle" and "*" not in self.d.execute_script(
            "return window.jupyterapp.shell.currentWidget.content.widgets[arguments[0]]"
            ".node.querySelector('.jp-InputPrompt').textContent;", index), timeout, f"cell {index} to run")
        return self.cells()[index]

    def save(self) -> None:
        """Ctrl+S, as a student saves; wait until Lab says the file is saved."""
        self.d.find_element(By.CSS_SELECTOR, ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook").click()
        self.d.switch_to.active_element.send_keys(Keys.ESCAPE)
        self.d.switch_to.active_element.send_keys(Keys.CONTROL, "s")
        self.wait(lambda: self.d.execute_script(
            "return !window.jupyterapp.shell.currentWidget.context.model.dirty;"), 30, "the save")

    def validate(self, what: str, timeout: int = 180) -> str:
        """Press nbgrader's Validate button; return the dialog's text (after a screenshot)."""
        found = self.d.find_elements(By.CSS_SELECTOR, ".jp-NotebookPanel:not(.lm-mod-hidden) .validate-button")
        assert found, "no Validate button in the notebook toolbar"
        inner = found[0].find_elements(By.CSS_SELECTOR, "button, jp-button")
        (inner[0] if inner else found[0]).click()
        self.wait(lambda: self.d.execute_script(
            "const d = document.querySelector('.jp-Dialog .jp-Dialog-body');"
            "return !!(d && d.textContent.trim() && !/validating/i.test(d.textContent));"), timeout, "Validate's dialog")
        time.sleep(0.5)
        text = self.d.find_element(By.CSS_SELECTOR, ".jp-Dialog").text
        self.shot(f"validate-{what}")
        for b in self.d.find_elements(By.CSS_SELECTOR, ".jp-Dialog .jp-Dialog-button"):
            b.click()
            break
        self.wait(lambda: not self.d.find_elements(By.CSS_SELECTOR, ".jp-Dialog"), 10, "the dialog to close")
        return text

    def scroll_to(self, index: int) -> None:
        self.js("nb.activeCellIndex = args[0]; await nb.scrollToItem(args[0], 'center');", index)
        time.sleep(0.3)


def error_text(cell: dict) -> str:
    """What the student sees of a cell's error: the traceback lines without colour codes."""
    lines = []
    for out in cell["outputs"]:
        if out.get("output_type") == "error":
            lines += [ANSI.sub("", line) for line in out.get("traceback", [])]
    return "\n".join(lines)


def dump(cells: list[dict]) -> str:
    return json.dumps([{k: c[k] for k in ("index", "grade_id", "count")} | {"error": error_text(c)[:300]}
                       for c in cells if c["type"] == "code"], indent=1)
