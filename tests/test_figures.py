"""Figures a reader can trust: rendered from the demo ledger, no two texts overprint, legends hide no
data point, captions follow the data, and the tall premium plot has ticks at top and bottom and names the model.

Text extents come from matplotlib's own renderer (``get_window_extent`` after ``fig.canvas.draw()``).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest
from matplotlib.text import Text

from figure_checks import covered_points, overlapping_spans, overprinted, text_over_data
from mindcap_tok import Resampling, write_budget_report
from mindcap_tok.demo.ledger import build_demo
from mindcap_tok.report import budget_figures


@pytest.fixture(scope="module")
def report_figures(tmp_path_factory, config):
    """The report's figures from a small demo ledger, caught before they are saved (and closed), and the report
    folder."""
    from mindcap_tok.stats.inputs import load_scored_ledger, sweep_budgets

    root = tmp_path_factory.mktemp("figs")
    demo = build_demo(
        root / "demo",
        seed=0,
        n_items=60,
        k=4,
        data_dir=config.data_dir.value,
        tokenizers_dir=config.tokenizers_dir.value,
    )
    grid = [64, 128, 192, 256, 384, 512, 768, 1024, 2048]
    scored = load_scored_ledger(
        demo.ledger,
        sweep_budgets(grid),
        tokenizers_dir=config.tokenizers_dir.value,
        data_dir=config.data_dir.value,
        premium_specs=["qwen3-8b"],
    )
    caught = {}
    original = budget_figures.save_figure

    def catch(fig, path, **kw):
        caught[str(path).rsplit("/", 1)[-1]] = fig
        fig.savefig(path)

    budget_figures.save_figure = catch
    try:
        write_budget_report(
            scored.scores, scored.premiums, out_dir=root / "report", budgets=grid, resampling=Resampling(200, 0)
        )
    finally:
        budget_figures.save_figure = original
    return caught, root / "report"


def test_report_figures_have_no_overprinted_text(report_figures):
    caught, _ = report_figures
    assert {"native_curves.png", "gap_curves.png"} <= set(caught)
    for name, fig in caught.items():
        assert overprinted(fig) == [], name
        assert text_over_data(fig) == [], name
        assert overlapping_spans(fig) == [], name


def test_report_legends_hide_no_data_point(report_figures):
    caught, _ = report_figures
    for name, fig in caught.items():
        assert covered_points(fig) == [], name


def test_the_overlap_check_finds_overprinted_text():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.text(0.5, 0.5, "Δ=+10.0 pts")
    ax.text(0.51, 0.5, "Δ=+12.0 pts")
    ax.plot([0.03, 0.9], [0.97, 0.1], "o", label="de")  # the first point sits under an upper-left legend
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend(loc="upper left")
    assert overprinted(fig) == [("Δ=+10.0 pts", "Δ=+12.0 pts")]
    assert [p[0] for p in covered_points(fig)] == ["de"]
    plt.close(fig)


def test_the_gap_caption_names_the_task_where_two_share_a_language():
    import pandas as pd

    from mindcap_tok.report.budget_figures import gap_summary

    # (task, budget, gap, CI): mgsm's first CI excludes 0 below it, plain2's CIs all exclude 0 above it
    rows = [("mgsm", 64, -0.02, -0.04, -0.01), ("mgsm", 128, 0.05, -0.01, 0.1)]
    rows += [("plain2", 64, 0.1, 0.05, 0.15), ("plain2", 128, 0.2, 0.1, 0.3)]
    gaps = pd.DataFrame(
        [
            {"model": "m", "task": t, "lang": "deu_Latn", "budget": b, "gap": g, "gap_ci_low": lo, "gap_ci_high": hi}
            for t, b, g, lo, hi in rows
        ]
    )
    head = "Estimates (a lead only where the CI excludes 0): "
    assert gap_summary(gaps) == (
        head + "de (mgsm): NATIVE ahead at B = 64, no clear difference elsewhere; "
        "de (plain2): TRANSLATE-ACT ahead at every budget."
    )
    assert gap_summary(gaps[gaps["task"] == "mgsm"]) == (  # one task: the language alone
        head + "de: NATIVE ahead at B = 64, no clear difference elsewhere."
    )


def test_report_md_tables_keep_every_column_that_tells_cells_apart(report_figures):
    """The demo's three Thai cells (replay; announced 256 and 1024) read as three in the Peaks and Sweep tables,
    the announced budget as a whole number; the settings all rows share are said once."""
    _, out = report_figures
    text = (out / "report.md").read_text("utf-8")
    peaks = text.split("## Peaks")[1].split("## Sweep")[0]
    sweep = text.split("## Sweep")[1].split("## Binding regime")[0]
    for table in (peaks, sweep):
        header = next(line for line in table.splitlines() if line.startswith("| model"))
        assert [c.strip() for c in header.strip("|").split("|")][:5] == [
            "model",
            "lang",
            "design",
            "announced",
            "announce_style",
        ]
        assert "Every row: task mgsm, cap 4096, forcing False." in table
        thai = [line for line in table.splitlines() if "| tha_Thai |" in line]
        cells = {tuple(c.strip() for c in line.strip("|").split("|")[2:5]) for line in thai}
        assert cells == {
            ("replay", "—", "none"),
            ("announcement", "256", "natural"),
            ("announcement", "1024", "natural"),
        }
        assert "256.00" not in table


def test_the_report_figures_name_every_cell_of_a_language_apart(report_figures):
    """The demo's native Thai has a replay cell and two announcement cells: three curves, never one zigzag, and
    the announcement cells in a panel of their own (unlike designs are not compared by eye)."""
    caught, _ = report_figures
    panels = {ax.get_title(): ax for ax in caught["native_curves.png"].axes if ax.get_legend() is not None}
    labels = {title.split(":")[0]: [t.get_text() for t in ax.get_legend().get_texts()] for title, ax in panels.items()}
    assert labels == {
        "qwen3-8b (replay cells)": ["de", "sw", "th"],
        "qwen3-8b (announcement cells)": ["th (announced 256)", "th (announced 1024)"],
    }
    caption = [t.get_text() for t in caught["gap_curves.png"].texts][-1]
    assert caption.startswith("Unnormalised gap") and "Estimates (a lead only where the CI excludes 0): " in caption


def test_the_tall_premium_plot_has_ticks_at_both_ends_and_names_its_models(tmp_path, monkeypatch):
    import math

    from mindcap_tok.report import figures

    # 204 languages, two models, premiums from 1 to about 6 (the geometry of `premium --all --plot`)
    rows = [
        {"model": m, "lang": f"l{i:03d}_Xxxx", "premium": p, "ci_low": p - 0.02, "ci_high": p + 0.02}
        | {"ref": "eng_Latn", "split": "devtest", "ci": 0.95}
        for i in range(204)
        for m, p in (("qwen3-8b", 1 + i / 40), ("llama-3.1-8b", 1 + math.sqrt(i) / 3))
    ]
    caught = []
    monkeypatch.setattr(figures, "save_figure", lambda fig, path, **kw: caught.append(fig))
    figures.plot_premiums(rows, tmp_path / "p.png")
    (fig,) = caught
    ax = fig.axes[0]
    assert "qwen3-8b" in fig.get_suptitle() and "llama-3.1-8b" in fig.get_suptitle()
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    axes_box = ax.get_window_extent(renderer)
    numbers = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip().replace(".", "").isdigit()]
    above = [t for t in numbers if t.get_window_extent(renderer).y0 >= axes_box.y1]
    below = [t for t in numbers if t.get_window_extent(renderer).y1 <= axes_box.y0]
    assert len(above) >= 3 and len(below) >= 3
    assert overprinted(fig) == []
    assert covered_points(fig) == []


def _pass_share_figure(monkeypatch, tmp_path, shares):
    import pandas as pd

    from mindcap_tok.report import figures
    from mindcap_tok.roundtrip.plots import plot_pass_share

    caught = []
    monkeypatch.setattr(figures, "save_figure", lambda fig, path, **kw: caught.append(fig))
    metrics = pd.DataFrame(
        [
            {
                "by": "sequence",
                "group": g,
                "model": "tiny",
                "judge_model": "tiny",
                "pass_share": s,
                "pass_share_se": 0.0,
            }
            for g, s in zip(["en>de>en", "lit:c-europe"], shares, strict=True)
        ]
    )
    plot_pass_share(metrics, tmp_path / "pass_share.png")
    return caught[0]


def test_a_pass_share_figure_with_nothing_judged_says_so(monkeypatch, tmp_path):
    fig = _pass_share_figure(monkeypatch, tmp_path, [float("nan"), float("nan")])
    texts = " ".join(t.get_text() for t in fig.findobj(Text))
    assert "nothing to show, because no sample was judged" in texts
    assert not fig.axes[0].patches and overprinted(fig) == []
    fig = _pass_share_figure(monkeypatch, tmp_path, [0.5, float("nan")])
    assert "not judged" in [t.get_text() for t in fig.axes[0].texts]
    assert overprinted(fig) == []
