"""Bootstrap tests and Holm: hand-worked p-values, statsmodels' Holm, and the size of the one-sided test."""

from __future__ import annotations

import numpy as np
import pytest

from mindcap_tok.errors import MindcapError
from mindcap_tok.stats.bootstrap import Boot, item_bootstrap
from mindcap_tok.stats.hypotheses import bootstrap_test, holm


def test_one_sided_pvalue_worked_by_hand():
    # estimate 2; deviations θ*−θ̂ = [-3, -1, 0, 1, 3]; H1 θ > 0: count deviations >= 2 -> 1 -> p = 2/6
    boot = Boot(np.array(2.0), np.array([-1.0, 1.0, 2.0, 3.0, 5.0]), seed=0)
    assert bootstrap_test(boot, "greater").p_value == pytest.approx(2 / 6)
    # SESOI margin 1: count deviations >= 1 -> 2 -> p = 3/6
    assert bootstrap_test(boot, "greater", margin=1.0).p_value == pytest.approx(3 / 6)
    # tail factor 1.5 scales deviations: [-4.5, -1.5, 0, 1.5, 4.5] >= 2 -> 1 -> still 2/6; >= 1 -> 2 -> 3/6
    assert bootstrap_test(boot, "greater", tail_factor=1.5).p_value == pytest.approx(2 / 6)
    # tail factor 3: [-9,-3,0,3,9] >= 2 -> 2 -> p = 3/6 (more conservative)
    assert bootstrap_test(boot, "greater", tail_factor=3).p_value == pytest.approx(3 / 6)
    # H1 θ < 0: count −dev >= −2, i.e. dev <= 2: [-3, -1, 0, 1] -> 4 -> p = 5/6
    assert bootstrap_test(boot, "less").p_value == pytest.approx(5 / 6)
    # two-sided: |dev| >= 2 -> 2 -> 3/6
    assert bootstrap_test(boot, "two-sided").p_value == pytest.approx(3 / 6)


def test_smallest_pvalue_is_one_over_n_plus_one():
    boot = Boot(np.array(0.35), 0.35 + np.random.default_rng(0).normal(0, 0.02, 10_000), seed=0)
    assert bootstrap_test(boot, "greater", margin=0.05).p_value == pytest.approx(1 / 10_001)


def test_equivalence_tost_worked_by_hand():
    boot = Boot(np.array(0.5), np.array([-0.5, 0.0, 0.5, 1.0, 1.5]), seed=0)
    # margin 2: H1 θ > −2: dev >= 2.5 -> 0 -> 1/6; H1 θ < 2: −dev >= 1.5 -> 0 -> 1/6 -> p = 1/6
    assert bootstrap_test(boot, "equivalence", margin=2.0).p_value == pytest.approx(1 / 6)
    # margin 1: H1 θ < 1: −dev >= 0.5 -> dev <= −0.5 -> 2 -> 3/6; lower side dev >= 1.5 -> 0 -> max = 3/6
    assert bootstrap_test(boot, "equivalence", margin=1.0).p_value == pytest.approx(3 / 6)
    with pytest.raises(MindcapError, match="positive margin"):
        bootstrap_test(boot, "equivalence")


def test_union_over_components_uses_the_studentized_maximum():
    # component 0: est 0, se large; component 1: est 3 with se 1 -> t_obs = 3
    rng = np.random.default_rng(1)
    z = rng.standard_normal((2000, 2))
    reps = np.array([0.0, 3.0]) + z * np.array([5.0, 1.0])
    boot = Boot(np.array([0.0, 3.0]), reps, seed=0)
    res = bootstrap_test(boot, "greater")
    se = reps.std(axis=0, ddof=1)
    t_star = ((reps - boot.estimate) / se).max(axis=1)
    t_obs = max(0.0, 3.0 / se[1])
    assert res.p_value == pytest.approx((1 + np.sum(t_star >= t_obs)) / 2001)
    # the union p is larger than component 1's own p (a multiplicity price) but far below 0.05
    single = bootstrap_test(boot[1], "greater").p_value
    assert single <= res.p_value < 0.05


def test_holm_matches_statsmodels():
    multipletests = pytest.importorskip("statsmodels.stats.multitest").multipletests
    rng = np.random.default_rng(0)
    for m in (1, 3, 6, 20):
        p = np.concatenate([rng.uniform(0, 0.02, m // 2), rng.uniform(0, 1, m - m // 2)])
        ours = holm(p, 0.05)
        reject, adjusted, _, _ = multipletests(p, alpha=0.05, method="holm")
        np.testing.assert_array_equal(ours.reject, reject)
        np.testing.assert_allclose(ours.adjusted, adjusted)


def test_holm_local_thresholds_as_in_the_paper():
    # six tests at family-wise 0.05: the first step's local α is 0.05/6 = 0.0083 (paper §4.1)
    res = holm([0.060, 1.0, 0.2, 0.3, 0.5, 0.9], 0.05)
    assert res.threshold[0] == pytest.approx(0.05 / 6)
    assert not res.reject.any()
    res = holm([0.001, 0.012, 0.02], 0.05)  # 0.001<=0.0167, 0.012<=0.025, 0.02<=0.05
    assert res.reject.all()
    res = holm([0.001, 0.03, 0.04], 0.05)  # stops at 0.03 > 0.025
    assert res.reject.tolist() == [True, False, False]


def test_one_sided_test_holds_its_size_at_the_boundary_null():
    """Item-clustered data whose true mean difference is exactly the SESOI margin: reject ≈ α, not more."""
    rng = np.random.default_rng(5)
    rejections = []
    for s in range(300):
        item = rng.normal(0, 1, size=(150, 1))
        samples = item + rng.normal(0, 1, size=(150, 4)) + 0.2  # true mean 0.2 = margin
        boot = item_bootstrap(samples.sum(axis=1), np.full(150, 4.0), n_boot=400, seed=s)
        rejections.append(bootstrap_test(boot, "greater", margin=0.2).p_value <= 0.05)
    assert 0.02 <= np.mean(rejections) <= 0.09, np.mean(rejections)
