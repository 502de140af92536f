"""Per released notebook: characters of prose (markdown) against visible test code (graded test cells)."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(notebook: Path) -> tuple[int, int, int]:
    """(prose, visible test code, other code) characters of one released notebook."""
    prose = tests = code = 0
    for cell in json.loads(notebook.read_text())["cells"]:
        text = "".join(cell["source"])
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] == "markdown":
            prose += len(text)
        elif meta.get("grade") and not meta.get("solution"):
            tests += len(text)
        else:
            code += len(text)
    return prose, tests, code


def main() -> None:
    print(f"{'released notebook':<28}{'prose':>8}{'tests':>8}{'other code':>12}{'prose/tests':>13}")
    for notebook in sorted((ROOT / "release").glob("[0-9][0-9]_*/*.ipynb")):
        prose, tests, code = measure(notebook)
        print(f"{notebook.parent.name:<28}{prose:>8}{tests:>8}{code:>12}{prose / max(tests, 1):>13.2f}")


if __name__ == "__main__":
    main()
