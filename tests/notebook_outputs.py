"""What a notebook printed, to compare the outputs stored in the repository with a fresh run's.

Compared, per code cell: its standard output (the chunks joined: a stream may arrive in pieces) and the
``text/plain`` of each result or display, in order; an error by its name. Left out: images (PNG bytes change with
the matplotlib build), HTML (pandas prints each frame as text too), standard error (progress and warnings), and
execution counts. Normalised: wall-clock times (``in 12.3 s``, ``'seconds': 1.46``), moments (a freeze's
``2026-12-04T17:18:26+00:00``) and object addresses (``at 0x7f...``), the only parts two faithful runs of a
seeded notebook may print differently.
"""

from __future__ import annotations

import re

import nbformat

TIME = re.compile(r"\b\d+(?:\.\d+)? ?(?:ms|s|seconds?)\b")
#: a duration a result records (``'seconds': 1.459``) and a moment (``2026-12-04T17:18:26+00:00``)
SECONDS = re.compile(r"(['\"]seconds['\"]: )\d+(?:\.\d+)?")
MOMENT = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[+-]\d{2}:\d{2}|Z)?")
ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
#: an absolute path of a machine (a home, a temporary or a work folder) printed into an output
MACHINE_PATH = re.compile(r"(?<![\w.~])/(?:home|tmp|work|Users|root|var|private)/")


def normalise(text: str) -> str:
    text = SECONDS.sub(r"\1<time>", MOMENT.sub("<moment>", text))
    return ADDRESS.sub(" at 0x…", TIME.sub("<time>", text))


def text_outputs(nb: nbformat.NotebookNode) -> list[tuple[str, list[str]]]:
    """Per code cell: (its standard output, the texts of its results and displays), normalised."""
    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        stdout, shown = "", []
        for out in cell.get("outputs", []):
            if out.output_type == "stream" and out.name == "stdout":
                stdout += out.text
            elif out.output_type in ("execute_result", "display_data") and "text/plain" in out.get("data", {}):
                shown.append(normalise(out.data["text/plain"]))
            elif out.output_type == "error":
                shown.append(f"error: {out.ename}")
        cells.append((normalise(stdout), shown))
    return cells


def machine_paths(nb: nbformat.NotebookNode) -> list[str]:
    """The lines of a notebook's outputs (standard output, texts of results and displays, standard error where
    stored) that print an absolute path of the machine it ran on. The stored notebooks keep no standard error:
    a library's warning names the file it came from."""
    found = []
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            texts = [out.get("text", ""), *(v for k, v in out.get("data", {}).items() if k.startswith("text/"))]
            found += [line for t in texts for line in str(t).splitlines() if MACHINE_PATH.search(line)]
    return found
