"""`mindcap-tok generate JOB.toml --out-dir LEDGER`: run a generation job (resumable, sharded) into a ledger."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import click

from ..choices import BACKENDS
from ._options import multi_option, out_dir_option, server_bounds_options
from ._parsing import Command
from ._progress import throughput_bar

if TYPE_CHECKING:
    from ..generation import Part


@click.command("generate", cls=Command)
@click.argument("job", type=click.Path(exists=True, dir_okay=False))
@out_dir_option("Ledger folder (created if absent).")
@click.option(
    "--backend",
    type=click.Choice(BACKENDS),
    default=None,
    help="Generation engine [default: server when the job has a [server] table or --base-url is given, else vllm].",
)
@multi_option(
    "--base-url",
    "base_url",
    metavar="URL",
    help="OpenAI-compatible server(s) (http://HOST:8000/v1) for the server backend; several spread the requests.",
)
@server_bounds_options
@click.option(
    "--task",
    metavar="NAME|FILE",
    default=None,
    help="The task to generate: a built-in one (mgsm, belebele, global-mmlu-lite, mmath) or a task file (.toml); "
    "replaces the job's `task` [default: the job's, else mgsm].",
)
@click.option(
    "--thinking/--no-thinking",
    default=None,
    help="Reasoning models: render prompts with the chat template's enable_thinking on or off; replaces the job's "
    "`thinking` [default: the job's, else off].",
)
@click.option(
    "--shard",
    metavar="I/N",
    default=None,
    help="Generate only part I of N (0-based; parts are request groups ranked by a hash), into this part's own "
    "--out-dir; join the parts with `ledger merge` [default: from SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT when "
    "both are set, else the whole job; 0/1 is the whole job].",
)
@click.option("--dry-run", "dry", is_flag=True, help="Print requests, shards and worst-case tokens; generate nothing.")
@click.pass_obj
def generate_command(
    state,
    job: str,
    out: str,
    backend: str | None,
    base_url: tuple[str, ...],
    task: str | None,
    thinking: bool | None,
    shard: str | None,
    dry: bool,
    timeout_s: float | None,
    max_retries: int | None,
) -> None:
    """Generate the records of JOB (a TOML spec) into --out-dir; rerunning skips the shards already stored.

    With --shard I/N (or inside a SLURM array task) only part I of N, into its own --out-dir; `ledger merge` joins
    the parts into the ledger of the whole job.
    """
    from ..generation import JobHooks, JobSpec, dry_run, load_spec, run_job, with_part
    from ..spec import ServerOverrides

    part = _part(shard)
    dirs = {"data_dir": state.config.data_dir.value, "tokenizers_dir": state.config.tokenizers_dir.value, "task": task}
    spec: str | JobSpec = job
    if thinking is not None or part is not None:  # the spec read here, with the switch and the part replaced
        spec, dirs = load_spec(job, thinking=thinking, **dirs), {**dirs, "task": None}
        spec = with_part(spec, part)
    if dry:
        plan = dry_run(spec, out, **dirs)
        which = f"job {plan['job']}" + (f" part {part}" if part else "")
        click.echo(
            f"{which} ({plan['design']}): {plan['requests']} requests, {plan['records']} records, "
            f"{plan['shards']} shards ({plan['shards_done']} already done), "
            f"worst case {plan['worst_case_tokens']} output tokens"
        )
        return
    with throughput_bar("generate") as bar:
        result = run_job(
            spec,
            out,
            backend=backend,
            server=ServerOverrides(base_url=tuple(base_url), timeout_s=timeout_s, max_retries=max_retries),
            hooks=JobHooks(on_progress=bar.progress, on_tokens=bar.count_tokens),
            **dirs,
        )
    rate = result.tokens / result.seconds if result.seconds else 0.0
    which = f"job {result.job}" + (f" part {part}" if part else "")
    click.echo(
        f"{which}: wrote {result.written} shards ({result.records} records, {result.tokens} output tokens, "
        f"{rate:.0f} tok/s) into {result.ledger}; {result.skipped} of {result.shards} shards were already done",
        err=True,
    )


#: the environment a SLURM array task runs in: its index and the number of tasks
SLURM_ENV = ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT")


def _part(shard: str | None) -> Part | None:
    """The part to generate: ``--shard``, else SLURM's array variables (said on stderr), else none (all)."""
    from ..generation import parse_part

    if shard is None:
        index, count = (os.environ.get(name) for name in SLURM_ENV)
        if index is None or count is None:
            return None
        part = parse_part(f"{index}/{count}", what="/".join(SLURM_ENV))
        click.echo(f"generating part {part} of the job (from {'/'.join(SLURM_ENV)}; --shard overrides)", err=True)
    else:
        part = parse_part(shard)
    return None if part.count == 1 else part
