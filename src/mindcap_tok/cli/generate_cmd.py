"""`mindcap-tok generate JOB.toml --out-dir LEDGER`: run a generation job (resumable, sharded) into a ledger."""

from __future__ import annotations

import sys

import click

from ..ledger.backends import BACKENDS
from ..ledger.generate import dry_run, run_job
from ._options import out_dir_option


@click.command("generate")
@click.argument("job", type=click.Path(exists=True, dir_okay=False))
@out_dir_option("Ledger folder (created if absent).")
@click.option(
    "--backend",
    type=click.Choice(BACKENDS),
    default=None,
    help="Generation engine [default: server when the job has a [server] table or --base-url is given, else vllm].",
)
@click.option(
    "--base-url",
    "base_url",
    multiple=True,
    metavar="URL",
    help="An OpenAI-compatible server (http://HOST:8000/v1) for the server backend; repeat to spread requests.",
)
@click.option("--dry-run", "dry", is_flag=True, help="Print requests, shards and worst-case tokens; generate nothing.")
@click.pass_obj
def generate_command(state, job: str, out: str, backend: str | None, base_url: tuple[str, ...], dry: bool) -> None:
    """Generate the records of JOB (a TOML spec) into --out-dir; rerunning skips the shards already stored."""
    dirs = {"data_dir": state.config.data_dir.value, "tokenizers_dir": state.config.tokenizers_dir.value}
    if dry:
        plan = dry_run(job, out, **dirs)
        click.echo(
            f"job {plan['job']} ({plan['design']}): {plan['requests']} requests, {plan['records']} records, "
            f"{plan['shards']} shards ({plan['shards_done']} already done), "
            f"worst case {plan['worst_case_tokens']} output tokens"
        )
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn("shards"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[records]} records, {task.fields[rate]:.0f} tok/s"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=not sys.stderr.isatty(),
        transient=True,
    )
    totals = {"records": 0, "tokens": 0, "seconds": 0.0}
    with progress:
        task = progress.add_task("generate", total=None, records=0, rate=0.0)

        def start(plan, left: int) -> None:
            progress.update(task, total=left)

        def step(done) -> None:
            totals["records"] += done.records
            totals["tokens"] += done.tokens
            totals["seconds"] += done.seconds
            rate = totals["tokens"] / totals["seconds"] if totals["seconds"] else 0.0
            progress.update(task, advance=1, records=totals["records"], rate=rate)

        result = run_job(job, out, backend, on_shard=step, on_start=start, base_url=base_url, **dirs)
    rate = result.tokens / result.seconds if result.seconds else 0.0
    click.echo(
        f"job {result.job}: wrote {result.written} shards ({result.records} records, {result.tokens} output tokens, "
        f"{rate:.0f} tok/s) into {result.ledger}; {result.skipped} of {result.shards} shards were already done"
    )
