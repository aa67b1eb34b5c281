"""Figures shared by several subcommands."""

from __future__ import annotations

import io
import math
import os
import textwrap
from collections.abc import Sequence
from typing import Any

from .._io import atomic_write_bytes, check_output_file


def pyplot():
    """matplotlib's pyplot on the Agg backend (files only, no display), imported on first use: the CLI's start
    stays cheap."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: str | os.PathLike[str], *, dpi: int = 150) -> None:
    """Save a matplotlib figure atomically (PNG/SVG/PDF by suffix) and close it; never inside a ledger."""
    import matplotlib.pyplot as plt

    check_output_file(path)
    buf = io.BytesIO()
    suffix = str(path).rsplit(".", 1)[-1].lower() if "." in str(path) else "png"
    fig.savefig(buf, format=suffix, dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())


def nothing_to_show(ax, reason: str, *, width: int = 60) -> None:
    """Turn an empty panel into a sentence saying why it is empty: an empty axis reads as data of zero."""
    ax.set_axis_off()
    text = textwrap.fill(f"nothing to show, because {reason}", width)
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=9)


def wrapped(text: str, width_in: float, *, fontsize: float = 10) -> str:
    """``text`` broken into lines of about ``width_in`` inches at ``fontsize`` points (a title naming many models
    stays within its figure)."""
    return textwrap.fill(text, max(30, int(width_in * 72 / (0.55 * fontsize))))


def names(values: Sequence[str], *, most: int = 4) -> str:
    """The names in a title: all of them up to ``most``, else the first ones and how many more."""
    values = list(dict.fromkeys(values))
    if len(values) <= most:
        return ", ".join(values)
    return f"{', '.join(values[: most - 1])} and {len(values) - most + 1} more"


def mirror_x_axis(ax) -> None:
    """Repeat the x ticks and label at the top of a tall panel, so a reader at either end can read a value off."""
    ax.secondary_xaxis("top").set_xlabel(ax.get_xlabel())


def legend_outside(ax, **kwargs) -> None:
    """The legend to the right of ``ax``, outside it, so it hides no data point."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, **kwargs)


def caption(fig, text: str) -> None:
    """A caption under the panels, with room made for it: the panels (and their x labels) end above it."""
    note = fig.text(0.01, 0.005, text, fontsize=8, ha="left", va="bottom", wrap=True)
    fig.tight_layout()
    fig.canvas.draw()
    height = note.get_window_extent(fig.canvas.get_renderer()).height / fig.bbox.height
    fig.tight_layout(rect=(0, height + 0.01, 1, 1))


def separate_labels(fig, labels: Sequence) -> None:
    """Move point labels apart vertically until no two overlap (matplotlib places text where it is told and has
    no placement of its own; the few labels of a panel are nudged by hand, in display units)."""
    if len(labels) < 2:
        return
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    placed: list[Any] = []  # matplotlib Bbox of each label already placed
    for label in sorted(labels, key=lambda t: t.get_position()[1], reverse=True):
        box = label.get_window_extent(renderer)
        to_data = label.get_transform().inverted()
        while any(box.overlaps(other) for other in placed):
            lowest = min(other.y0 for other in placed if box.overlaps(other))
            shift = box.y1 - lowest + 2  # below the label it hits, 2 px apart
            x, y = label.get_position()
            cx, cy = label.get_transform().transform((x, y))
            label.set_position(tuple(to_data.transform((cx, cy - shift))))
            box = label.get_window_extent(renderer)
        placed.append(box)


#: languages per column of the premium plot before it wraps into several columns
ROWS_PER_COLUMN = 60


def plot_premiums(
    rows: Sequence[dict],
    path: str | os.PathLike[str],
    *,
    paper: Sequence[str] = (),
    marked: Sequence[str] = (),
) -> None:
    """Dot plot of premiums with CIs, one row per language sorted by premium, one colour per model, and beside each
    premium panel the byte-fallback share of the language's tokens (when the rows carry it).

    ``rows`` are :meth:`mindcap_tok.premium.Premium.as_dict` dicts. More than :data:`ROWS_PER_COLUMN` languages
    wrap into columns of equal length (203 languages: 4), read top to bottom from the lowest premium; a tall figure
    repeats the x ticks and label at the top, so a reader at either end can read a premium off. Languages in
    ``paper`` are set in bold, those in ``marked`` in red (both named in the caption).
    """
    plt = pyplot()
    models = list(dict.fromkeys(r["model"] for r in rows))
    langs: dict[str, float] = {}
    for r in rows:  # sort by each language's largest premium across models
        langs[r["lang"]] = max(langs.get(r["lang"], 0.0), r["premium"])
    order = sorted(langs, key=lambda lang: langs[lang])
    n_cols = math.ceil(len(order) / ROWS_PER_COLUMN)
    per_col = math.ceil(len(order) / n_cols)
    shares = any(r.get("byte_fallback_share") is not None for r in rows)
    height = max(3.0, 0.16 * per_col + 1.6)
    widths = [3.0, 1.3] * n_cols if shares else [3.6] * n_cols
    fig, axes = plt.subplots(
        1, len(widths), figsize=(sum(widths) + 1.6, height), gridspec_kw={"width_ratios": widths}, squeeze=False
    )
    step = 2 if shares else 1
    premium_axes = list(axes[0][::step])
    share_axes = list(axes[0][1::2]) if shares else []
    offsets = {m: (k - (len(models) - 1) / 2) * 0.18 for k, m in enumerate(models)}
    colours = {m: f"C{k}" for k, m in enumerate(models)}
    for c, ax in enumerate(premium_axes):
        chunk = order[c * per_col : (c + 1) * per_col]
        ypos = {lang: i for i, lang in enumerate(chunk)}
        sel_all = [r for r in rows if r["lang"] in ypos]
        for model in models:
            sel = [r for r in sel_all if r["model"] == model]
            y = [ypos[r["lang"]] + offsets[model] for r in sel]
            x = [r["premium"] for r in sel]
            err = [[r["premium"] - r["ci_low"] for r in sel], [r["ci_high"] - r["premium"] for r in sel]]
            ax.errorbar(x, y, xerr=err, fmt="o", ms=3, capsize=2, lw=0.8, color=colours[model], label=model)
            if shares:
                share_axes[c].plot(
                    [r.get("byte_fallback_share") or 0.0 for r in sel], y, "o", ms=3, color=colours[model]
                )
        ax.axvline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_yticks(range(len(chunk)), chunk, fontsize=7 if len(chunk) > 40 else 9)
        for label, lang in zip(ax.get_yticklabels(), chunk, strict=True):
            if lang in paper:
                label.set_fontweight("bold")
            if lang in marked:
                label.set_color("red")
        ax.set_ylim(per_col - 0.2, -0.8)  # lowest premium at the top, read down and on to the next column
        ax.set_xlabel("premium r")
        ax.grid(axis="x", alpha=0.3)
        if height > 8:  # the same axis again at the top (an identity secondary axis)
            mirror_x_axis(ax)
    for ax, other in zip(share_axes, premium_axes, strict=False):  # no share axes: rows without the shares
        ax.set_ylim(other.get_ylim())
        ax.set_yticks(other.get_yticks(), [])
        ax.set_xlim(-0.05, 1.05)
        ax.set_xlabel("byte-fallback share")
        ax.grid(axis="x", alpha=0.3)
        if height > 8:
            mirror_x_axis(ax)
    xmax = max(ax.get_xlim()[1] for ax in premium_axes)
    for ax in premium_axes:
        ax.set_xlim(0, xmax)
    first = rows[0]
    fig.suptitle(f"Token premium per language: {', '.join(models)}")
    handles, labels = premium_axes[-1].get_legend_handles_labels()
    legend_outside(axes[0][-1], handles=handles, labels=labels)
    notes = [
        f"Premium r = tokens(L) / tokens({first['ref']}), FLORES-200 {first['split']}, {first['ci'] * 100:.0f}% CI"
        + ("; byte-fallback share: the language's tokens that are not whole characters." if shares else ".")
    ]
    if paper:
        notes.append("Bold: the paper's languages.")
    if marked:
        notes.append(f"Red: {names(marked, most=6)}.")
    caption(fig, " ".join(notes))
    save_figure(fig, path)


def plot_bpb(result: dict, path: str | os.PathLike[str]) -> None:
    """Bits per byte with CIs, one panel per language, one row per model (``measure_bpb``'s result)."""
    plt = pyplot()
    rows = result["rows"]
    langs = list(dict.fromkeys(r["lang"] for r in rows))
    fig, axes = plt.subplots(1, len(langs), figsize=(4.2 * len(langs), 0.5 * len(rows) / len(langs) + 1.6))
    for ax, lang in zip([axes] if len(langs) == 1 else axes, langs, strict=True):
        sel = [r for r in rows if r["lang"] == lang]
        labels = [f"{r['model']} ({r['init']})" for r in sel]
        x = [r["bpb"] for r in sel]
        has_ci = all(r["bpb_ci"] is not None for r in sel)
        err = [[r["bpb"] - r["bpb_ci"][0] for r in sel], [r["bpb_ci"][1] - r["bpb"] for r in sel]] if has_ci else None
        ax.errorbar(x, range(len(sel)), xerr=err, fmt="o", ms=4, capsize=3)
        ax.set_yticks(range(len(sel)), labels, fontsize=8)
        ax.set_ylim(-0.6, len(sel) - 0.4)
        ax.invert_yaxis()
        ax.set_title(f"{lang} ({sel[0]['sentences']} held-out sentences)", fontsize=9)
        ax.set_xlabel("bits per byte" + (f" ({result['level'] * 100:.0f}% CI)" if has_ci else ""))
        ax.grid(axis="x", alpha=0.3)
    caption(fig, f"held-out lines of fold {result['fold']} of {result['corpus']}; adapted models' new rows untrained")
    save_figure(fig, path)
