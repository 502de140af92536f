"""nbgrader preprocessors used by ``nbgrader_config.py``."""

from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Integer


class StripJupytextMetadata(NbGraderPreprocessor):
    """Drop the jupytext pairing from released notebooks.

    A student notebook that still says ``jupytext.formats = "ipynb,py:percent"`` makes
    JupyterLab (with jupytext installed) write a ``.py`` twin beside it on every save.
    """

    def preprocess(self, nb, resources):
        nb.metadata.pop("jupytext", None)
        return nb, resources


class LimitOutputSize(NbGraderPreprocessor):
    """Cut every text output of a cell to ``max_chars`` characters.

    nbgrader's LimitOutput counts lines, so one ``print("x" * 5_000_000)`` would still put
    megabytes into the autograded notebook and the feedback page.
    """

    max_chars = Integer(20_000, help="characters kept per text output").tag(config=True)

    def _cut(self, text: str) -> str:
        if len(text) <= self.max_chars:
            return text
        kept = self.max_chars // 2
        return (text[:kept] + f"\n... [{len(text) - 2 * kept} characters cut by the grader] ...\n"
                + text[-kept:])

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        for output in cell.get("outputs", []):
            if "text" in output:
                text = output.text if isinstance(output.text, str) else "".join(output.text)
                output.text = self._cut(text)
            for mime, value in list(output.get("data", {}).items()):
                if mime.startswith("text/") and isinstance(value, str):
                    output.data[mime] = self._cut(value)
            if "traceback" in output:
                output.traceback = [self._cut(line) for line in output.traceback]
        return cell, resources
