"""Item-clustered bootstrap: against a slow explicit resampling loop, scipy's percentile bootstrap, hand-worked
bands, and coverage of the true Δ_L(B) on simulated ledgers."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from mindcap_tok.budgets import SWEEP_BUDGETS
from mindcap_tok.errors import MindcapError
from mindcap_tok.resample import Resampling, bootstrap_counts
from mindcap_tok.stats.bootstrap import Boot, item_bootstrap, ratio_difference
from mindcap_tok.stats.curves import sweep
from mindcap_tok.stats.premiums import required_budgets
from simulate import simulate, true_delta, validation_design


def _records(seed=0, n_items=30, k=4, n_stats=3):
    rng = np.random.default_rng(seed)
    p = rng.beta(2, 2, size=(n_items, 1))
    scores = (rng.random((n_items, k, n_stats)) < p[:, :, None]).astype(float)  # item effect: shared p
    return scores


def test_item_bootstrap_equals_explicit_resampling_loop():
    scores = _records()
    n_items, k, _ = scores.shape
    n_boot, seed = 200, 7
    got = item_bootstrap(scores.sum(axis=1), np.full((n_items, 3), k), n_boot=n_boot, seed=seed)
    # reference: draw item indices the way bootstrap_counts does, then average every record of the drawn items
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n_items, size=(n_boot, n_items))
    ref = np.array([scores[row].reshape(-1, 3).mean(axis=0) for row in idx])
    np.testing.assert_allclose(got.replicates, ref, rtol=1e-12)
    np.testing.assert_allclose(got.estimate, scores.reshape(-1, 3).mean(axis=0))


def test_unequal_samples_per_item_weight_records_not_items():
    # item 0 has 4 samples (all correct), item 1 has 1 sample (wrong): accuracy = 4/5, not the item mean 1/2
    boot = item_bootstrap(np.array([[4.0], [0.0]]), np.array([[4.0], [1.0]]), n_boot=50, seed=0)
    assert boot.estimate[0] == pytest.approx(0.8)
    weights = bootstrap_counts(2, 50, seed=0)
    expected = (weights[:, 0] * 4) / (weights[:, 0] * 4 + weights[:, 1])
    np.testing.assert_allclose(boot.replicates[:, 0], expected)


def test_percentile_ci_agrees_with_scipy_within_monte_carlo_error():
    scores = _records(seed=3, n_items=80, k=8, n_stats=1)[:, :, 0]
    per_item = scores.sum(axis=1)
    n_boot = 4000
    ours = item_bootstrap(per_item[:, None], np.full((80, 1), 8.0), n_boot=n_boot, seed=11)
    lo, hi = ours.ci(0.95)

    def clustered_accuracy(idx, axis=-1):
        idx = idx.astype(int)
        return per_item[idx].sum(axis=axis) / (8.0 * idx.shape[axis])

    res = sps.bootstrap(
        (np.arange(80),),
        clustered_accuracy,
        n_resamples=n_boot,
        method="percentile",
        vectorized=True,
        random_state=np.random.default_rng(12),
        confidence_level=0.95,
    )
    se = ours.se()[0]
    # each 2.5% quantile from 4000 draws has MC sd ≈ 0.04·se; two independent ones differ by ≈ 0.06·se
    assert abs(lo[0] - res.confidence_interval.low) < 0.25 * se
    assert abs(hi[0] - res.confidence_interval.high) < 0.25 * se
    assert abs(ours.se()[0] - res.standard_error) < 0.1 * se


def test_band_critical_value_worked_by_hand():
    est = np.array([0.0, 10.0])
    reps = np.array([[1.0, 10.0], [-1.0, 12.0], [0.0, 8.0], [2.0, 11.0], [-2.0, 9.0]])
    boot = Boot(est, reps, seed=0)
    se = reps.std(axis=0, ddof=1)
    t = np.abs(reps - est) / se
    crit = np.quantile(t.max(axis=1), 0.8)
    low, high, c = boot.band(0.8)
    assert c == pytest.approx(crit)
    np.testing.assert_allclose(low, est - crit * se)
    np.testing.assert_allclose(high, est + crit * se)
    # a point without bootstrap variance gets a zero-width band and does not drive the maximum
    flat = Boot(np.array([0.0, 5.0]), np.column_stack([reps[:, 0], np.full(5, 5.0)]), seed=0)
    lo2, hi2, _ = flat.band(0.8)
    assert lo2[1] == hi2[1] == 5.0


def _linearized_se(xa, na, xb, nb):
    """Reference: the sandwich se of Σxa/Σna − Σxb/Σnb over an explicit list of items, item by item."""
    ta, tb = sum(xa) / sum(na), sum(xb) / sum(nb)
    u = [(p - ta * q) / sum(na) - (r - tb * s) / sum(nb) for p, q, r, s in zip(xa, na, xb, nb, strict=True)]
    return float(np.sqrt(sum(v * v for v in u)))


def test_ratio_difference_se_matches_an_explicitly_resampled_dataset():
    rng = np.random.default_rng(3)
    n = 12
    xa, xb = rng.integers(0, 5, n).astype(float), rng.integers(0, 5, n).astype(float)
    na, nb = np.full(n, 8.0), rng.integers(4, 9, n).astype(float)  # unequal counts: the general formula
    weights = bootstrap_counts(n, 6, seed=4)
    diff = ratio_difference(xa, na, num_b=xb, den_b=nb, weights=weights, seed=4)
    assert diff.estimate == pytest.approx(xa.sum() / na.sum() - xb.sum() / nb.sum())
    assert diff.se_estimate == pytest.approx(_linearized_se(xa, na, xb, nb))
    for b, w in enumerate(weights.astype(int)):
        pick = np.repeat(np.arange(n), w)  # the replicate as a dataset: item i appears w_i times
        assert diff.replicates[b] == pytest.approx(xa[pick].sum() / na[pick].sum() - xb[pick].sum() / nb[pick].sum())
        assert diff.se_replicates[b] == pytest.approx(_linearized_se(xa[pick], na[pick], xb[pick], nb[pick]))
    # the replicates are exactly the difference of the two ratio bootstraps drawn with the same weights
    plain = item_bootstrap(xa, na, weights=weights) - item_bootstrap(xb, nb, weights=weights)
    np.testing.assert_allclose(diff.replicates, plain.replicates)


def test_studentized_band_uses_each_replicates_own_se():
    est = np.array([0.1, 0.5])
    reps = np.array([[0.2, 0.5], [0.0, 0.7], [0.1, 0.4], [0.3, 0.6], [0.1, 0.5]])
    se_reps = np.array([[0.1, 0.2], [0.05, 0.1], [0.1, 0.1], [0.2, 0.1], [0.1, 0.1]])
    se_est = np.array([0.1, 0.1])
    boot = Boot(est, reps, 0, se_est, se_reps)
    t = np.abs(reps - est) / se_reps  # worked: max per row = 1, 2, 1, 1, 0
    crit = np.quantile(t.max(axis=1), 0.6)
    low, high, c = boot.band(0.6)
    assert c == pytest.approx(crit) and crit == pytest.approx(1.0)
    np.testing.assert_allclose(high - low, 2 * crit * se_est)
    # indexing keeps the standard errors; arithmetic drops them (the plain band is used)
    assert boot[1:].studentized and not (boot - boot).studentized


def test_argmax_stability_and_lead_probability_by_hand():
    est = np.array([1.0, 3.0, 2.0])
    reps = np.array([[1, 3, 2], [1, 2, 3], [4, 3, 2], [0, 3, 3]], dtype=float)  # last: tie -> first max (index 1)
    idx, share = Boot(est, reps, seed=0).argmax()
    assert idx == 1 and share == pytest.approx(2 / 4)
    np.testing.assert_allclose(Boot(est, reps - 2.0, seed=0).prob_positive(), [1 / 4, 3 / 4, 2 / 4])


def test_combining_different_resamplings_is_refused():
    a = item_bootstrap(np.ones((5, 2)), n_boot=10, seed=1)
    b = item_bootstrap(np.ones((5, 2)), n_boot=10, seed=2)
    with pytest.raises(MindcapError, match="different seeds"):
        _ = a - b


@pytest.fixture(scope="module")
def simulated_coverage():
    """200 simulated datasets (250 items, k=8, item random effects): the true Δ_L(B) is known in closed form.

    Returns per-(dataset, language) pointwise coverage indicators and whole-curve band coverage.
    """
    design = validation_design()
    budgets = list(SWEEP_BUDGETS)
    need = required_budgets(budgets, design.premiums.values())
    truth = {c.lang: true_delta(design, c, budgets) for c in design.cells}
    point, band = [], []
    for s in range(200):
        data = simulate(design, seed=50_000 + s)
        res = sweep(data.grid(need), design.premiums, budgets=budgets, resampling=Resampling(500, s))
        for lang, part in res.rows.groupby("lang"):
            tr = truth[lang]
            point.append((part["ci_low"].to_numpy() <= tr) & (tr <= part["ci_high"].to_numpy()))
            band.append(bool(((part["band_low"].to_numpy() <= tr) & (tr <= part["band_high"].to_numpy())).all()))
    return np.asarray(point), np.asarray(band)


@pytest.mark.slow
def test_pointwise_cis_cover_the_true_delta_on_simulated_ledgers(simulated_coverage):
    point, _ = simulated_coverage
    assert 0.93 <= point.mean() <= 0.97, point.mean()


@pytest.mark.slow
def test_simultaneous_bands_cover_the_whole_true_curve(simulated_coverage):
    _, band = simulated_coverage
    assert band.mean() >= 0.95 - 0.02, band.mean()  # 600 curves: MC sd of the share ≈ 0.009
