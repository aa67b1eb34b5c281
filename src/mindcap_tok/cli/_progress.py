"""A rich progress bar on stderr that steps forward by calling the yielded function."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def progress_bar(description: str, total: int, enabled: bool = True) -> Iterator[Callable[..., None]]:
    """Yield ``advance(n=1)``; shows nothing when disabled or stderr is not a terminal."""
    if not enabled:
        yield lambda n=1: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as prog:
        task = prog.add_task(description, total=total)
        yield lambda n=1: prog.advance(task, n)
