"""A planted gamma and p are recovered from 20,000 simulated expert-labelled pairs."""

import numpy as np
import pytest

from judgecal.calibrate.fit import fit_pairwise


def simulate(n, gamma, p, seed):
    rng = np.random.default_rng(seed)
    la, lb = np.exp(rng.normal(5.5, 0.8, n)), np.exp(rng.normal(5.5, 0.8, n))
    l_ref = float(np.median(np.concatenate([la, lb])))
    term = lambda L: gamma * np.sign(np.log(L / l_ref)) * np.abs(np.log(L / l_ref)) ** p  # noqa: E731
    qa, qb = rng.normal(5, 1.5, n), rng.normal(5, 1.5, n)  # true quality
    sa = qa + term(la) + rng.normal(0, 0.3, n)  # judge = quality + planted length term
    sb = qb + term(lb) + rng.normal(0, 0.3, n)
    y = (rng.random(n) < 1 / (1 + np.exp(-1.5 * (qa - qb)))).astype(float)  # experts see q
    y[np.abs(qa - qb) < 0.05] = 0.5
    return sa, sb, la, lb, y, l_ref


@pytest.mark.parametrize("gamma,p,seed", [(0.6, 1.3, 0), (0.25, 1.1, 1), (1.0, 1.45, 2)])
def test_planted_penalty_is_recovered(gamma, p, seed):
    sa, sb, la, lb, y, l_ref = simulate(20_000, gamma, p, seed)
    res = fit_pairwise(sa, sb, la, lb, y, l_ref=l_ref, scale=(0, 10))
    assert res.converged
    assert res.gamma == pytest.approx(gamma, abs=0.05 + 0.05 * gamma)
    assert res.p == pytest.approx(p, abs=0.1)


def test_no_length_bias_gives_gamma_near_zero():
    sa, sb, la, lb, y, l_ref = simulate(20_000, 0.0, 1.2, 3)
    res = fit_pairwise(sa, sb, la, lb, y, l_ref=l_ref, scale=(0, 10))
    assert res.gamma < 0.05
