"""Resampling(n_boot, seed, level): the bootstrap settings as one object, checked once when it is made."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mindcap_tok import MindcapError, Resampling
from mindcap_tok.errors import BadInputError
from mindcap_tok.premium import ratio_bootstrap
from mindcap_tok.resample import bootstrap_sums


def test_defaults_are_the_librarys_and_it_is_frozen():
    r = Resampling()
    assert (r.n_boot, r.seed, r.level) == (10_000, 0, 0.95)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.n_boot = 5  # type: ignore[misc]  # the frozen dataclass's refusal is what is tested


def test_too_few_resamples_for_the_level_is_refused_at_construction():
    Resampling(40, level=0.95)  # ceil(2 / 0.05) = 40
    Resampling(10, level=0.8)  # ceil(2 / 0.2) = 10
    with pytest.raises(MindcapError, match=r"--n-boot 39 is too few resamples for level 0\.95: need at least 40"):
        Resampling(39)
    with pytest.raises(MindcapError, match="need at least 10"):
        Resampling(9, level=0.8)
    assert Resampling(0).n_boot == 0  # the estimate alone, where a function allows it


@pytest.mark.parametrize("level", [0.0, 1.0, -0.5, 1.5])
def test_a_level_outside_zero_one_is_bad_input(level):
    with pytest.raises(BadInputError) as exc:
        Resampling(level=level)
    assert (exc.value.key, str(exc.value)) == ("level", f"confidence level must be in (0, 1), got {level}")


def test_ratio_bootstrap_uses_all_three_settings():
    """Two pairs of counts: the interval is the (2.5, 97.5) percentiles of the resampled sums' ratio, by hand."""
    counts, ref = np.array([[3.0], [5.0]]), np.array([1.0, 2.0])
    r = Resampling(200, 7, 0.9)
    sums = bootstrap_sums(np.column_stack([ref, counts]), 200, seed=7)
    want = np.quantile(sums[:, 1] / sums[:, 0], [0.05, 0.95])
    low, high = ratio_bootstrap(counts, ref, resampling=r)
    assert (low[0], high[0]) == pytest.approx(tuple(want))
    # every ratio of two resampled pairs lies between 5/2 and 3/1
    assert 2.5 <= low[0] <= high[0] <= 3.0
