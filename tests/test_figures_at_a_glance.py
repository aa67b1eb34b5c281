"""Figures readable at a glance, drawn from hand-made tables whose answers are known: no text on a curve, marker
or error bar, no two spans on one place, unlike designs in separate panels, no lead claimed inside a CI, nothing
highlighted for an all-zero curve, capped hops marked, ties not ranked, 0 drawn apart from "not judged". The
checks themselves are shown to fail on figures built to break them."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest

from figure_checks import drawn_texts, overlapping_spans, overprinted, text_over_data
from mindcap_tok.report import budget_figures, figures
from mindcap_tok.roundtrip import plots

GRID = [64, 128, 199, 247, 256, 326, 489, 512, 1024]
# (lang, design, announced, peak B, floor(r·B), Δ): three replay spans that all start at 128 (one muddy band
# when tinted on the panel) and two announcement cells of Thai
PEAKS = [
    ("deu_Latn", "replay", None, 128, 199, 0.32),
    ("swh_Latn", "replay", None, 128, 247, 0.22),
    ("tha_Thai", "replay", None, 128, 326, 0.26),
    ("tha_Thai", "announcement", 256, 128, 326, 0.26),
    ("tha_Thai", "announcement", 1024, 256, 489, 0.33),
]


@pytest.fixture
def caught(monkeypatch):
    got = []
    for module in (budget_figures, figures):
        monkeypatch.setattr(module, "save_figure", lambda fig, path, **kw: got.append(fig))
    return got


def _native(scale: float = 1.0) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows, peaks = [], []
    for lang, design, announced, b, s, delta in PEAKS:
        cell = {"model": "m", "lang": lang, "design": design, "announced": announced}
        for budget in GRID:
            acc = scale * min(0.9, 0.1 + 0.8 * np.log2(budget / 64) / 4)
            rows.append(cell | {"budget": budget, "accuracy": acc, "ci_low": 0.9 * acc, "ci_high": min(1.0, 1.1 * acc)})
        peaks.append(cell | {"peak_budget": b, "scaled_budget": s, "delta": scale * delta})
    return pd.DataFrame(rows), pd.DataFrame(peaks)


def _panels(fig):
    """The curve panels (those with a legend) and the span strips under them, left to right."""
    mains = [ax for ax in fig.axes if ax.get_legend() is not None]
    strips = [ax for ax in fig.axes if ax.get_legend() is None]
    return mains, strips


def test_native_curves_keep_spans_apart_labels_off_the_curves_and_designs_in_their_own_panels(caught, tmp_path):
    curves, peaks = _native()
    budget_figures.plot_native_curves(curves, peaks, path=tmp_path / "n.png")
    (fig,) = caught
    assert overprinted(fig) == [] and text_over_data(fig) == [] and overlapping_spans(fig) == []
    (replay, announced), (replay_strip, announced_strip) = _panels(fig)
    assert "replay cells" in replay.get_title() and "announcement cells" in announced.get_title()
    assert [t.get_text() for t in replay.get_legend().get_texts()] == ["de", "sw", "th"]
    assert [t.get_text() for t in announced.get_legend().get_texts()] == ["th (announced 256)", "th (announced 1024)"]
    # each span a bar of its own row, from B to floor(r·B) as the peak table says
    bars = [(p.get_x(), p.get_x() + p.get_width(), p.get_y() + p.get_height() / 2) for p in replay_strip.patches]
    assert bars == [(128, 199, 0), (128, 247, 1), (128, 326, 2)]
    assert [(p.get_x(), p.get_x() + p.get_width()) for p in announced_strip.patches] == [(128, 326), (256, 489)]
    assert [t.get_text() for t in replay_strip.texts] == [
        "Δ=+32.0 pts, 128→199",
        "Δ=+22.0 pts, 128→247",
        "Δ=+26.0 pts, 128→326",
    ]
    assert [t.get_text() for t in replay_strip.get_yticklabels()] == ["de", "sw", "th"]
    renderer = fig.canvas.get_renderer()
    for strip in (replay_strip, announced_strip):  # every Δ label inside its strip
        area = strip.get_window_extent(renderer)
        for text in strip.texts:
            box = text.get_window_extent(renderer)
            assert area.x0 <= box.x0 and box.x1 <= area.x1, text.get_text()


def test_an_all_zero_curve_has_no_negative_axis_and_no_peak(caught, tmp_path):
    curves, peaks = _native(scale=0.0)
    budget_figures.plot_native_curves(curves, peaks, path=tmp_path / "n.png")
    (fig,) = caught
    mains, strips = _panels(fig)
    assert strips == []  # no peak anywhere: no span strip
    for ax in mains:
        assert ax.get_ylim()[0] == 0 and ax.get_ylim()[1] > 0
        assert not ax.patches and not [line for line in ax.get_lines() if line.get_marker() == "s"]
        assert all(t.get_text().endswith("(all 0: no peak)") for t in ax.get_legend().get_texts())
    assert overprinted(fig) == [] and text_over_data(fig) == []


def _gaps(rows) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"model": "m", "lang": lang, "budget": b, "gap": g, "gap_ci_low": lo, "gap_ci_high": hi}
            for lang, b, g, lo, hi in rows
        ]
    )


def test_the_gap_caption_calls_a_lead_only_where_the_ci_excludes_zero():
    rows = [("tha_Thai", 64, -0.001, -0.006, 0.005), ("tha_Thai", 128, -0.001, -0.006, 0.005)]  # the case
    rows += [("swh_Latn", 64, -0.1, -0.15, -0.05), ("swh_Latn", 128, 0.02, -0.01, 0.05)]
    rows += [("deu_Latn", 64, 0.1, 0.05, 0.15), ("deu_Latn", 128, 0.2, 0.1, 0.3)]
    assert budget_figures.gap_summary(_gaps(rows)) == (
        "Estimates (a lead only where the CI excludes 0): th: no clear difference at any budget; "
        "sw: NATIVE ahead at B = 64, no clear difference elsewhere; de: TRANSLATE-ACT ahead at every budget."
    )
    no_ci = _gaps(rows).drop(columns=["gap_ci_low", "gap_ci_high"])
    assert "NATIVE ahead" not in budget_figures.gap_summary(no_ci)


def test_the_gap_figure_keeps_its_words_off_the_curves(caught, tmp_path):
    rows = [
        (lang, b, g, g - 0.05, g + 0.05)
        for lang, g0 in (("tha_Thai", 0.3), ("deu_Latn", -0.2))
        for b, g in zip(GRID, np.linspace(g0, -g0, len(GRID)), strict=True)
    ]
    budget_figures.plot_gap_curves(_gaps(rows), tmp_path / "g.png")
    (fig,) = caught
    assert overprinted(fig) == [] and text_over_data(fig) == []
    assert "NATIVE leads" in fig.axes[0].get_ylabel()


def _hops(ratios, capped, unclosed=None) -> pd.DataFrame:
    langs = ["deu_Latn", "tha_Thai", "eng_Latn"]
    return pd.DataFrame(
        [
            {
                "model": "tiny",
                "sequence": "eng_Latn>deu_Latn>tha_Thai>eng_Latn",
                "hop": hop,
                "src_lang": "eng_Latn",
                "tgt_lang": langs[hop - 1],
                "cap_hit_share": c,
                "token_ratio": r,
                "flores_premium": None,
                "unclosed_share": u,
            }
            for hop, r, c, u in zip([1, 2, 3], ratios, capped, unclosed or [0.0] * 3, strict=True)
        ]
    )


def test_token_cost_marks_capped_hops_and_ranks_no_tie(caught, tmp_path):
    plots.plot_token_cost(_hops([1.5, 1.5, 1.5], [1.0, 1.0, 1.0]), tmp_path / "t.png")  # every hop at its cap
    (fig,) = caught
    words = " ".join(t.get_text() for t in drawn_texts(fig)).replace("\n", " ")
    assert "Costliest hop" not in words and "shared by 3 hops: no single costliest hop" in words
    assert "Crossed: 3 hop(s) where a text hit its cap" in words
    ax = fig.axes[0]
    crossed = [line for line in ax.get_lines() if line.get_marker() == "X"]
    assert len(crossed) == 1 and list(crossed[0].get_xdata()) == [1, 2, 3]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["hit cap"]
    assert overprinted(fig) == [] and text_over_data(fig) == []
    caught.clear()
    plots.plot_token_cost(_hops([1.2, 2.51, 1.0], [0.0, 0.0, 0.0]), tmp_path / "t.png")
    words = " ".join(t.get_text() for t in drawn_texts(caught[0])).replace("\n", " ")
    assert "Costliest hop: tiny into th (hop 2 of en>de>th>en), 2.51× the source tokens." in words
    assert "Crossed" not in words and caught[0].axes[0].get_legend() is None


def test_a_thought_that_never_closed_is_named_not_drawn_at_zero(caught, tmp_path):
    plots.plot_token_cost(_hops([1.2, 0.0, 1.1], [0.0, 1.0, 0.0], unclosed=[0.0, 1.0, 0.0]), tmp_path / "t.png")
    (fig,) = caught
    ax = fig.axes[0]
    drawn = np.concatenate([line.get_ydata() for line in ax.get_lines() if line.get_label() == "tiny"])
    assert 0.0 not in drawn  # no lone point at 0
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1\nde", "2\nth\nno answer", "3\nen"]
    words = " ".join(t.get_text() for t in drawn_texts(fig)).replace("\n", " ")
    assert "1 hop(s) whose thought never closed" in words
    assert "Crossed" not in words and ax.get_legend() is None  # the capped hop is the silent one: nothing crossed
    assert "Costliest hop: tiny into de (hop 1" in words  # the silent hop takes no part in the ranking
    assert overprinted(fig) == [] and text_over_data(fig) == []


def test_a_pass_share_of_zero_is_drawn_apart_from_not_judged(caught, tmp_path):
    metrics = pd.DataFrame(
        [
            {"by": "sequence", "group": g, "model": "tiny", "judge_model": "j", "pass_share": s, "pass_share_se": se}
            for g, s, se in (("en>de>en", 0.0, 0.0), ("en>th>en", np.nan, np.nan), ("en>sw>en", 0.6, 0.05))
        ]
    )
    plots.plot_pass_share(metrics, tmp_path / "p.png")
    (fig,) = caught
    (ax,) = fig.axes
    assert [(t.get_text(), round(t.get_position()[0])) for t in ax.texts] == [("not judged", 1), ("0", 0)]
    assert overprinted(fig) == [] and text_over_data(fig) == []


def test_the_checks_find_text_on_a_curve_a_marker_an_error_bar_and_spans_on_one_place():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 10], [0, 10], "-", label="line")
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 10)
    clear = ax.text(8, 1, "clear")
    assert text_over_data(fig) == []
    clear.set_position((4.5, 4.8))  # on the diagonal
    assert text_over_data(fig) == [("clear", "line")]
    clear.set_position((8, 1))
    ax.plot([2], [8], "o", ms=12, label="marker")
    ax.text(2.05, 7.9, "x")  # beside the marker centre, inside its radius
    assert text_over_data(fig) == [("x", "marker")]
    ax.texts[-1].remove()
    ax.errorbar([8], [6], yerr=[2], fmt="none", label="err")
    ax.text(7.9, 5.5, "e")
    assert text_over_data(fig) == [("e", "err")]
    assert overlapping_spans(fig) == []
    ax.axvspan(1, 3, alpha=0.1)
    ax.axvspan(5, 6, alpha=0.1)
    assert overlapping_spans(fig) == []
    ax.axvspan(2, 4, alpha=0.1)  # shares 2..3 with the first
    assert overlapping_spans(fig) == [(0, 2)]
    plt.close(fig)
