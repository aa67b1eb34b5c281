"""Figures shared by several subcommands."""

from __future__ import annotations

import io
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


def plot_premiums(rows: Sequence[dict], path: str | os.PathLike[str]) -> None:
    """Dot plot of premiums with CIs, one row per language sorted by premium, one colour per model.

    ``rows`` are :meth:`mindcap_tok.premium.Premium.as_dict` dicts. Tall enough for all 204 languages; a tall
    figure repeats the x ticks and label at the top, so a reader at either end can read a premium off.
    """
    plt = pyplot()
    models = list(dict.fromkeys(r["model"] for r in rows))
    langs: dict[str, float] = {}
    for r in rows:  # sort by each language's largest premium across models
        langs[r["lang"]] = max(langs.get(r["lang"], 0.0), r["premium"])
    order = sorted(langs, key=lambda lang: langs[lang])
    ypos = {lang: i for i, lang in enumerate(order)}
    height = max(3.0, 0.16 * len(order) + 1.2)
    fig, ax = plt.subplots(figsize=(7.5, height))
    offsets = {m: (k - (len(models) - 1) / 2) * 0.18 for k, m in enumerate(models)}
    for model in models:
        sel = [r for r in rows if r["model"] == model]
        y = [ypos[r["lang"]] + offsets[model] for r in sel]
        x = [r["premium"] for r in sel]
        err = [[r["premium"] - r["ci_low"] for r in sel], [r["ci_high"] - r["premium"] for r in sel]]
        ax.errorbar(x, y, xerr=err, fmt="o", ms=3, capsize=2, lw=0.8, label=model)
    ax.axvline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_yticks(range(len(order)), order, fontsize=7 if len(order) > 40 else 9)
    ax.set_ylim(-0.8, len(order) - 0.2)
    first = rows[0]
    ax.set_xlabel(
        f"token premium r = tokens(L) / tokens({first['ref']})  "
        f"(FLORES-200 {first['split']}, {first['ci'] * 100:.0f}% CI)"
    )
    if height > 8:  # the same axis again at the top (an identity secondary axis)
        mirror_x_axis(ax)
    ax.set_title(f"Token premium per language: {', '.join(models)}")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
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
