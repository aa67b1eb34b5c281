"""The round-trip figures: pass share per sequence and token cost along each chain (``roundtrip report``), the
leaderboard and its agreement with an outside ranking (``roundtrip compare``).

Each figure names its models and judges in its title, keeps its legend outside the panels, and draws a sentence
saying why where it has nothing to show (an empty axis would read as a pass share of 0).
"""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd

from ..data.languages import short_name
from ..report import figures
from ..report.figures import (
    caption,
    legend_outside,
    mirror_x_axis,
    names,
    nothing_to_show,
    pyplot,
    separate_labels,
    wrapped,
)
from .agreement import MIN_MODELS

#: a leaderboard at least this tall (inches) repeats its x axis at the top
TALL = 6.0


def chain_label(sequence: str) -> str:
    """A sequence as a reader knows it: a preset keeps its name, a chain written out in FLORES codes is shortened
    to its languages' aliases (``eng_Latn>tha_Thai>eng_Latn`` -> ``en>th>en``)."""
    return ">".join(short_name(code) for code in sequence.split(">")) if ">" in sequence else sequence


def plot_pass_share(metrics: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Bars of pass share (MQM ≥ 80) per sequence, ±1 bootstrap SE, one colour per model (per model and judge
    with several judges); a bar with no judged sample says "not judged"."""
    plt = pyplot()
    rows = metrics[metrics["by"] == "sequence"]
    seqs = list(dict.fromkeys(rows["group"]))
    models, judges = list(dict.fromkeys(rows["model"])), list(dict.fromkeys(rows["judge_model"]))
    bars = list(rows.groupby(["model", "judge_model"], sort=False))
    width_in = max(5.0, max(1.0, 0.22 * len(bars)) * len(seqs) + 1.5)
    fig, ax = plt.subplots(figsize=(width_in, 3.8))
    title = f"Round trip of {names(models)}, judged by {names(judges)}: pass share per sequence"
    if rows["pass_share"].astype(float).isna().all():
        nothing_to_show(
            ax, "no sample was judged (every judge reply was missing or could not be parsed; see report.md)"
        )
        ax.set_title(wrapped(title, width_in))
        figures.save_figure(fig, path)
        return
    width = 0.8 / len(bars)
    for k, ((model, judge), sub) in enumerate(bars):
        sub = sub.set_index("group").reindex(seqs)
        x = np.arange(len(seqs)) + (k - (len(bars) - 1) / 2) * width
        share = sub["pass_share"].astype(float).to_numpy()
        se = np.where(np.isnan(share), np.nan, sub["pass_share_se"].astype(float).fillna(0).to_numpy())
        label = f"{model} / judge {judge}" if len(judges) > 1 else model
        ax.bar(x, np.nan_to_num(share), width, yerr=se, capsize=2, label=label)
        # a share of 0 has no bar to see: it is named "0", and an unjudged bar says "not judged"
        for xi in x[np.isnan(share)]:
            ax.text(xi, 0.02, "not judged", rotation=90, ha="center", va="bottom", fontsize=7, color="grey")
        for xi, s in zip(x[share == 0], se[share == 0], strict=True):
            ax.text(xi, s + 0.02, "0", ha="center", va="bottom", fontsize=8, fontweight="bold")
    ax.set_xticks(range(len(seqs)), [chain_label(s) for s in seqs], rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("pass share (MQM ≥ 80)")
    ax.set_title(wrapped(f"{title} (±1 bootstrap SE over texts)", width_in))
    if len(bars) > 1:
        legend_outside(ax)
    fig.tight_layout()
    figures.save_figure(fig, path)


def _no_answer(part: pd.DataFrame) -> pd.Series:
    """The hops whose ratio is 0 because no thought closed (the answer channel is empty): a note, not a point."""
    if "unclosed_share" not in part:
        return pd.Series(False, index=part.index)
    return (part["token_ratio"].astype(float) == 0) & (part["unclosed_share"].astype(float) > 0)


def _capped(part: pd.DataFrame) -> pd.Series:
    """The hops where at least one text hit its cap (their ratio is a lower bound)."""
    if "cap_hit_share" not in part:
        return pd.Series(False, index=part.index)
    return part["cap_hit_share"].astype(float) > 0


def _cost_panel(ax, seq: str, part: pd.DataFrame, colours: dict[str, str]) -> None:
    """One chain's token ratios hop by hop, a line per model, FLORES premiums as hollow circles, hops where a text
    hit its cap crossed (their ratio is a lower bound); a hop whose thought never closed is named on its tick
    rather than drawn at 0. The x ticks name each hop's target language."""
    langs = dict(zip(part["hop"].astype(int), part["tgt_lang"], strict=True))
    ax.set_title(chain_label(seq), fontsize=9)
    if part["token_ratio"].astype(float).isna().all():
        nothing_to_show(ax, "no hop output of this chain was counted (no tokenizer for its models)", width=30)
        return
    unclosed = set(part.loc[_no_answer(part), "hop"].astype(int))
    for model, g in part.groupby("model", sort=False):
        g = g.sort_values("hop")
        ratio = g["token_ratio"].astype(float).mask(_no_answer(g))
        ax.plot(g["hop"], ratio, "o-", ms=4, color=colours[model], label=model)
        capped = _capped(g) & ~_no_answer(g)
        if capped.any():
            ax.plot(g["hop"][capped], ratio[capped], "X", ms=9, mfc=colours[model], mec="black", mew=0.8)
        premium = g["flores_premium"].astype(float)
        if premium.notna().any():
            ax.plot(g["hop"], premium, "o", mfc="none", color=colours[model], ms=8)
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ticks = [f"{h}\n{short_name(lang)}" + ("\nno answer" if h in unclosed else "") for h, lang in langs.items()]
    ax.set_xticks(list(langs), ticks, fontsize=8)
    ax.set_xlim(min(langs) - 0.4, max(langs) + 0.4)
    ax.grid(alpha=0.3)


def _cost_caption(hop_tokens: pd.DataFrame) -> str:
    """What the token-cost panels draw, and the costliest hop where one hop alone has the largest ratio (to the
    two decimals printed; tied hops are not ranked), read from the table."""
    ratio = hop_tokens["token_ratio"].astype(float)
    hollow = (
        "hollow: the FLORES premium of the hop's language with the same tokenizer"
        if hop_tokens["flores_premium"].notna().any()
        else "FLORES premiums not computed (see report.md)"
    )
    words = f"Filled: output tokens / source tokens of each hop (ratio of totals over texts); {hollow}; dashed: parity."
    silent = _no_answer(hop_tokens)
    capped = _capped(hop_tokens) & ~silent
    if capped.any():
        words += f" Crossed: {int(capped.sum())} hop(s) where a text hit its cap; their ratio is a lower bound."
    if silent.any():
        words += f" 'no answer': {int(silent.sum())} hop(s) whose thought never closed, so no answer to count."
    rounded = ratio.round(2)
    top = rounded[~silent].max()
    tied = hop_tokens[(rounded == top) & ~silent]
    if len(tied) > 1:
        return words + f" Largest ratio {top:.2f}×, shared by {len(tied)} hops: no single costliest hop."
    row = tied.iloc[0]
    bound = " (it hit its cap: at least)" if capped[tied.index[0]] else ""
    return words + (
        f" Costliest hop: {row['model']} into {short_name(row['tgt_lang'])} (hop {int(row['hop'])} of "
        f"{chain_label(row['sequence'])}), {float(row['token_ratio']):.2f}× the source tokens{bound}."
    )


def plot_token_cost(hop_tokens: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Output / source tokens at each hop, one panel per sequence, one line per model, FLORES premiums as hollow
    markers; ``hop_tokens`` is :func:`~.report.hop_token_table` with at least one counted ratio."""
    plt = pyplot()
    seqs = list(dict.fromkeys(hop_tokens["sequence"]))
    models = list(dict.fromkeys(hop_tokens["model"]))
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colours = {m: cycle[i % len(cycle)] for i, m in enumerate(models)}
    ncols = min(3, len(seqs))
    nrows = math.ceil(len(seqs) / ncols)
    width_in = 3.4 * ncols + 2.2
    fig, axes = plt.subplots(nrows, ncols, figsize=(width_in, 2.6 * nrows + 1.6), squeeze=False, sharey=True)
    for ax, seq in zip(axes.flat, seqs, strict=False):
        _cost_panel(ax, seq, hop_tokens[hop_tokens["sequence"] == seq], colours)
    for ax in axes.flat[len(seqs) :]:
        fig.delaxes(ax)
    for ax in axes[:, 0]:
        ax.set_ylabel("output / source tokens")
    for ax in axes.flat[max(0, len(seqs) - ncols) : len(seqs)]:
        ax.set_xlabel("hop and its language")
    handles = [plt.Line2D([], [], marker="o", color=colours[m], label=m) for m in models] if len(models) > 1 else []
    if (_capped(hop_tokens) & ~_no_answer(hop_tokens)).any():
        handles.append(plt.Line2D([], [], ls="", marker="X", ms=9, mfc="grey", mec="black", label="hit cap"))
    if handles:
        axes[0][ncols - 1].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=8)
    fig.suptitle(wrapped(f"Token cost along each chain: {names(models)}", width_in))
    caption(fig, wrapped(_cost_caption(hop_tokens), width_in, fontsize=8))
    figures.save_figure(fig, path)


def plot_leaderboard(board: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Pass share ±1 bootstrap SE per model, a row per model in the first judge's rank order (best on top), one
    marker series per judge; tall enough for every model, with the x axis repeated at the top when tall."""
    plt = pyplot()
    order = list(dict.fromkeys(board["model"]))
    judges = list(dict.fromkeys(board["judge_model"]))
    height = max(2.8, 0.3 * len(order) * max(1.0, 0.5 * len(judges)) + 1.8)
    width_in = 7.0 + (2.0 if len(judges) > 1 else 0.0)  # room for the legend beside the panel
    fig, ax = plt.subplots(figsize=(width_in, height))
    title = f"Round-trip leaderboard of {len(order)} models, judged by {names(judges)}"
    if board["pass_share"].astype(float).isna().all():
        nothing_to_show(ax, "no sample of any model was judged (see compare.md)")
        ax.set_title(wrapped(title, width_in))
        figures.save_figure(fig, path)
        return
    step = min(0.25, 0.8 / len(judges))
    for k, (judge, g) in enumerate(board.groupby("judge_model", sort=False)):
        g = g.set_index("model").reindex(order)
        y = np.arange(len(order)) + (k - (len(judges) - 1) / 2) * step
        share = g["pass_share"].astype(float).to_numpy()
        se = g["pass_share_se"].astype(float).fillna(0).to_numpy()
        ax.errorbar(share, y, xerr=se, fmt="o", ms=4, capsize=3, label=f"judge {judge}")
        for yi in y[np.isnan(share)]:
            ax.text(0.01, yi, f"not judged by {judge}", va="center", fontsize=7)
    ax.set_yticks(range(len(order)), order, fontsize=8)
    ax.set_ylim(len(order) - 0.5, -0.5)  # rank 1 at the top
    ax.set_xlim(0, 1.05)
    ax.set_xlabel("pass share (MQM ≥ 80)")
    ax.grid(axis="x", alpha=0.3)
    if height >= TALL:
        mirror_x_axis(ax)
    rank_by = f" (order: ranks by judge {judges[0]})" if len(judges) > 1 else ""
    ax.set_title(wrapped(f"{title}{rank_by}; ±1 bootstrap SE over texts", width_in))
    if len(judges) > 1:
        legend_outside(ax)
    fig.tight_layout()
    figures.save_figure(fig, path)


def _reference_panel(ax, judge: str, both: pd.DataFrame, agreement) -> list:
    """One judge's pass shares against the outside score, each point named; the point labels, to be separated
    once the figure is laid out."""
    import matplotlib.transforms as mtransforms

    if agreement is None:
        nothing_to_show(
            ax,
            f"only {len(both)} model(s) judged by {judge} are in the reference ranking, and a rank agreement "
            f"needs at least {MIN_MODELS}",
            width=40,
        )
        return []
    x, y = both["score"].astype(float), both["pass_share"].astype(float)
    ax.plot(x, y, "o", ms=5)
    mid = (x.min() + x.max()) / 2
    labels = []
    for model, xi, yi in zip(both["model"], x, y, strict=True):
        right = xi <= mid  # names sit towards the middle of the panel, never past its edge
        shift = mtransforms.ScaledTranslation((4 if right else -4) / 72, 0, ax.figure.dpi_scale_trans)
        labels.append(
            ax.text(
                xi, yi, model, fontsize=7, va="center", ha="left" if right else "right", transform=ax.transData + shift
            )
        )
    pad = 0.1 * (x.max() - x.min() or 1.0)
    ax.set_xlim(x.min() - pad, x.max() + pad)
    ax.set_ylim(max(0.0, y.min() - 0.1), min(1.05, y.max() + 0.1))
    ax.set_title(
        f"judge {judge}: ρ = {agreement.rho:.2f}, one-sided p = {agreement.p_one_sided:.3g} "
        f"({agreement.n_models} models)",
        fontsize=9,
    )
    ax.set_xlabel("reference score")
    ax.set_ylabel("pass share (MQM ≥ 80)")
    ax.grid(alpha=0.3)
    return labels


def plot_reference(board: pd.DataFrame, ref: pd.DataFrame, against: pd.DataFrame, path) -> None:
    """Benchmark pass share against the outside score, a panel per judge with its Spearman ρ; a judge with too
    few models in both says so."""
    plt = pyplot()
    judges = list(dict.fromkeys(board["judge_model"]))
    rows = {r.judge_model: r for r in against.itertuples()} if len(against) else {}
    ncols = min(2, len(judges))
    nrows = math.ceil(len(judges) / ncols)
    width_in = 5.2 * ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(width_in, 3.8 * nrows + 0.6), squeeze=False)
    labels = []
    for ax, judge in zip(axes.flat, judges, strict=False):
        both = board[board["judge_model"] == judge].merge(ref, on="model").dropna(subset=["pass_share"])
        labels.append(_reference_panel(ax, judge, both, rows.get(judge)))
    for ax in axes.flat[len(judges) :]:
        fig.delaxes(ax)
    models = list(dict.fromkeys(board["model"]))
    fig.suptitle(wrapped(f"Round-trip pass share of {names(models)} against the reference ranking", width_in))
    fig.tight_layout()
    for panel in labels:
        separate_labels(fig, panel)
    figures.save_figure(fig, path)
