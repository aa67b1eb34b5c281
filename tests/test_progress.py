"""Progress shows in logs too: plain lines when stderr is not a terminal, nothing for short runs."""

from __future__ import annotations

import io

from mindcap_tok.cli._progress import on_progress, progress_bar, throughput_bar


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


class FakeClock:
    """Seconds that the test sets by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_throughput_lines_show_requests_and_tokens_per_second():
    clock, log = FakeClock(), io.StringIO()
    with throughput_bar("generate", stream=log, interval=5, clock=clock) as bar:
        bar.count_tokens(0)
        bar.progress(0, 40)
        clock.now = 102.0  # 2 s: under the interval, no line
        bar.count_tokens(500)
        bar.progress(10, 40)
        clock.now = 106.0  # 6 s: 20 requests, 1,200 tokens
        bar.count_tokens(1200)
        bar.progress(20, 40)
        clock.now = 108.0  # 2 s after the last line: none
        bar.count_tokens(1500)
        bar.progress(30, 40)
        clock.now = 110.0
        bar.count_tokens(2000)
        bar.progress(40, 40)
    assert log.getvalue().splitlines() == [
        "generate: 20/40 requests (50%), 3.3 req/s, 200 tok/s, 6 s",  # 20/6, 1200/6
        "generate: 40/40 requests (100%), 4.0 req/s, 200 tok/s, 10 s",  # the last line, at the end
    ]
    quick = io.StringIO()  # a run shorter than the interval prints nothing (the CLI's summary line follows)
    with throughput_bar("generate", stream=quick, interval=5, clock=clock) as bar:
        bar.progress(0, 3)
        bar.progress(3, 3)
    assert quick.getvalue() == ""


def test_throughput_bar_on_a_terminal():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    clock, out = FakeClock(), Terminal()
    with throughput_bar("generate", stream=out, clock=clock) as bar:
        bar.progress(0, 8)
        clock.now += 4.0
        bar.count_tokens(1000)
        bar.progress(8, 8)
    shown = out.getvalue()
    assert "\x1b[" in shown  # a rich bar, not plain lines
    assert "8/8" in shown and "requests, 2.0 req/s, 250 tok/s" in shown  # 8/4 s, 1000/4 s
