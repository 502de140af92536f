"""nbgrader preprocessors used by ``nbgrader_config.py``."""

from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor


class StripJupytextMetadata(NbGraderPreprocessor):
    """Drop the jupytext pairing from released notebooks.

    A student notebook that still says ``jupytext.formats = "ipynb,py:percent"`` makes
    JupyterLab (with jupytext installed) write a ``.py`` twin beside it on every save.
    """

    def preprocess(self, nb, resources):
        nb.metadata.pop("jupytext", None)
        return nb, resources
