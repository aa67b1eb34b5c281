"""Another process holding a run folder's lock, as a run writing it does (:func:`mindcap_tok._io.folder_lock`)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
HOLD = """
import sys
from pathlib import Path
from mindcap_tok._io import folder_lock

with folder_lock(Path(sys.argv[1]), "run folder"):
    print("held", flush=True)
    sys.stdin.read()
"""


@contextmanager
def lock_held(folder: Path) -> Iterator[int]:
    """A second Python process holds ``folder``'s lock for the block; yields its pid."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )
    try:
        assert proc.stdout.readline() == b"held\n"
        yield proc.pid
    finally:
        proc.communicate(b"", timeout=60)
