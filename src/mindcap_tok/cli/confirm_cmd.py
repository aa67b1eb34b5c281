"""`mindcap-tok confirm`: a replay ledger's predictions checked on an independent ledger of hard-capped decodes."""

from __future__ import annotations

import click

from ..choices import SWEEP_BUDGETS
from ._options import (
    allow_tokenizer_mismatch_option,
    budgets_option,
    check_n_boot,
    format_option,
    level_option,
    multi_option,
    n_boot_option,
    no_verify_option,
    out_file_option,
    task_files_option,
    tokenizer_option,
)
from ._output import emit, render, to_json
from ._parsing import Command
from .stats_cmd import _resampling, load_scores, score_arms

_LEDGER = click.Path(exists=True, file_okay=False)


def _points(frame):
    """A copy with :data:`~mindcap_tok.stats.confirm.PROPORTIONS` columns in points (x 100)."""
    from ..stats.confirm import PROPORTIONS

    return frame.assign(**{c: frame[c] * 100 for c in PROPORTIONS if c in frame.columns})


@click.command("confirm", cls=Command)
@click.option("--replay", required=True, type=_LEDGER, help="The discovery ledger (long caps, replay frame).")
@click.option("--independent", required=True, type=_LEDGER, help="The ledger of hard-capped decodes, one per cap.")
@multi_option(
    "--premiums",
    "premium_specs",
    help="Tokenizer name (qwen3-8b), a `mindcap-tok premium --format json` file, or lang=r; repeatable. "
    "Default: each model's own tokenizer.",
)
@budgets_option(help=f"Budgets B, 64,128 or 64 128 (default {','.join(map(str, SWEEP_BUDGETS))}).")
@multi_option("--model", "models", help="Only these models.")
@multi_option("--lang", "langs", help="Only these languages.")
@n_boot_option()
@click.option("--seed", type=int, default=0, show_default=True)
@level_option
@click.option("--parser", default="strict", show_default=True, help="Answer parser variant.")
@task_files_option
@no_verify_option
@tokenizer_option
@allow_tokenizer_mismatch_option
@format_option()
@out_file_option()
@click.pass_obj
def confirm_command(state, replay, independent, budgets, n_boot, seed, level, fmt, out, **common) -> None:
    """Per native cell and budget: the replay Δ_L with its CI, the independent Δ_L with its SE, whether it lies
    inside the discovery interval, the sub-CDF prediction and its error; per cell the argmax check and the
    sub-CDF MAE; per cell and cap the mean output lengths (independent vs truncated discovery traces)."""
    from ..stats.confirm import confirm
    from ..stats.inputs import sweep_budgets

    check_n_boot(n_boot, level)  # before the scoring
    grid = budgets or list(SWEEP_BUDGETS)
    kw = {
        "models": common["models"],
        "langs": common["langs"],
        "parser": common["parser"],
        "verify": not common["no_verify"],
        "allow_tokenizer_mismatch": common["allow_tokenizer_mismatch"],
        "tokenizer": common["tokenizer"],
        "tasks": common["tasks"],
    }
    rep, table = load_scores(state, replay, sweep_budgets(grid), common["premium_specs"], **kw)
    ind, _ = load_scores(state, independent, sweep_budgets(grid), common["premium_specs"], **kw)
    arms = score_arms(rep, common["tasks"])  # each task's own native and comparator arms
    result = confirm(
        rep,
        ind,
        premiums=table,
        budgets=grid,
        resampling=_resampling({"n_boot": n_boot, "seed": seed, "level": level}),
        native=arms.native,
        translate=arms.comparator,
    )
    if fmt == "json":
        text = to_json({**result.as_dict(), "units": "fractions"})
    elif fmt == "csv":
        text = render(result.rows.to_dict(orient="records"), "csv")
    else:
        head = f"Confirmation ({result.n_boot} item resamples, seed {result.seed}, {result.level:.0%} CIs; points)"
        text = render(_points(result.rows).to_dict(orient="records"), fmt, title=head, floatfmt=".2f")
        cells = _points(result.cells).to_dict(orient="records")
        text += "\n" + render(cells, fmt, title="Argmax and sub-CDF error per cell (points)", floatfmt=".2f")
        text += "\n" + render(
            _points(result.lengths).to_dict(orient="records"),
            fmt,
            title="Mean output length: independent vs truncated discovery traces (difference in % of the cap)",
            floatfmt=".2f",
        )
    emit(text, out)
