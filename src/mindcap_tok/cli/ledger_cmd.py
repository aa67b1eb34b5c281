"""`mindcap-tok ledger import|info|verify|migrate|merge`: build, summarise, check, convert and merge ledgers."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import BadInputError
from ._options import format_option, multi_option, no_verify_option, out_dir_option, out_file_option
from ._output import emit, render
from ._parsing import Group
from ._progress import on_progress, progress_bar


@click.group("ledger", cls=Group)
def ledger_group() -> None:
    """Store generations (token ids are the source of truth) as partitioned Parquet with a manifest."""


def _count_lines(path: str) -> int:
    # a fast newline count for the progress bar total (reads bytes in 1 MiB blocks)
    with open(path, "rb") as fh:
        return sum(block.count(b"\n") for block in iter(lambda: fh.read(1 << 20), b""))


#: ``--from`` values: JSON lines, or another harness's logs (mindcap_tok.ingest.harness_logs.READERS)
SOURCES = ("jsonl", "lm-eval", "inspect", "lighteval")


@ledger_group.command("import")
# not exists=True: the importers name a missing path in one line, click in three
@click.argument("paths", nargs=-1, required=True, type=click.Path(allow_dash=True))
@out_dir_option("Ledger folder (created if absent).")
@click.option(
    "--from",
    "source",
    type=click.Choice(SOURCES),
    default="jsonl",
    show_default=True,
    help="What PATHS hold: mindcap-tok JSON lines, lm-evaluation-harness --log_samples output, inspect_ai logs, or "
    "lighteval --save-details output.",
)
@click.option("--tokenizer", help="Tokenizer the ids belong to (default: resolved from each record's model).")
@multi_option(
    "--task",
    "tasks",
    metavar="NAME|FILE",
    help="A built-in task's name (mgsm) or a task file (.toml): the task of logged tasks that are not built in "
    "(lm-eval, lighteval: repeatable, matched by name; inspect: one, for every log).",
)
@click.option("--batch", type=click.IntRange(min=1), default=2000, show_default=True, help="Records per commit.")
@click.option(
    "--allow-text-mismatch",
    is_flag=True,
    help="Store records whose text is not the decoding of their output_ids, marked (see `ledger info`).",
)
@click.option(
    "--think-close",
    metavar="TEXT",
    help="The string closing a thought of records with thinking true [default: the tokenizer's </think> token].",
)
@click.pass_obj
def import_command(
    state,
    paths: tuple[str, ...],
    out: str,
    source: str,
    tokenizer: str | None,
    tasks: tuple[str, ...],
    batch: int,
    allow_text_mismatch: bool,
    think_close: str | None,
) -> None:
    """Import PATHS into the ledger at --out-dir: a JSON-lines FILE (`-` reads standard input), or with
    --from lm-eval / inspect / lighteval a harness's logs (files or folders).

    One JSON object per line, for example:

    
    {"model": "qwen3-8b", "arm": "native", "lang": "th", "item": 12, "sample": 0, "seed": 1000,
     "cap": 4096, "prompt": "How many eggs?", "prompt_ids": [4340, 1657, 18805, 30],
     "output_ids": [24, 488, 220, 24, 284, 220, 16, 23, 198, 820, 220, 16, 23],
     "text": "9 + 9 = 18\\n#### 18", "finish_reason": "stop", "gold": 18, "generator": "vllm"}

    Required: model, arm (native, translate-act, pivot, code-switched), lang (FLORES code or alias), item,
    sample, seed, cap, prompt, prompt_ids, output_ids, text, finish_reason (stop, length, or unknown), gold (an
    integer, or a string such as "5,600"), generator. Optional: announced, announce_style, forcing,
    design, template_id, generator_version. Integers must be JSON integers. Without output_ids (or
    prompt_ids) the text (or prompt) is tokenized and the record is marked retokenized.

    Rerunning skips records already stored identically; a stored record with the same key but other
    content is an error. Models are stored by registry name (qwen3 and Qwen3-8B are qwen3-8b). With
    output_ids given, a record that finished by length holds cap ids, and its text is the decoding of its
    ids (special tokens skipped or kept); --allow-text-mismatch stores such records marked instead.

    --from lm-eval reads `lm_eval ... --log_samples` output (samples_<task>_<time>.jsonl files, or the run's
    folder with its results_<time>.json): one record per sample and response, task, language and arm from the
    task name (mgsm_native_cot_th: mgsm, tha_Thai, native; mgsm_en_cot_th: pivot; other tasks need --task), the
    cap from max_gen_toks (lm-eval's default 256 when unset, marked), ids re-encoded with --tokenizer (required)
    and the finish reason inferred from them (length when they reach the cap). A run whose model_args set
    think_end_token (or enable_thinking) logs only the text after the last </think>: its records are marked
    output_partial, their finish reason unknown (not inferred). All files in one commit.

    --from inspect reads inspect_ai logs (.eval, .json) through inspect (the inspect extra): the sampled ids
    where the model events hold them (--log-model-api against vLLM with return_token_ids), else the texts
    re-encoded; task names as for lm-eval (mgsm_native_cot_de), reasoning tokens, the sample's token limit, and
    "reasoning exhausted the cap" flagged. Limits: a .eval log's
    members may inflate to 256 MiB each and 1 GiB together (a .json log: 1 GiB), checked before inspect reads it;
    lm-eval samples files hold at most 1 GiB together; a JSON line at most 32 MiB.

    --from lighteval reads `lighteval ... --save-details` output (details_<task>_<date>.parquet files, or the
    run's output folder with its results_<date>.json): one record per doc and response, the output ids as
    lighteval logged them (the sampled ids, not re-encoded), the cap from the run's max_new_tokens or the doc's
    generation_size, task and language from the task name (mgsm:de, mgsm_deu, or as for lm-eval), the finish
    reason inferred from the ids (length when they reach the cap), thinking records where lighteval split off a
    reasoning. Details files hold at most 1 GiB together.
    """
    if source != "jsonl":
        if allow_text_mismatch:
            raise BadInputError(f"--allow-text-mismatch applies to --from jsonl (--from {source} re-encodes the texts)")
        if think_close is not None:
            why = "finds a thought's </think> itself" if source == "lighteval" else "logs hold no thinking records"
            raise BadInputError(f"--think-close applies to --from jsonl (--from {source} {why})")
        importer = _import_inspect if source == "inspect" else _import_logs
        importer(state, paths, out, source, tokenizer, tasks)
        return
    from ..ingest import ImportInterrupted, import_jsonl

    if len(paths) != 1 or Path(paths[0]).is_dir():  # a pipe or FIFO is the importer's to judge
        raise BadInputError("--from jsonl imports one file (or `-`); give a single JSON-lines file")
    file = paths[0]
    # a pipe can be read only once: count lines (for the progress bar) only in regular files
    total = _count_lines(file) if file != "-" and Path(file).is_file() else 0
    try:
        with progress_bar("importing", total=total, enabled=total > 5000) as advance:
            result = import_jsonl(
                file,
                out,
                tokenizer=tokenizer,
                tokenizers_dir=state.config.tokenizers_dir.value,
                batch_records=batch,
                on_progress=on_progress(advance),
                allow_text_mismatch=allow_text_mismatch,
                think_close=think_close,
            )
    except ImportInterrupted as exc:  # Ctrl-C: one line saying what was committed, the shell's exit status
        click.echo(f"error: {exc}", err=True)
        sys.exit(130)
    click.echo(
        f"imported {result.added} of {result.read} records into {result.ledger} ({len(result.shards)} new shards; "
        f"{result.skipped} already stored, {result.retokenized} retokenized from text)",
        err=True,
    )


def _import_logs(state, paths: tuple[str, ...], out: str, source: str, tokenizer: str | None, tasks) -> None:
    """``--from lm-eval|lighteval``: a harness's logs through :func:`mindcap_tok.ingest.harness_logs.import_logs`."""
    from ..ingest import import_logs

    if tokenizer is None:
        why = "its ids are checked against it" if source == "lighteval" else "the logs hold texts, not ids"
        raise BadInputError(f"--from {source} needs --tokenizer (the model's tokenizer: {why})")
    if "-" in paths:
        raise BadInputError(f"--from {source} reads files or folders, not standard input")
    result = import_logs(
        paths, out, source=source, tokenizer=tokenizer, tokenizers_dir=state.config.tokenizers_dir.value, tasks=tasks
    )
    notes = ""
    if result.partial:
        notes += (
            f"; {result.partial} hold only the text after the thought (the run set think_end_token): length a "
            "lower bound, cut by the cap unknown"
        )
    if result.prompt_truncated:
        notes += (
            f"; {result.prompt_truncated} prompts longer than the run's context allowed (the harness shortened them)"
        )
    click.echo(
        f"imported {result.added} of {result.read} records from {source} logs into {result.ledger} "
        f"({len(result.shards)} new shards; {result.skipped} already stored, {result.retokenized} retokenized from "
        f"text, {result.over_cap} of them encode to more ids than their cap, kept as they are{notes})",
        err=True,
    )


def _import_inspect(state, paths: tuple[str, ...], out: str, source: str, tokenizer: str | None, tasks) -> None:
    """``--from inspect``: inspect_ai logs through :func:`mindcap_tok.ingest.inspect_logs.import_inspect`, with
    its summary (stop reasons inferred, provider-default caps, errored samples)."""
    from ..ingest import import_inspect

    if tokenizer is None:
        raise BadInputError("--from inspect needs --tokenizer (the model's tokenizer: the logs hold texts, not ids)")
    if len(tasks) > 1:
        raise BadInputError("--from inspect takes one --task (the task of logs whose task is not built in)")
    result = import_inspect(
        paths,
        out,
        tokenizer=tokenizer,
        task=tasks[0] if tasks else None,
        tokenizers_dir=state.config.tokenizers_dir.value,
    )
    read = result.read
    retok = len(read.records) - read.sampled_ids
    ids = "all retokenized from text" if not read.sampled_ids else f"{retok} retokenized from text"
    exhausted = f"; the reasoning exhausted the cap in {read.reasoning_exhausted}" if read.reasoning_exhausted else ""
    click.echo(
        f"imported {result.added} of {len(read.records)} samples from {len(read.logs)} inspect log(s) into "
        f"{result.ledger} ({result.skipped} already stored; {ids}, {read.over_cap} of them "
        f"longer than their cap; finish reason inferred for {read.finish_inferred}, cap a provider default for "
        f"{read.cap_inferred}; {read.errored} errored samples left out{exhausted})",
        err=True,
    )


@ledger_group.command("info")
@click.argument("ledger", type=click.Path(exists=True, file_okay=False))
@format_option()
@out_file_option()
@no_verify_option
def info_command(ledger: str, fmt: str, out: str | None, no_verify: bool) -> None:
    """Cells, record counts, cap-hit rates and output-length quantiles of LEDGER."""
    from ..store import Ledger

    led = Ledger(ledger, verify=not no_verify)
    frame = led.info()
    if fmt == "table":
        frame = frame.drop(columns=[c for c in ("announce_style", "forcing") if frame[c].nunique(dropna=False) <= 1])
        frame = frame.assign(cap_hit=frame["cap_hit"].map("{:.1%}".format))
        if "cut_unknown" in frame:
            frame = frame.assign(cut_unknown=frame["cut_unknown"].map("{:.1%}".format))
    title = f"{led.root}: {len(led)} records in {len(led.shards())} shards"
    emit(render(frame.to_dict("records"), fmt, title=title, floatfmt=".1f"), out)


@ledger_group.command("verify")
@click.argument("ledger", type=click.Path(exists=True, file_okay=False))
def verify_command(ledger: str) -> None:
    """Check every shard of LEDGER against the manifest (size, SHA-256, rows, schema); exit 1 on a problem.

    Safe to run while an import appends: it waits for a commit in progress and checks one consistent state.
    """
    from ..store import Ledger

    report = Ledger(ledger).verify()
    for note in report.notes:
        click.echo(f"note: {note}", err=True)
    if report.ok:
        click.echo(f"ok: {report.shards} shards, {report.rows} records, all hashes match")
        return
    for problem in report.problems:
        click.echo(f"problem: {problem}", err=True)
    click.echo(f"{len(report.problems)} problem(s) in {report.root}", err=True)
    sys.exit(1)


@ledger_group.command("migrate")
@click.argument("ledger", type=click.Path(exists=True, file_okay=False))
@out_dir_option("The new ledger's folder (must not exist).")
def migrate_command(ledger: str, out: str) -> None:
    """Convert LEDGER, written in an earlier storage format, into a new ledger in the current one (once).

    Every record, shard, text-mismatch mark, tokenizer entry and generation job is kept; LEDGER is left as it is.
    The new ledger is written beside --out-dir and renamed into place when it verifies.
    """
    from ..store import migrate

    with progress_bar("migrating shards", total=None) as advance:
        done = migrate(ledger, out, on_progress=on_progress(advance))
    click.echo(
        f"migrated {done.rows} records in {done.shards} shards ({done.cells} cells, {done.jobs} generation jobs) "
        f"from format version {done.from_version} into {done.out_dir}",
        err=True,
    )


@ledger_group.command("merge")
@click.argument("ledgers", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@out_dir_option("The merged ledger's folder (created if absent; rerun into it to finish a killed merge).")
def merge_command(ledgers: tuple[str, ...], out: str) -> None:
    """Merge LEDGERS, the parts of one generation job (`generate --shard I/N`), into the ledger at --out-dir.

    Refused in one line, before anything is written: ledgers of different jobs, settings or tokenizer files, parts
    of different splits, and a record stored twice with other content (an identical one is skipped, as `ledger
    import` does). A killed merge leaves what it committed; rerunning it finishes. LEDGERS are only read.
    """
    from ..store import merge_ledgers

    with progress_bar("merging cells", total=None) as advance:
        done = merge_ledgers(ledgers, out, on_progress=on_progress(advance))
    for job, missing in done.missing.items():
        if missing:
            count = len(done.parts[job]) + len(missing)
            shown = ", ".join(f"{i}/{count}" for i in missing)
            click.echo(f"note: job {job}: part(s) {shown} are not among the ledgers merged", err=True)
    click.echo(
        f"merged {done.added} of {done.read} records from {done.inputs} ledgers into {done.out_dir} "
        f"({done.skipped} identical duplicates or already stored)",
        err=True,
    )
