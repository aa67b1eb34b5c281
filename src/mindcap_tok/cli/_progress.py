"""Progress on stderr: a rich bar on a terminal, plain lines every few seconds in a log (CI, ``2> run.log``)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

#: seconds between two plain progress lines when stderr is not a terminal
PLAIN_INTERVAL = 5.0


@contextmanager
def progress_bar(
    description: str,
    total: int | None,
    enabled: bool = True,
    *,
    stream: TextIO | None = None,
    interval: float = PLAIN_INTERVAL,
) -> Iterator[Callable[..., None]]:
    """Yield ``advance(n=1)``. ``total=None`` counts without a bar.

    On a terminal: a transient rich bar. Elsewhere: ``description: done/total (pct), elapsed`` at most every
    ``interval`` seconds, and a last line at the end unless the last one showed it (a short run prints nothing).
    """
    out = sys.stderr if stream is None else stream
    if not enabled:
        yield lambda n=1: None
        return
    if not out.isatty():
        with _plain(description, total, out, interval) as advance:
            yield advance
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(file=out),
        transient=True,
    ) as prog:
        task = prog.add_task(description, total=total)
        yield lambda n=1: prog.advance(task, n)


@contextmanager
def _plain(description: str, total: int | None, out: TextIO, interval: float) -> Iterator[Callable[..., None]]:
    start = last = time.monotonic()
    done = 0
    printed: int | None = None  # the count the last line showed

    def line(now: float) -> None:
        nonlocal printed
        shown = f"{done:,}/{total:,} ({done / total:.0%})" if total else f"{done:,}"
        out.write(f"{description}: {shown}, {now - start:.0f} s\n")
        out.flush()
        printed = done

    def advance(n: int = 1) -> None:
        nonlocal done, last
        done += n
        now = time.monotonic()
        if now - last >= interval:
            line(now)
            last = now

    yield advance
    if printed is not None and printed != done:
        line(time.monotonic())


def on_progress(advance: Callable[..., None]) -> Callable[..., None]:
    """The library's ``on_progress(done, total=None)`` (a running count) as steps of a bar's ``advance``."""
    seen = 0

    def report(done: int, total: int | None = None) -> None:
        nonlocal seen
        advance(done - seen)
        seen = done

    return report
