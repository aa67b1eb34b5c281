"""Run notebooks as tests/test_notebooks.py does and store their outputs in notebooks/ (after a change to what
they print): each runs from a fresh temporary folder with this checkout's package and configuration; standard
error (warnings name the files they came from) and execution timings are not stored.

    .venv/bin/python scripts/refresh_notebooks.py              # every notebook
    .venv/bin/python scripts/refresh_notebooks.py 08_roundtrip  # some of them
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def refresh(path: Path) -> None:
    """Execute the notebook at ``path`` in a temporary folder and write it back with its outputs."""
    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory() as tmp:
        NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": tmp}}).execute()
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if not (o.output_type == "stream" and o.name == "stderr")]
            cell.metadata.pop("execution", None)
    nbformat.write(nb, path)


def main(names: list[str]) -> None:
    os.environ["MINDCAP_CONFIG"] = str(ROOT / "mindcap.toml")
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    paths = [NOTEBOOKS / f"{n.removesuffix('.ipynb')}.ipynb" for n in names] or sorted(NOTEBOOKS.glob("*.ipynb"))
    for path in paths:
        print(f"running {path.name}", file=sys.stderr)
        refresh(path)


if __name__ == "__main__":
    main(sys.argv[1:])
