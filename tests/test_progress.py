"""Progress shows in logs too: plain lines when stderr is not a terminal, nothing for short runs."""

from __future__ import annotations

import io

from mindcap_tok.cli._progress import on_progress, progress_bar


def test_plain_lines_when_not_a_terminal():
    log = io.StringIO()  # isatty() is False, as for a CI log or `2> run.log`
    with progress_bar("scoring", total=4, stream=log, interval=0) as advance:
        for _ in range(4):
            advance()
    lines = log.getvalue().splitlines()
    assert [x.split(",")[0] for x in lines] == [
        "scoring: 1/4 (25%)",
        "scoring: 2/4 (50%)",
        "scoring: 3/4 (75%)",
        "scoring: 4/4 (100%)",
    ]
    assert all(x.endswith(" s") for x in lines)


def test_unknown_total_counts_and_short_runs_stay_quiet():
    log = io.StringIO()
    with progress_bar("learning merges", total=None, stream=log, interval=0) as advance:
        advance(250)
    assert [x.split(",")[0] for x in log.getvalue().splitlines()] == ["learning merges: 250"]
    quiet = io.StringIO()
    with progress_bar("pricing", total=3, stream=quiet, interval=3600) as advance:
        advance(3)
    assert quiet.getvalue() == ""
    off = io.StringIO()
    with progress_bar("pricing", total=3, enabled=False, stream=off, interval=0) as advance:
        advance(3)
    assert off.getvalue() == ""


def test_running_counts_become_steps():
    steps = []
    report = on_progress(steps.append)
    for done in (16, 32, 48, 50):
        report(done, 50)
    assert steps == [16, 16, 16, 2] and sum(steps) == 50
