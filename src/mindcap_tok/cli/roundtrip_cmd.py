"""`mindcap-tok roundtrip [JOB.toml] --out DIR`: round-trip translation through language sequences, MQM-judged."""

from __future__ import annotations

import click

from ..ledger.backends import BACKENDS
from ._output import emit, render, to_json
from ._progress import progress_bar

_TABLE_COLUMNS = ("model", "by", "group", "n_texts", "n_failed", "n_unjudged", "pass_share", "pass_share_se",
                  "mean_mqm", "mean_judge_score")  # fmt: skip


def _overrides(model, texts, sample, sequences, max_tokens, seed, judge_model, judge_backend, spec_judge) -> dict:
    """Spec keys given on the command line (``None``: keep the file's)."""
    out: dict = {"texts": texts, "sample": sample, "max_tokens": max_tokens, "seed": seed}
    if model:
        out["model"] = list(model)
    if sequences:
        out["sequences"] = [s.strip() for item in sequences for s in item.split(",") if s.strip()]
    judge = dict(spec_judge)
    if judge_model:
        judge["model"] = judge_model
        judge.pop("model_name", None)
    if judge_backend:
        judge["backend"] = judge_backend
    if judge:
        out["judge"] = judge
    return out


@click.command("roundtrip")
@click.argument("job", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Run folder (hop waves, judge rounds).")
@click.option(
    "--backend", type=click.Choice(BACKENDS), default=None, help="Engine of the tested models [default: vllm]."
)
@click.option(
    "--dry-run", "dry", is_flag=True, help="Print the plan (chains, requests, worst-case tokens); run nothing."
)
@click.option("--format", "fmt", type=click.Choice(("table", "json")), default="table", help="Output format.")
@click.option("--model", multiple=True, help="Model folder or HF id (several: --model A B).")
@click.option("--texts", default=None, help="flores:devtest, flores:dev or a .jsonl/.csv file of id, text, category.")
@click.option("--sample", type=int, default=None, help="Draw N texts (seeded by --seed).")
@click.option("--sequences", multiple=True, help="Presets (lit:e-asia ... lit:all) or chains like en>de>th>en.")
@click.option("--max-tokens", type=int, default=None, help="Output-token cap of every hop.")
@click.option("--seed", type=int, default=None, help="Seed of the sample, the hops and the judge.")
@click.option("--judge-model", default=None, help="Judge model [default: the first tested model].")
@click.option("--judge-backend", type=click.Choice(BACKENDS), default=None, help="Judge engine [default: --backend].")
@click.pass_obj
def roundtrip_command(
    state, job, out, backend, dry, fmt, model, texts, sample, sequences, max_tokens, seed, judge_model, judge_backend
) -> None:
    """Translate texts through language sequences and back (hop waves, resumable), judge each back-translation
    for MQM issues, and report pass share (MQM >= 80) with bootstrap SEs over texts."""
    from ..roundtrip import load_spec, open_backends, plan_roundtrip, roundtrip_metrics, run_roundtrip
    from ..roundtrip.spec import read_spec_file

    file_judge = read_spec_file(job).get("judge", {}) if job else {}
    args = (model, texts, sample, sequences, max_tokens, seed, judge_model, judge_backend, file_judge)
    spec = load_spec(job, _overrides(*args), data_dir=state.config.data_dir.value)
    plan = plan_roundtrip(spec)
    if dry:
        emit(to_json(plan) if fmt == "json" else render([plan], "table", title="round-trip plan"), None)
        return
    backends, judge = open_backends(spec, backend)
    total = plan["waves"] + 1 + spec.judge.retries
    with progress_bar("round trip waves", total) as advance:
        result = run_roundtrip(spec, out, backends, judge, on_wave=lambda name, rows: advance())
    metrics = roundtrip_metrics(result.samples, seed=spec.seed)
    if fmt == "json":
        data = {"plan": plan, "counts": result.counts(), "written": result.written, "skipped": result.skipped,
                "metrics": metrics.to_dict("records")}  # fmt: skip
        emit(to_json(data), None)
        return
    counts = result.counts()
    click.echo(
        f"round trip {plan['name']}: {counts['samples']} samples ({counts['judged']} judged, "
        f"{counts['failed_empty_hop']} failed on an empty hop, {counts['unjudged']} unjudged), "
        f"{counts['capped_hops']} capped hops; wrote {len(result.written)} files, {len(result.skipped)} already there",
        err=True,
    )
    emit(render(metrics[list(_TABLE_COLUMNS)].to_dict("records"), "table", title="round trip"), None)
