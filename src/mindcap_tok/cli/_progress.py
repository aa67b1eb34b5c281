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


class Throughput:
    """Requests and output tokens per second, for ``run_job``'s ``on_progress(done, total)`` and
    ``on_tokens(tokens)`` (running counts; ``on_tokens`` comes first). Made by :func:`throughput_bar`."""

    def __init__(self, clock: Callable[[], float], show: Callable[[], None]) -> None:
        self.show = show
        self.start = clock()
        self.done, self.tokens = 0, 0
        self.total: int | None = None

    def progress(self, done: int, total: int | None = None) -> None:
        """The library's ``on_progress``: ``done`` of ``total`` requests so far."""
        self.done, self.total = done, total
        self.show()

    def count_tokens(self, tokens: int) -> None:
        """The library's ``on_tokens``: output tokens so far (shown with the next ``progress``)."""
        self.tokens = tokens

    def rates(self, now: float) -> str:
        """``R req/s, T tok/s`` since the start (0 before any time has passed)."""
        elapsed = now - self.start
        per = 1 / elapsed if elapsed > 0 else 0.0
        return f"{self.done * per:.1f} req/s, {self.tokens * per:,.0f} tok/s"


@contextmanager
def throughput_bar(
    description: str,
    *,
    stream: TextIO | None = None,
    interval: float = PLAIN_INTERVAL,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[Throughput]:
    """Yield a :class:`Throughput` whose ``progress``/``count_tokens`` feed a bar of requests with their rates.

    On a terminal: a transient rich bar, ``done/total``, requests/s and output tokens/s. Elsewhere:
    ``description: done/total requests (pct), R req/s, T tok/s, elapsed`` at most every ``interval`` seconds
    and a last line at the end unless the last one showed it (a short run prints nothing).
    """
    out = sys.stderr if stream is None else stream
    if out.isatty():
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("requests, {task.fields[rates]}"),
            TimeElapsedColumn(),
            console=Console(file=out),
            transient=True,
        ) as prog:
            task = prog.add_task(description, total=None, rates="")

            def redraw() -> None:
                prog.update(task, completed=stats.done, total=stats.total, rates=stats.rates(clock()))

            stats = Throughput(clock, redraw)
            yield stats
        return
    printed: int | None = None  # the count the last line showed

    def line(now: float) -> None:
        nonlocal printed
        done, total = stats.done, stats.total
        shown = f"{done:,}/{total:,} requests ({done / total:.0%})" if total else f"{done:,} requests"
        out.write(f"{description}: {shown}, {stats.rates(now)}, {now - stats.start:.0f} s\n")
        out.flush()
        printed = done

    last: float  # when the last line was printed: the start, once ``stats`` exists

    def maybe() -> None:
        nonlocal last
        now = clock()
        if now - last >= interval:
            line(now)
            last = now

    stats = Throughput(clock, maybe)
    last = stats.start
    yield stats
    if printed is not None and printed != stats.done:
        line(clock())
