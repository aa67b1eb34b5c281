"""Figures shared by several subcommands."""

from __future__ import annotations

import io
import os
from collections.abc import Sequence

from .._io import atomic_write_bytes, check_output_file


def save_figure(fig, path: str | os.PathLike[str], *, dpi: int = 150) -> None:
    """Save a matplotlib figure atomically (PNG/SVG/PDF by suffix) and close it; never inside a ledger."""
    import matplotlib.pyplot as plt

    check_output_file(path)
    buf = io.BytesIO()
    suffix = str(path).rsplit(".", 1)[-1].lower() if "." in str(path) else "png"
    fig.savefig(buf, format=suffix, dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())


def plot_premiums(rows: Sequence[dict], path: str | os.PathLike[str]) -> None:
    """Dot plot of premiums with CIs, one row per language sorted by premium, one colour per model.

    ``rows`` are :meth:`mindcap_tok.premium.Premium.as_dict` dicts. Tall enough for all 204 languages; a tall
    figure repeats the x ticks and label at the top, so a reader at either end can read a premium off.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(r["model"] for r in rows))
    langs: dict[str, float] = {}
    for r in rows:  # sort by each language's largest premium across models
        langs[r["lang"]] = max(langs.get(r["lang"], 0.0), r["premium"])
    order = sorted(langs, key=langs.get)
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
        ax.secondary_xaxis("top").set_xlabel(ax.get_xlabel())
    ax.set_title(f"Token premium per language: {', '.join(models)}")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    save_figure(fig, path)
