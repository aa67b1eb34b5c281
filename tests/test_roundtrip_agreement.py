"""Rank agreement between judges and between metrics (LiT Appendix B): Spearman ρ, Kendall τ and their
permutation p-values against scipy and against exact enumeration by hand; the report's agreement table on a
hand-built run of three models and two judges (tests/roundtrip_factory.py)."""

from __future__ import annotations

import json
from itertools import permutations

import numpy as np
import pytest
from scipy import stats

from mindcap_tok.roundtrip.agreement import rank_agreement
from mindcap_tok.roundtrip.report import ReportOptions, roundtrip_report
from roundtrip_factory import write_run


def spearman_by_hand(x, y) -> float:
    """1 - 6 Σd² / (n(n² - 1)) for untied values (ranks are positions in the sorted order)."""
    n = len(x)
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    return 1 - 6 * float(((rx - ry) ** 2).sum()) / (n * (n * n - 1))


def exact_p(x, y) -> float:
    """One-sided exact permutation p-value of Spearman's ρ: share of all n! pairings with ρ ≥ the observed."""
    obs = spearman_by_hand(x, y)
    got = [spearman_by_hand(list(p), y) >= obs - 1e-12 for p in permutations(x)]
    return sum(got) / len(got)


def test_rho_tau_and_exact_p_values():
    x, y = [1.0, 2.0, 3.0, 4.0, 5.0], [2.0, 1.0, 4.0, 3.0, 5.0]
    got = rank_agreement(x, y, n_perm=10_000, seed=1)
    assert got["rho"] == pytest.approx(0.8) == pytest.approx(stats.spearmanr(x, y).statistic)  # 1 - 6·4/120
    assert got["tau"] == pytest.approx(0.6) == pytest.approx(stats.kendalltau(x, y).statistic)  # (8 - 2) / 10
    assert got["rho_p"] == pytest.approx(exact_p(x, y)) == pytest.approx(8 / 120)
    assert got["n_permutations"] == 120 and got["alternative"] == "greater" and got["seed"] == 1  # 5! < 10,000


def test_sampled_permutations_are_seeded_and_match_scipy():
    rng = np.random.default_rng(4)
    x = rng.normal(size=9)
    y = x + rng.normal(scale=0.8, size=9)
    got = rank_agreement(x, y, n_perm=999, seed=7)
    want = stats.permutation_test(
        (x,),
        lambda a: stats.spearmanr(a, y).statistic,
        permutation_type="pairings",
        n_resamples=999,
        alternative="greater",
        rng=np.random.default_rng(7),
    )
    assert got["rho_p"] == want.pvalue and got["n_permutations"] == 999
    assert rank_agreement(x, y, n_perm=999, seed=7) == got  # same seed, same p-values
    assert 1 / 1000 <= got["rho_p"] <= 1 and got["rho"] == pytest.approx(stats.spearmanr(x, y).statistic)


def test_a_constant_scoring_has_no_ranking():
    got = rank_agreement([1.0, 1.0, 1.0], [1.0, 2.0, 3.0])
    assert (got["rho"], got["rho_p"], got["tau"], got["tau_p"]) == (None, None, None, None)


# (model, judge) -> MQM of each of three texts, with the issue counts behind each value
MQMS = {
    ("m1", "judge-a"): (100, 100, 100),
    ("m2", "judge-a"): (90, 90, 70),
    ("m3", "judge-a"): (50, 50, 50),
    ("m1", "judge-b"): (95, 95, 95),
    ("m2", "judge-b"): (99, 99, 99),
    ("m3", "judge-b"): (60, 60, 60),
}
ISSUES = {100: (0, 0, 0), 99: (1, 0, 0), 95: (0, 1, 0), 90: (0, 2, 0), 70: (0, 6, 0), 60: (0, 8, 0), 50: (0, 0, 2)}


@pytest.fixture(scope="module")
def report(tmp_path_factory, qwen):
    tmp = tmp_path_factory.mktemp("agree")
    texts = {f"t{i}": f"Text {i} is about the small river near the old mill." for i in range(3)}
    judged = {
        (m, j, t): ("7-good", *ISSUES[v]) for (m, j), vals in MQMS.items() for t, v in zip(texts, vals, strict=True)
    }
    run = write_run(tmp, qwen, texts, judged, models=("m1", "m2", "m3"), judges=("judge-a", "judge-b"))
    toks = dict.fromkeys(("m1", "m2", "m3"), qwen)
    return roundtrip_report(
        run, tmp / "rep", options=ReportOptions(tokenizers=toks, flores=False, lid=False, n_boot=50)
    )


def test_report_agreement_between_judges_and_metrics(report):
    over = report.metrics[report.metrics["by"] == "overall"].set_index(["model", "judge_model"])
    assert over.loc[("m2", "judge-a"), "mean_mqm"] == pytest.approx(250 / 3)
    assert over.loc[("m2", "judge-a"), "pass_share"] == pytest.approx(2 / 3)
    ag = json.loads((report.out_dir / "report.json").read_text("utf-8"))["agreement"]
    rows = {(r["between"], r["judge"] or r["metric"], r["a"], r["b"]): r for r in ag}
    # mean MQM ranks: judge-a m1 > m2 > m3, judge-b m2 > m1 > m3: ρ = 1 - 6·2/24 = 0.5, τ = (2 - 1)/3
    mqm = rows[("judges", "mean_mqm", "judge-a", "judge-b")]
    a, b = [100, 250 / 3, 50], [95, 99, 60]
    assert mqm["rho"] == pytest.approx(0.5) == pytest.approx(spearman_by_hand(a, b))
    assert mqm["tau"] == pytest.approx(1 / 3) and mqm["n_models"] == 3
    assert mqm["rho_p"] == pytest.approx(exact_p(a, b)) == pytest.approx(3 / 6)  # identity and two swaps ≥ 0.5
    # judge-a: pass share (1, 2/3, 0) and mean MQM (100, 83.3, 50) rank the models alike
    same = rows[("metrics", "judge-a", "pass_share", "mean_mqm")]
    assert (same["rho"], same["tau"]) == (pytest.approx(1.0), pytest.approx(1.0))
    assert same["rho_p"] == pytest.approx(1 / 6)  # only the identity reaches ρ = 1
    # the factory's judge score is 50 everywhere: no ranking, no agreement
    flat = rows[("metrics", "judge-a", "pass_share", "mean_judge_score")]
    assert flat["rho"] is None and flat["rho_p"] is None
    assert report.summary["agreement"]["n_permutations"] == 10_000
    md = (report.out_dir / "report.md").read_text("utf-8")
    assert "## Rank agreement (models)" in md and "judge-b" in md and (report.out_dir / "agreement.csv").is_file()


def test_one_model_has_no_agreement_and_says_so(tmp_path, qwen):
    run = write_run(tmp_path, qwen, {"t0": "One text."}, {("qwen3-8b", "qwen3-8b", "t0"): ("7-good", 0, 0, 0)})
    result = roundtrip_report(
        run, tmp_path / "rep", options=ReportOptions(tokenizers={"qwen3-8b": qwen}, flores=False, lid=False, n_boot=9)
    )
    assert "rank agreement skipped: it needs at least 3 models scored" in result.notes
