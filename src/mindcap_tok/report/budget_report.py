"""The budget report: Markdown tables, CSVs and the two figures of a Δ_L sweep, built as data (:func:`budget_tables`)
and written as one folder (:func:`write_budget_tables`; with the page: :mod:`.ledger_report`)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from .._io import check_output_folder, output_folder
from .._tables import markdown_table
from ..audits.truncation import truncation_tables
from ..budgets import SWEEP_BUDGETS
from ..errors import MindcapError
from ..resample import DEFAULT_RESAMPLING, Resampling
from ..scoring import OUTCOMES
from ..stats.binding import binding_regime
from ..stats.bootstrap import grid_bootstrap
from ..stats.cap import BOUNDS, EXACT, cut_shares
from ..stats.curves import Sweep, accuracy_table, sweep
from ..stats.failure_tail import failure_tail
from ..stats.forcing import forcing_populations
from ..stats.grid import accuracy_grid
from ..stats.premiums import premium_table
from ..stats.roles import arm_mask
from ..stats.subcdf import compare_prediction, predict_delta
from ..stats.timing import emission_timing, timing_contrast
from ..store import SETTING_COLUMNS
from ..tasks.roles import TaskArms, task_arms

if TYPE_CHECKING:
    from ..scoring import Scores

from .budget_figures import plot_gap_curves, plot_native_curves

#: the command named in the report folder's marker; only it may replace the folder's files
PRODUCER = "mindcap-tok report"
#: the proportions estimating Δ_L(B): both native accuracies, Δ_L, its pointwise interval and simultaneous band
DELTA_PROPORTIONS = ("acc_native", "acc_native_scaled", "delta", "ci_low", "ci_high", "band_low", "band_high")
#: a sweep row's Δ_L(B) columns, in the order both the report's and ``mindcap-tok sweep``'s Δ_L tables show them
DELTA_COLUMNS = ("scaled_budget", *DELTA_PROPORTIONS)
#: columns holding proportions, shown as points in the Markdown tables
POINT_COLUMNS = (
    *DELTA_PROPORTIONS,
    "acc_translate",
    "gap",
    "gap_ci_low",
    "gap_ci_high",
    "delta_lower",
    "delta_upper",
    "gap_lower",
    "gap_upper",
    "cut_share",
    "accuracy",
    "mae",
    "max_abs_error",
    "naive_mae",
    "never_emission",
    "cap_hit",
    *OUTCOMES,
    "ci_low_hit",
    "ci_high_hit",
    "acc_completed",
    "acc_truncated",
    "acc_at_cap",
    "max_gain",
)


def to_points(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy with proportion columns multiplied by 100 (accuracy points)."""
    out = frame.copy()
    for col in POINT_COLUMNS:
        if col in out.columns:
            out[col] = 100 * out[col]
    return out


@dataclass(frozen=True)
class BudgetTables:
    """A budget report's content before it is written: the sweep, every table by its CSV name (``sweep``, ``peaks``,
    ``crossovers``, ``accuracy``, ``binding``, and where the records allow ``forcing``, ``timing``,
    ``failure_tail``, ``timing_contrast``, ``truncation``, ``subcdf_check``; proportions as fractions), the
    native arm's accuracy curves drawn in ``native_curves.png``, the CI level and the notes of ``report.md``."""

    sweep: Sweep
    tables: dict[str, pd.DataFrame]
    native_curves: pd.DataFrame
    level: float
    notes: tuple[str, ...]
    #: the answer parser the scores were read with (named on the figures' axes); None: not known
    parser: str | None = None


@dataclass(frozen=True)
class BudgetReport:
    """What :func:`~.ledger_report.write_budget_report` wrote (file names inside ``out_dir``) and the sweep behind
    it."""

    out_dir: Path
    files: tuple[str, ...]
    sweep: Sweep


def _md(frame: pd.DataFrame) -> str:
    return markdown_table(to_points(frame), ".2f") if len(frame) else "_none_"


def budget_tables(
    scores: Scores | pd.DataFrame,
    premiums,
    *,
    budgets: Sequence[int] = SWEEP_BUDGETS,
    resampling: Resampling = DEFAULT_RESAMPLING,
    frame: str = "replay",
    arms: TaskArms | None = None,
    notes: Sequence[str] = (),
) -> BudgetTables:
    """The tables of a budget report (see :func:`~.ledger_report.write_budget_report` for the arguments), written
    nowhere."""
    by_budget, by_record = (scores, None) if isinstance(scores, pd.DataFrame) else (scores.by_budget, scores.by_record)
    level = resampling.level
    table = premium_table(premiums)
    grid = accuracy_grid(by_budget, frame, records=by_record)
    boot = grid_bootstrap(grid, n_boot=resampling.n_boot, seed=resampling.seed)
    arms = arms if arms is not None else task_arms(by_budget)
    native, translate = arms.native, arms.comparator
    result = sweep(grid, table, budgets=budgets, resampling=resampling, native=native, translate=translate, boot=boot)
    curves = accuracy_table(grid, boot=boot, level=level)
    native_curves = curves[arm_mask(curves, native)]
    tables: dict[str, pd.DataFrame] = {
        "sweep": result.rows,
        "peaks": result.peaks,
        "crossovers": result.crossovers,
        "accuracy": curves,
        "binding": binding_regime(result, by_record, native=native),
    }
    notes = list(notes)
    if by_record is not None and "forcing" in by_record and by_record["forcing"].fillna(False).astype(bool).any():
        tables["forcing"] = forcing_populations(by_record)
    if by_record is not None:
        timing = emission_timing(by_record)
        tables["timing"] = timing
        if "outcome" in by_record.columns:
            tables["failure_tail"] = failure_tail(by_record)
        try:
            contrast = timing_contrast(timing, native, translate=translate)
            if len(contrast):
                tables["timing_contrast"] = contrast
        except MindcapError:
            pass
        if {"cap", "finish_reason"} <= set(by_record.columns):
            trunc = truncation_tables(scores, natives=native, budgets=budgets, premiums=table, level=level)
            tables["truncation"] = trunc.tables["cells"].rename(
                columns={"ci_low": "ci_low_hit", "ci_high": "ci_high_hit"}
            )
        try:
            pred = predict_delta(by_record, table, budgets=result.rows["budget"].unique(), native=native)
            tables["subcdf_check"] = compare_prediction(pred, result.rows)
        except MindcapError as exc:
            notes.append(f"Sub-CDF check skipped: {exc}")
    if by_record is not None and (cut_shares(by_record)["unknown_share"] > 0).any():
        notes.append(
            "Some traces' logs do not say whether the cap cut them (finish reason unknown): they count as cut in "
            "the bounds beyond the cap (c = share cut + unknown, the widest honest bound)."
        )
    parser = None if isinstance(scores, pd.DataFrame) else scores.parser
    return BudgetTables(result, tables, native_curves, level, tuple(notes), parser)


def write_budget_tables(
    built: BudgetTables, out_dir: str | os.PathLike[str], *, pages: Mapping[str, str] | None = None
) -> BudgetReport:
    """Write the report ``built`` (:func:`budget_tables`) into ``out_dir`` as
    :func:`~.ledger_report.write_budget_report` does, with
    ``pages`` (file name -> text, e.g. ``report.html``) written beside the rest."""
    check_output_folder(out_dir, PRODUCER)
    result, level = built.sweep, built.level
    target = Path(out_dir)
    files = []
    with output_folder(target, PRODUCER) as tmp:
        for name, frame_ in built.tables.items():
            frame_.to_csv(tmp / f"{name}.csv", index=False)
            files.append(f"{name}.csv")
        plot_native_curves(
            built.native_curves, result.peaks, path=tmp / "native_curves.png", level=level, parser=built.parser
        )
        files.append("native_curves.png")
        if "gap" in result.rows.columns:
            plot_gap_curves(
                result.rows.dropna(subset=["gap"]), tmp / "gap_curves.png", level=level, parser=built.parser
            )
            files.append("gap_curves.png")
        for name, text in (pages or {}).items():
            (tmp / name).write_text(text, "utf-8")
            files.append(name)
        markdown = _markdown(result, built.tables, files, list(built.notes), built.parser)
        (tmp / "report.md").write_text(markdown, "utf-8")
        files.append("report.md")
    return BudgetReport(target, tuple(sorted(files)), result)


def _shown(value: object) -> str:
    """A setting's value as a title shows it: a missing one as ``—``, a whole number without ``.0``."""
    if value is None or (isinstance(value, float) and value != value):
        return "—"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def drop_shared_settings(*frames: pd.DataFrame) -> tuple[Any, ...]:
    """Drop the generation-setting columns that hold one value in every frame; return the frames and a title
    fragment naming those values (``, design replay, cap 4096``)."""
    shared = []
    for col in SETTING_COLUMNS:
        values = {_shown(v) for f in frames if col in f.columns for v in f[col].tolist()}
        if len(values) == 1:
            shared.append(f"{col} {values.pop()}")
            frames = tuple(f.drop(columns=[col]) if col in f.columns else f for f in frames)
    return (*frames, "".join(f", {s}" for s in shared))


def marked_bounds(rows: pd.DataFrame) -> pd.DataFrame:
    """Sweep rows (in points) for a table: where some row lies beyond its cap, a ``beyond_cap`` column reads ``†``
    (no point estimate: Δ_L is only bounded) or ``‡`` (exact: no trace was cut), and ``delta_bounds`` shows the
    bounds as ``[lower, upper]``; where none does, the cap columns are left out."""
    if "cap_status" not in rows:
        return rows
    if not rows["beyond_cap"].eq(True).any():  # every row measured (NaN: a cell without a cap): nothing to mark
        return rows.drop(columns=["cap_status", "beyond_cap", "delta_lower", "delta_upper"])
    status = rows["cap_status"]
    mark = status.map({BOUNDS: "†", EXACT: "‡"}).fillna("")
    bounds = [
        f"[{lo:.2f}, {hi:.2f}]" if m else ""
        for lo, hi, m in zip(rows["delta_lower"], rows["delta_upper"], mark, strict=True)
    ]
    out = rows.drop(columns=["cap_status", "beyond_cap", "delta_lower", "delta_upper"], errors="ignore")
    return out.assign(beyond_cap=mark, delta_bounds=bounds)


#: the legend of :func:`marked_bounds`' marks
BOUNDS_LEGEND = (
    "beyond_cap: † where B or floor(r·B) exceeds the cell's cap and the cap cut traces: acc_NATIVE(floor(r·B)) "
    "was not observed, so Δ_L has no estimate, only delta_bounds, from acc_NATIVE(cap) − acc_NATIVE(B) to "
    "acc_NATIVE(cap) + c − acc_NATIVE(B), c the share of the cell's traces cut by the cap (or of unknown cut "
    "status), and from −c to c where B itself exceeds the cap; ‡ where no trace was cut, so the value there is "
    "acc_NATIVE(cap) exactly."
)


def _markdown(
    result: Sweep, tables: dict[str, pd.DataFrame], files: list[str], notes: list[str], parser: str | None = None
) -> str:
    prem = ", ".join(f"{k} r={v:.4f}" for k, v in result.premiums.items())
    bounds = "beyond_cap" in result.rows.columns and bool(result.rows["beyond_cap"].eq(True).any())
    # every setting that tells two cells apart keeps its column (three Thai cells must not read as one); those
    # all rows share are said once above the table
    rows, peaks, shared = drop_shared_settings(result.rows, result.peaks)
    settings = [c for c in SETTING_COLUMNS if c in rows.columns]
    cols = [
        c
        for c in ("model", "lang", *settings, "budget", *DELTA_COLUMNS, "acc_translate", "gap", "native_lead_prob")
        if c in rows.columns
    ]
    if "cap_status" in rows.columns:
        cols += ["cap_status", "beyond_cap", "delta_lower", "delta_upper"]
    sweep_rows = marked_bounds(to_points(rows[cols]))
    every_row = [f"Every row: {shared.removeprefix(', ')}.", ""] if shared else []
    parts = [
        "# Budget sweep report",
        "",
        f"Frame: **{result.frame}**. Item-clustered bootstrap: {result.n_boot} resamples of the items (all samples "
        f"of a drawn item kept), seed {result.seed}; intervals are pointwise {result.level:.0%} percentile CIs, "
        f"bands are simultaneous {result.level:.0%} studentized max-|t| bands over the budget sweep. "
        f"Accuracies and differences in points{f'; answers read with the {parser} parser' if parser else ''}.",
        "",
        f"Premiums: {prem}.",
        "",
        "Δ_L(B) = acc_NATIVE(floor(r·B)) − acc_NATIVE(B); gap(B) = acc_COMPARATOR(B) − acc_NATIVE(B), NATIVE and "
        "COMPARATOR being each task's native and comparator arms (MGSM's: native and translate-act).",
        "",
        "## Peaks",
        "",
        "Stability: share of bootstrap replicates whose argmax budget equals the point argmax.",
        "",
        *every_row,
        _md(peaks),
        "",
        "## Sweep",
        "",
        *every_row,
        *([BOUNDS_LEGEND, ""] if bounds else []),
        markdown_table(sweep_rows, ".2f") if len(sweep_rows) else "_none_",
        "",
        "## Binding regime",
        "",
        "Budgets B (as ranges of swept budgets) where the simultaneous band of Δ_L(B) excludes 0 (band_binds) and "
        "where correct answer lines still appear in (B, floor(r·B)], i.e. some correct trace has its emission E in "
        "that window (emission_binds; needs the ledger's records).",
        "",
        _md(tables["binding"].drop(columns=["budgets"])),
        "",
        "## Crossovers",
        "",
        "Consecutive budgets between which the leading arm changes (native_lead_prob: bootstrap P(native leads)).",
        "",
        _md(result.crossovers),
        "",
    ]
    if "timing" in tables:
        parts += [
            "## Answer-emission timing",
            "",
            "Emission quantiles over traces that emit a parseable answer "
            "(token positions); never_emission and cap_hit in percent of traces.",
            "",
            _md(tables["timing"]),
            "",
        ]
    if "timing_contrast" in tables:
        parts += ["### Early-tail contrast (NATIVE − TRANSLATE-ACT p10)", "", _md(tables["timing_contrast"]), ""]
    if "failure_tail" in tables:
        parts += [
            "### Failure tail",
            "",
            "Every completed trace in one category, in percent of traces (a row sums to 100), by precedence: "
            "correct; several_answers (more than one answer line); wrong (one, wrong); format_noncompliant (only a "
            "lenient variant of the task's parser reads an answer); unparseable (a `####` line nothing reads); "
            "truncated (none of these, cut by the cap); no_answer_line (none of these, stopped by itself).",
            "",
            _md(tables["failure_tail"]),
            "",
        ]
    if "truncation" in tables:
        cells = tables["truncation"]
        parts += [
            "## What the cap did",
            "",
            "Per population: cap hits (finish reason length) with a Wilson interval, accuracy of completed and "
            "truncated traces at the cap, never-emission share, and the most a higher cap could add (truncated "
            "traces wrong at the cap). Retokenized records (imported from logs) have re-encoded, not sampled, "
            "lengths.",
            "",
            *(f"- {s[0].upper()}{s[1:]}" for s in cells["sentence"]),
            "",
            _md(cells.drop(columns=["sentence"])),
            "",
        ]
    if "forcing" in tables:
        parts += [
            "## Forcing, by population",
            "",
            "Each record of a forcing job is put in the population of its decode before forcing: truncated (the cap "
            "cut it), unanswered (it stopped by itself without an answer line; forced under forcing.unanswered), "
            "answered (it stopped with one: not forced), finished (it stopped, but the ledger records neither "
            "whether it was forced nor its unforced source). "
            "Accuracy of the completed (forced) trace; the pooled row is shown beside, never instead.",
            "",
            _md(tables["forcing"]),
            "",
        ]
    if "subcdf_check" in tables:
        parts += [
            "## Sub-CDF consistency",
            "",
            "Δ_L predicted from G(t) = P(C=1, E ≤ t) of the records against "
            "the swept Δ_L (exact in the replay frame: E is the first budget from which the prefix reads the "
            "completed trace's answer); naive_mae: P(C=1)·P(E in window) instead.",
            "",
            _md(tables["subcdf_check"]),
            "",
        ]
    parts += [*(f"_{n}_" for n in notes), "## Files", "", *(f"- `{f}`" for f in files), ""]
    return "\n".join(parts)
