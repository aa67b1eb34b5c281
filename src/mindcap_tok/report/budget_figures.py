"""Budget-sweep figures: NATIVE accuracy curves with each peak's [B, floor(r·B)] interval (paper Figure 1)
and the native-vs-translate gap curves (Figure 2). Titles, axes and notes say what is drawn, so a figure
reads without the paper.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from ..data.languages import short_name
from ..store import SETTING_COLUMNS
from .figures import caption, legend_outside, pyplot, save_figure


def budget_axis(ax, budgets: np.ndarray) -> None:
    """Make ``ax``'s x axis a log2 budget axis labelled over the whole range of ``budgets`` drawn (the scaled
    budgets floor(r·B) run past the grid), as the budget figures draw it."""
    ax.set_xscale("log", base=2)
    values = sorted({int(b) for b in budgets if b > 0})
    low, high = values[0], values[-1]
    powers = [1 << k for k in range(low.bit_length() - 1, high.bit_length()) if low <= (1 << k) <= high]
    ticks = values if len(values) <= 12 or not powers else powers
    kept = [ticks[0]]
    for t in ticks[1:]:  # budgets under 1.2× apart (247, 256) would print over each other: the first one stays
        if t >= 1.2 * kept[-1]:
            kept.append(t)
    ticks = kept
    # the largest and smallest budgets drawn get a label, in place of a grid tick too close to print beside it
    if high > ticks[-1]:
        ticks = [*ticks[:-1], high] if high < 1.4 * ticks[-1] else [*ticks, high]
    if low < ticks[0]:
        ticks = [low, *ticks[1:]] if low > ticks[0] / 1.4 else [low, *ticks]
    ax.set_xticks(ticks, [str(t) for t in ticks], rotation=45, fontsize=8)
    ax.set_xlim(low / 1.1, high * 1.1)
    ax.minorticks_off()


def _tasks(part: pd.DataFrame) -> list[str]:
    """``["task"]`` where the rows hold several tasks (their curves in one language must be told apart), else
    ``[]``: a single task's labels stay the language alone."""
    return ["task"] if "task" in part.columns and part["task"].nunique() > 1 else []


def _curve_name(setting: dict) -> str:
    """A gap curve's name: its language, and its task where the panel holds several (``de (plain2)``)."""
    name = short_name(setting["lang"])
    return f"{name} ({setting['task']})" if "task" in setting else name


def _series(part: pd.DataFrame, peaks: pd.DataFrame):
    """One curve per language and generation setting (a cell: an announcement cell is not the replay one), with
    its label (the settings that differ between the panel's cells) and its peak row, if any."""
    keys = ["lang", *(c for c in SETTING_COLUMNS if c in part.columns and part[c].nunique(dropna=False) > 1)]
    for values, cur in part.groupby(keys, sort=False, dropna=False):
        values = values if isinstance(values, tuple) else (values,)
        setting = dict(zip(keys, values, strict=True))
        shown = {k: v for k, v in setting.items() if k not in ("lang", "design", "announce_style") and not pd.isna(v)}
        extra = [
            str(v) if k == "task" else f"{k} {int(v) if isinstance(v, float) and v.is_integer() else v}"
            for k, v in shown.items()
        ]
        if not extra and "design" in setting:
            extra = [str(setting["design"])]
        label = short_name(setting["lang"]) + (f" ({', '.join(extra)})" if extra else "")
        match = pd.Series(True, index=peaks.index)
        for k, v in setting.items():
            if k in peaks.columns:
                match &= peaks[k].isna() if pd.isna(v) else peaks[k] == v
        yield label, cur.sort_values("budget"), peaks[match]


def _parser_words(parser: str | None) -> str:
    """How an axis names the answer parser: `` (strict parser)``; nothing where it is not known."""
    return f" ({parser} parser)" if parser else ""


def within_cap(cur: pd.DataFrame) -> tuple[pd.DataFrame, int | None]:
    """The rows of one curve at budgets within its cap (nothing was decoded beyond it), and the cap where the budgets
    reach it (None where the rows have no cap or stay below it: the axis is not stretched to a cap far away)."""
    caps = cur["cap"].dropna().unique() if "cap" in cur.columns else []
    if len(caps) != 1 or cur["budget"].max() < int(caps[0]):
        return cur, None
    cap = int(caps[0])
    return cur[cur["budget"] <= cap], cap


def _cap_line(ax, cap: int | None, colour: str) -> None:
    if cap is not None:
        ax.axvline(cap, color=colour, ls="--", lw=1, alpha=0.7, label="_cap")


def _peak_span(cur: pd.DataFrame, peak: pd.DataFrame, cap: int | None) -> tuple[int, int, float, float, float] | None:
    """A curve's peak interval as (B, floor(r·B), acc(B), acc(floor(r·B)), Δ), or None where there is none to draw:
    no peak row, the scaled budget beyond the cap (not drawn as if measured there), or an all-zero curve (its
    "peak" is a tie of zeros, not an effect)."""
    if peak.empty or not (cur["accuracy"] > 0).any():
        return None
    pk = peak.iloc[0]
    b, s = int(pk["peak_budget"]), int(pk["scaled_budget"])
    if cap is not None and s > cap:
        return None
    acc_b = float(cur.loc[cur["budget"] == b, "accuracy"].iloc[0])
    acc_s = float(cur.loc[cur["budget"] == s, "accuracy"].iloc[0])
    return b, s, acc_b, acc_s, float(pk["delta"])


def _panels(curves: pd.DataFrame) -> list[tuple[str, str | None, pd.DataFrame]]:
    """(model, design, rows) per panel: one per model and design, so replay cells are never drawn beside
    announcement cells (unlike designs, not to be compared by eye); ``design`` None where the rows do not say."""
    if "design" not in curves.columns:
        return [(m, None, curves[curves["model"] == m]) for m in dict.fromkeys(curves["model"])]
    keys = dict.fromkeys(zip(curves["model"], curves["design"], strict=True))
    return [(m, d, curves[(curves["model"] == m) & (curves["design"] == d)]) for m, d in keys]


def _span_row(strip, row: int, span: tuple, colour: str):
    """One peak interval as its own bar in the strip under a panel (a row per curve, named by the row's tick, so
    no two spans share a place), with its Δ_L beside it; the text, kept inside the strip once laid out."""
    b, s, _, _, delta = span
    strip.barh(row, s - b, left=b, height=0.55, color=colour, alpha=0.45, lw=0)
    text = f"Δ={100 * delta:+.1f} pts, {b}→{s}"
    return strip.text(s * 1.06, row, text, color=colour, fontsize=7.5, va="center", ha="left"), (b, s)


def _keep_inside(fig, labels: list) -> None:
    """Move each strip label that runs past its panel's right edge to the left of its bar, and one that fits on
    neither side onto the middle of its bar, shrunk to fit (matplotlib does not place text; done by hand in
    display units)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for text, (b, s) in labels:
        area = text.axes.get_window_extent(renderer)
        if text.get_window_extent(renderer).x1 <= area.x1:
            continue
        text.set_x(b / 1.06)
        text.set_ha("right")
        if text.get_window_extent(renderer).x0 >= area.x0:
            continue
        text.set_x(np.sqrt(b * s))
        text.set_ha("center")
        text.set_color("black")
        while not area.x0 <= text.get_window_extent(renderer).x0 < text.get_window_extent(renderer).x1 <= area.x1:
            if text.get_fontsize() <= 5:
                break
            text.set_fontsize(text.get_fontsize() - 0.5)


def plot_native_curves(
    curves: pd.DataFrame,
    peaks: pd.DataFrame,
    *,
    path: str | os.PathLike[str],
    level: float = 0.95,
    parser: str | None = None,
) -> None:
    """Figure 1: NATIVE accuracy against the output-token budget, one panel per model and design, one line per
    language and setting.

    ``curves``: :func:`mindcap_tok.stats.accuracy_table` rows of the native cells with ``ci_low``/``ci_high``
    (proportions); ``peaks``: :attr:`mindcap_tok.stats.Sweep.peaks`. Each curve's peak interval from B to
    floor(r·B) is marked on the curve (squares and an arrow) and drawn as its own bar, with Δ_L, in a strip under
    the panel. A curve with a cap stops there and the cap is drawn as a dashed line: nothing beyond it was
    decoded. An all-zero curve has no peak drawn. ``parser``: the answer parser, named on the axis.
    """
    plt = pyplot()
    panels = []
    for model, design, part in _panels(curves):
        series = []
        for label, cur, peak in _series(part, peaks[peaks["model"] == model]):
            cur, cap = within_cap(cur)
            series.append((label, cur, cap, _peak_span(cur, peak, cap)))
        panels.append((model, design, series))
    rows = max(sum(s[3] is not None for s in series) for *_, series in panels)
    fig, axes = plt.subplots(
        2 if rows else 1,
        len(panels),
        figsize=(6.2 * len(panels), 4.6 + 0.28 * rows),
        squeeze=False,
        sharex="col",
        gridspec_kw={"height_ratios": [4.0, 0.6 + 0.28 * rows]} if rows else None,
    )
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    labels: list = []
    top = max(5.0, min(105.0, 108 * float(np.nanmax(curves.get("ci_high", curves["accuracy"])))))
    for k, (model, design, series) in enumerate(panels):
        ax = axes[0][k]
        drawn: list[int] = []
        spans = []
        for i, (label, cur, cap, span) in enumerate(series):
            colour = colours[i % len(colours)]
            drawn.extend(cur["budget"].tolist() + ([cap] if cap is not None else []))
            x = cur["budget"].to_numpy()
            zero = "" if (cur["accuracy"] > 0).any() else " (all 0: no peak)"
            ax.plot(x, 100 * cur["accuracy"], "-o", ms=3, color=colour, label=label + zero)
            if "ci_low" in cur:
                ax.fill_between(x, 100 * cur["ci_low"], 100 * cur["ci_high"], color=colour, alpha=0.15, lw=0)
            _cap_line(ax, cap, colour)
            if span is None:
                continue
            b, s, acc_b, acc_s, _ = span
            drawn.append(s)
            spans.append((span, label, colour))
            ax.plot([b, s], [100 * acc_b, 100 * acc_s], "s", ms=7, mfc="white", mec=colour, mew=1.8)
            ax.annotate(
                "",
                xy=(s, 100 * acc_s),
                xytext=(s, 100 * acc_b),
                arrowprops={"arrowstyle": "->", "color": colour, "lw": 1.2},
            )
            ax.plot([b, s], [100 * acc_b, 100 * acc_b], ":", color=colour, lw=1)
        bottom = axes[1][k] if rows else ax
        budget_axis(bottom, np.asarray(drawn))
        ax.set_ylim(0, top)  # accuracy is never negative, even where every value is 0
        ax.set_ylabel(f"NATIVE accuracy (%){_parser_words(parser)}" if k == 0 else "")
        which = f" ({design} cells)" if design is not None else ""
        ax.set_title(f"{model}{which}: NATIVE accuracy vs budget{_parser_words(parser)}", fontsize=10)
        ax.grid(alpha=0.3)
        legend_outside(ax, title="language", title_fontsize=8)
        bottom.set_xlabel("output-token budget B (prefix length, log scale)")
        if rows:
            ax.tick_params(labelbottom=False)
            strip = axes[1][k]
            strip.set_ylim(rows - 0.5, -0.5)
            strip.set_yticks(range(len(spans)), [label for _, label, _ in spans], fontsize=7.5)
            labels += [_span_row(strip, row, span, colour) for row, (span, _, colour) in enumerate(spans)]
            if not spans:
                strip.text(0.5, 0.5, "no peak interval to draw", transform=strip.transAxes, ha="center", fontsize=8)
    caption(
        fig,
        f"Shaded bands: pointwise {level:.0%} item-clustered bootstrap CIs. Squares: each curve's peak "
        "length-normalisation effect, from the matched budget B to the premium-scaled budget floor(r·B); the arrow "
        "is Δ_L(B) = acc(floor(r·B)) − acc(B), and the bar under the panel spans B to floor(r·B). Dashed: a cell's "
        "cap; nothing beyond it was decoded. One panel per design: unlike designs are not compared.",
    )
    _keep_inside(fig, labels)
    save_figure(fig, path)


def plot_gap_curves(
    gaps: pd.DataFrame, path: str | os.PathLike[str], *, level: float = 0.95, parser: str | None = None
) -> None:
    """Figure 2: gap(B) = acc_TRANSLATE-ACT(B) − acc_NATIVE(B) in points, one panel per model.

    ``gaps``: rows with ``model``, ``lang``, ``budget``, ``gap`` and optionally ``gap_ci_low``/``gap_ci_high``
    (proportions), e.g. :attr:`mindcap_tok.stats.Sweep.rows`. A curve with a cap stops there, drawn as a dashed
    line. ``parser``: the answer parser, named on the axis.
    """
    plt = pyplot()
    models = list(dict.fromkeys(gaps["model"]))
    fig, axes = plt.subplots(1, len(models), figsize=(6.2 * len(models), 4.4), squeeze=False, sharey=True)
    for ax, model in zip(axes[0], models, strict=True):
        part = gaps[gaps["model"] == model]
        keys = [*_tasks(part), "lang"]
        drawn: list[int] = []
        for values, cur in part.groupby(keys, sort=False):
            cur, cap = within_cap(cur.sort_values("budget"))
            drawn.extend(cur["budget"].tolist() + ([cap] if cap is not None else []))
            x = cur["budget"].to_numpy()
            (line,) = ax.plot(x, 100 * cur["gap"], "-o", ms=3, label=_curve_name(dict(zip(keys, values, strict=True))))
            if "gap_ci_low" in cur:
                ax.fill_between(
                    x, 100 * cur["gap_ci_low"], 100 * cur["gap_ci_high"], color=line.get_color(), alpha=0.15, lw=0
                )
            _cap_line(ax, cap, line.get_color())
        ax.axhline(0, color="black", lw=0.8)
        budget_axis(ax, np.asarray(drawn))
        ax.set_xlabel("output-token budget B (same cap for both arms, log scale)")
        ax.set_title(f"{model}: gap(B) = TRANSLATE-ACT − NATIVE")
        ax.grid(alpha=0.3)
        legend_outside(ax, title="language", title_fontsize=8)
    # which way is which, on the axis label: a note inside the panel could sit on a curve
    axes[0][0].set_ylabel(f"accuracy gap (points){_parser_words(parser)}\n← NATIVE leads · TRANSLATE-ACT leads →")
    caption(
        fig,
        f"Unnormalised gap at equal output caps; shaded: pointwise {level:.0%} item-clustered bootstrap CIs. "
        + gap_summary(gaps),
    )
    save_figure(fig, path)


def gap_summary(gaps: pd.DataFrame) -> str:
    """Which arm leads where, read from the gap's CIs: a lead only where the CI excludes 0, "no clear difference"
    where it holds 0; without CIs no lead is claimed (the caption of the gap figure says only this)."""
    parts = []
    keys = ["model", *_tasks(gaps), "lang"]
    has_ci = {"gap_ci_low", "gap_ci_high"} <= set(gaps.columns)
    for values, cur in gaps.groupby(keys, sort=False):
        setting = dict(zip(keys, values, strict=True))
        name = _curve_name(setting)
        name = name if gaps["model"].nunique() == 1 else f"{setting['model']} {name}"
        if not has_ci:
            parts.append(f"{name}: no CI computed, so no lead is claimed")
            continue
        cur = cur.sort_values("budget")
        leads = {
            "NATIVE": cur.loc[cur["gap_ci_high"] < 0, "budget"].astype(int).tolist(),
            "TRANSLATE-ACT": cur.loc[cur["gap_ci_low"] > 0, "budget"].astype(int).tolist(),
        }
        said = [
            f"{arm} ahead at every budget"
            if len(budgets) == len(cur)
            else f"{arm} ahead at B = {', '.join(map(str, budgets))}"
            for arm, budgets in leads.items()
            if budgets
        ]
        if said and sum(map(len, leads.values())) < len(cur):
            said.append("no clear difference elsewhere")
        parts.append(f"{name}: " + (", ".join(said) if said else "no clear difference at any budget"))
    return "Estimates (a lead only where the CI excludes 0): " + "; ".join(parts) + "."
