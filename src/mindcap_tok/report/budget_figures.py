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
from .figures import caption, legend_outside, pyplot, save_figure, separate_labels


def budget_axis(ax, budgets: np.ndarray) -> None:
    """Make ``ax``'s x axis a log2 budget axis labelled over the whole range of ``budgets`` drawn (the scaled
    budgets floor(r·B) run past the grid), as the budget figures draw it."""
    ax.set_xscale("log", base=2)
    values = sorted({int(b) for b in budgets if b > 0})
    low, high = values[0], values[-1]
    powers = [1 << k for k in range(low.bit_length() - 1, high.bit_length()) if low <= (1 << k) <= high]
    ticks = values if len(values) <= 12 or not powers else powers
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


def plot_native_curves(
    curves: pd.DataFrame,
    peaks: pd.DataFrame,
    *,
    path: str | os.PathLike[str],
    level: float = 0.95,
    parser: str | None = None,
) -> None:
    """Figure 1: NATIVE accuracy against the output-token budget, one panel per model, one line per language.

    ``curves``: :func:`mindcap_tok.stats.accuracy_table` rows of the native cells with ``ci_low``/``ci_high``
    (proportions); ``peaks``: :attr:`mindcap_tok.stats.Sweep.peaks`. Each language's peak interval from B to
    floor(r·B) is shaded, and its two accuracy endpoints are marked and labelled with Δ_L. A curve with a cap
    stops there and the cap is drawn as a dashed line: nothing beyond it was decoded. ``parser``: the answer
    parser the accuracies were read with, named on the axis.
    """
    plt = pyplot()
    models = list(dict.fromkeys(curves["model"]))
    fig, axes = plt.subplots(1, len(models), figsize=(6.2 * len(models), 4.6), squeeze=False, sharey=True)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    labels = []
    for ax, model in zip(axes[0], models, strict=True):
        part = curves[curves["model"] == model]
        panel_labels: list = []
        drawn: list[int] = []
        for i, (label, cur, peak) in enumerate(_series(part, peaks[peaks["model"] == model])):
            colour = colours[i % len(colours)]
            cur, cap = within_cap(cur)
            drawn.extend(cur["budget"].tolist() + ([cap] if cap is not None else []))
            x = cur["budget"].to_numpy()
            ax.plot(x, 100 * cur["accuracy"], "-o", ms=3, color=colour, label=label)
            if "ci_low" in cur:
                ax.fill_between(x, 100 * cur["ci_low"], 100 * cur["ci_high"], color=colour, alpha=0.15, lw=0)
            _cap_line(ax, cap, colour)
            if peak.empty:
                continue
            pk = peak.iloc[0]
            b, s = int(pk["peak_budget"]), int(pk["scaled_budget"])
            if cap is not None and s > cap:  # an exact value beyond the cap: not drawn as if measured there
                continue
            acc_b = float(cur.loc[cur["budget"] == b, "accuracy"].iloc[0])
            acc_s = float(cur.loc[cur["budget"] == s, "accuracy"].iloc[0])
            ax.axvspan(b, s, color=colour, alpha=0.08, lw=0)
            ax.plot([b, s], [100 * acc_b, 100 * acc_s], "s", ms=7, mfc="white", mec=colour, mew=1.8)
            ax.annotate(
                "",
                xy=(s, 100 * acc_s),
                xytext=(s, 100 * acc_b),
                arrowprops={"arrowstyle": "->", "color": colour, "lw": 1.2},
            )
            ax.plot([b, s], [100 * acc_b, 100 * acc_b], ":", color=colour, lw=1)
            panel_labels.append(
                ax.text(
                    s * 1.04,
                    100 * (acc_b + acc_s) / 2,
                    f"Δ={100 * pk['delta']:+.1f} pts\nB={b}→{s}",
                    color=colour,
                    fontsize=8,
                    va="center",
                )
            )
        labels.append(panel_labels)
        budget_axis(ax, np.asarray(drawn))
        ax.set_xlabel("output-token budget B (prefix length, log scale)")
        ax.set_title(f"{model}: NATIVE accuracy vs budget{_parser_words(parser)}")
        ax.grid(alpha=0.3)
        legend_outside(ax, title="language", title_fontsize=8)
    axes[0][0].set_ylabel(f"NATIVE accuracy (%){_parser_words(parser)}")
    caption(
        fig,
        f"Shaded bands: pointwise {level:.0%} item-clustered bootstrap CIs. Squares: each language's peak "
        "length-normalisation effect, from the matched budget B to the premium-scaled budget floor(r·B), a span "
        "tinted in the language's colour; the arrow is Δ_L(B) = acc(floor(r·B)) − acc(B). Dashed: a cell's cap; "
        "nothing beyond it was decoded.",
    )
    for panel_labels in labels:
        separate_labels(fig, panel_labels)
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
        lim = ax.get_ylim()
        ax.text(0.99, 0.98, "TRANSLATE-ACT leads ↑", transform=ax.transAxes, ha="right", va="top", fontsize=8)
        if lim[0] < 0:
            ax.text(0.99, 0.02, "NATIVE leads ↓", transform=ax.transAxes, ha="right", va="bottom", fontsize=8)
        budget_axis(ax, np.asarray(drawn))
        ax.set_xlabel("output-token budget B (same cap for both arms, log scale)")
        ax.set_title(f"{model}: gap(B) = TRANSLATE-ACT − NATIVE")
        ax.grid(alpha=0.3)
        legend_outside(ax, title="language", title_fontsize=8)
    axes[0][0].set_ylabel(f"accuracy gap (points){_parser_words(parser)}")
    caption(
        fig,
        f"Unnormalised gap at equal output caps; shaded: pointwise {level:.0%} item-clustered bootstrap CIs. "
        + gap_summary(gaps),
    )
    save_figure(fig, path)


def gap_summary(gaps: pd.DataFrame) -> str:
    """Which arm leads where, read from the gap estimates (the caption of the gap figure says only this)."""
    parts = []
    keys = ["model", *_tasks(gaps), "lang"]
    for values, cur in gaps.groupby(keys, sort=False):
        setting = dict(zip(keys, values, strict=True))
        cur = cur.sort_values("budget")
        native = cur.loc[cur["gap"] < 0, "budget"].astype(int).tolist()
        name = _curve_name(setting)
        name = name if gaps["model"].nunique() == 1 else f"{setting['model']} {name}"
        if not native:
            parts.append(f"{name}: TRANSLATE-ACT ahead or level at every budget")
        elif len(native) == len(cur):
            parts.append(f"{name}: NATIVE ahead at every budget")
        else:
            parts.append(f"{name}: NATIVE ahead at B = {', '.join(map(str, native))}")
    return "Estimates: " + "; ".join(parts) + "."
