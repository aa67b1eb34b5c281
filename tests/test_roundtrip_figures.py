"""The round-trip figures reviewed as a reader would: rendered from tables shaped like the report's and
the comparison's (three models, two judges, the eight LiT presets and a custom chain, long model names), caught
before they are saved. No two texts overprint, no legend hides a data point or a bar top, titles and captions
name what the data hold, and an empty panel says why it is empty.
"""

from __future__ import annotations

import itertools

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest

from figure_checks import covered_points, drawn_texts, overprinted, text_over_data
from mindcap_tok.report import figures
from mindcap_tok.roundtrip import plots
from mindcap_tok.roundtrip.sequences import presets

MODELS = ("qwen3-8b", "Llama-3.1-8B-Instruct", "Qwen/Qwen3-235B-A22B-Instruct-2507")
JUDGES = ("gpt-4o-2024-08-06", "qwen3-32b")
CUSTOM = "eng_Latn>deu_Latn>tha_Thai>eng_Latn"


@pytest.fixture
def caught(monkeypatch):
    """The figures the plotting functions would save, in order."""
    got = []
    monkeypatch.setattr(figures, "save_figure", lambda fig, path, **kw: got.append(fig))
    return got


def texts_of(fig) -> str:
    return " ".join(t.get_text() for t in drawn_texts(fig))


def _chains() -> dict[str, tuple[str, ...]]:
    chains = {name: chain.langs for name, chain in presets().items()}
    return chains | {CUSTOM: tuple(CUSTOM.split(">"))}


def hop_tokens(seed: int = 0) -> pd.DataFrame:
    """A hop-token table of three models over the presets and a custom chain; ratios in [1, 2.4) except one hop
    set by hand to be the costliest (Llama into Amharic, hop 4 of lit:africa: 3.1)."""
    rng = np.random.default_rng(seed)
    rows = []
    for model in MODELS:
        for seq, langs in _chains().items():
            for hop, (src, tgt) in enumerate(itertools.pairwise(langs), start=1):
                ratio = 1.0 + 1.4 * rng.random()
                rows.append(
                    {
                        "model": model,
                        "sequence": seq,
                        "hop": hop,
                        "src_lang": src,
                        "tgt_lang": tgt,
                        "token_ratio": ratio,
                        "flores_premium": ratio * (0.9 + 0.2 * rng.random()),
                    }
                )
    table = pd.DataFrame(rows)
    top = (table["model"] == MODELS[1]) & (table["sequence"] == "lit:africa") & (table["hop"] == 4)
    table.loc[top, "token_ratio"] = 3.1
    return table


def test_token_cost_has_a_panel_per_chain_naming_each_hops_language(caught, tmp_path):
    plots.plot_token_cost(hop_tokens(), tmp_path / "t.png")
    (fig,) = caught
    assert overprinted(fig) == [] and covered_points(fig) == [] and text_over_data(fig) == []
    panels = {ax.get_title(): ax for ax in fig.axes}
    assert set(panels) == {*presets(), "en>de>th>en"}  # a written-out chain shortened to its aliases
    ticks = [t.get_text() for t in panels["lit:e-asia"].get_xticklabels()]
    assert ticks == ["1\nja", "2\nko", "3\nzh", "4\nru", "5\nen"]  # lit:e-asia is en>ja>ko>zh>ru>en
    assert [t.get_text() for t in panels["en>de>th>en"].get_xticklabels()] == ["1\nde", "2\nth", "3\nen"]
    # one line per model in every panel, in the model's colour throughout, filled ratios and hollow premiums
    for ax in fig.axes:
        filled = [line for line in ax.get_lines() if line.get_linestyle() == "-"]
        assert [line.get_label() for line in filled] == list(MODELS)
    title = fig.get_suptitle().replace("\n", " ")
    assert all(m in title for m in MODELS)
    words = texts_of(fig).replace("\n", " ")
    assert "Costliest hop: Llama-3.1-8B-Instruct into am (hop 4 of lit:africa), 3.10× the source tokens." in words
    assert "hollow: the FLORES premium" in words


def test_token_cost_says_why_a_chain_has_nothing_to_show(caught, tmp_path):
    table = hop_tokens()
    table.loc[table["sequence"] == CUSTOM, "token_ratio"] = np.nan
    table["flores_premium"] = np.nan
    plots.plot_token_cost(table, tmp_path / "t.png")
    (fig,) = caught
    (empty,) = [ax for ax in fig.axes if ax.get_title() == "en>de>th>en"]
    assert not empty.axison and not empty.get_lines()
    assert "nothing to show, because no hop output of this chain was counted" in " ".join(
        t.get_text().replace("\n", " ") for t in empty.texts
    )
    assert "FLORES premiums not computed" in texts_of(fig).replace("\n", " ")
    assert overprinted(fig) == []


def _metrics(shares) -> pd.DataFrame:
    seqs = [*presets(), CUSTOM]
    return pd.DataFrame(
        [
            {
                "by": "sequence",
                "group": seq,
                "model": m,
                "judge_model": j,
                "pass_share": next(shares),
                "pass_share_se": 0.05,
            }
            for m in MODELS
            for j in JUDGES
            for seq in seqs
        ]
    )


def test_pass_share_bars_keep_their_tops_clear_of_the_legend(caught, tmp_path):
    """Every bar reaches 1.0, where an in-axes legend would sit; one bar is not judged and says so."""
    shares = iter([np.nan] + [1.0] * 200)
    plots.plot_pass_share(_metrics(shares), tmp_path / "p.png")
    (fig,) = caught
    (ax,) = fig.axes
    assert overprinted(fig) == [] and covered_points(fig) == [] and text_over_data(fig) == []
    assert len(ax.patches) == len(MODELS) * len(JUDGES) * 9
    assert [t.get_text() for t in ax.texts] == ["not judged"]
    assert [t.get_text() for t in ax.get_xticklabels()][-2:] == ["lit:s-america", "en>de>th>en"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[:2] == [f"{MODELS[0]} / judge {JUDGES[0]}", f"{MODELS[0]} / judge {JUDGES[1]}"]
    title = ax.get_title().replace("\n", " ")
    assert all(name in title for name in (*MODELS, *JUDGES))


def test_a_leaderboard_lists_models_in_rank_order_with_ticks_at_both_ends(caught, tmp_path):
    models = [*MODELS, *(f"org/model-{i:02d}-instruct" for i in range(17))]  # 20 models: a tall figure
    rows = [
        {"model": m, "judge_model": j, "pass_share": 0.95 - 0.04 * k - 0.02 * i, "pass_share_se": 0.03}
        for i, j in enumerate(JUDGES)
        for k, m in enumerate(models)
    ]
    rows[5]["pass_share"] = np.nan  # the first judge left model 5 unjudged
    plots.plot_leaderboard(pd.DataFrame(rows), tmp_path / "l.png")
    (fig,) = caught
    ax = fig.axes[0]
    assert overprinted(fig) == [] and covered_points(fig) == [] and text_over_data(fig) == []
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    labels = sorted(ax.get_yticklabels(), key=lambda t: -t.get_window_extent(renderer).y0)
    assert [t.get_text() for t in labels] == models  # rank 1 at the top
    box = ax.get_window_extent(renderer)
    numbers = [t for t in drawn_texts(fig) if t.get_text().replace(".", "").isdigit()]
    assert sum(t.get_window_extent(renderer).y0 >= box.y1 for t in numbers) >= 3
    assert sum(t.get_window_extent(renderer).y1 <= box.y0 for t in numbers) >= 3
    assert f"not judged by {JUDGES[0]}" in [t.get_text() for t in ax.texts]
    title = ax.get_title().replace("\n", " ")
    assert "20 models" in title and all(j in title for j in JUDGES)


def test_a_leaderboard_with_nothing_judged_says_so(caught, tmp_path):
    board = pd.DataFrame(
        [{"model": m, "judge_model": JUDGES[0], "pass_share": None, "pass_share_se": None} for m in MODELS]
    )
    plots.plot_leaderboard(board, tmp_path / "l.png")
    (fig,) = caught
    assert "nothing to show, because no sample of any model was judged" in texts_of(fig).replace("\n", " ")
    assert not fig.axes[0].get_lines() and overprinted(fig) == []


def _reference_inputs():
    """Six models, two of them with nearly the same score and pass share (their names would overprint), and a
    second judge that scored only two of the reference's models."""
    models = [*MODELS, "gemma-3-27b-it", "mistral-nemo-instruct-2407", "phi-4"]
    score = dict(zip(models, [1400, 1386, 1385, 1300, 1250, 1200], strict=True))
    share = dict(zip(models, [0.95, 0.81, 0.80, 0.6, 0.55, 0.4], strict=True))
    board = [{"model": m, "judge_model": JUDGES[0], "pass_share": share[m]} for m in models]
    board += [{"model": m, "judge_model": JUDGES[1], "pass_share": share[m]} for m in models[:2]]
    board += [{"model": "not-in-the-reference", "judge_model": JUDGES[1], "pass_share": 0.5}]
    ref = pd.DataFrame({"model": models, "score": [float(score[m]) for m in models]})
    against = pd.DataFrame(
        [
            {
                "judge_model": JUDGES[0],
                "metric": "pass_share",
                "n_models": 6,
                "rho": 1.0,
                "p_one_sided": 0.0014,
                "n_permutations": 720,
                "seed": 0,
            }
        ]
    )
    return pd.DataFrame(board), ref, against


def test_the_reference_figure_names_every_point_apart_and_says_why_a_judge_is_missing(caught, tmp_path):
    board, ref, against = _reference_inputs()
    plots.plot_reference(board, ref, against, tmp_path / "r.png")
    (fig,) = caught
    first, second = fig.axes
    assert first.get_title() == f"judge {JUDGES[0]}: ρ = 1.00, one-sided p = 0.0014 (6 models)"
    assert sorted(t.get_text() for t in first.texts) == sorted(ref["model"])
    assert overprinted(fig) == []  # the two close names were moved apart
    assert [pair for pair in text_over_data(fig) if pair[0] not in set(ref["model"])] == []
    words = " ".join(t.get_text() for t in second.texts).replace("\n", " ")
    assert f"nothing to show, because only 2 model(s) judged by {JUDGES[1]} are in the reference ranking" in words
    assert "needs at least 3" in words and not second.axison


def test_the_checks_find_a_legend_over_bar_tops_and_error_bars():
    """A figure the checks must reject: an in-axes legend over bars that reach the top and over error bar caps."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.bar([1, 8], [1.0, 0.2], width=1, label="bars")
    ax.errorbar([8], [0.9], yerr=[0.05], fmt="none", capsize=3, label="err")
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 1.05)
    ax.legend(loc="upper left", fontsize=14, borderpad=2)  # over the top of the first bar
    assert {label for label, _, _ in covered_points(fig)} == {"bars"}
    ax.legend(loc="upper right", fontsize=14, borderpad=2)  # over the error bar, above the short bar's top
    assert {label for label, _, _ in covered_points(fig)} == {"err"}
    plt.close(fig)


def test_the_overlap_check_counts_only_drawn_texts():
    """Tick labels outside the view limits exist but are not drawn; two drawn texts on one spot are found."""
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(3, 2))
    top.set_yticks([0, 1, 2, 3])
    top.set_ylim(0.5, 2.5)  # ticks 0 and 3 lie outside: matplotlib skips them
    bottom.set_yticks([0, 1])
    assert "0" not in [t.get_text() for t in drawn_texts(fig) if t.axes is top]
    assert overprinted(fig) == []
    bottom.text(0.5, 0.5, "ρ = 0.50", transform=bottom.transAxes)
    bottom.text(0.52, 0.5, "ρ = 0.49", transform=bottom.transAxes)
    assert overprinted(fig) == [("ρ = 0.50", "ρ = 0.49")]
    plt.close(fig)
