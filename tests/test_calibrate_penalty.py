"""Known answers of the seed formula, its L = 0 handling, and the density exemption."""

import math

import numpy as np
import pytest

from judgecal.calibrate.penalty import (
    calibrate,
    density_multiplier,
    log_ratio,
    polylog_penalty,
    token_entropy,
)
from judgecal.errors import UsageError


def test_worked_example_of_design_md():
    # DESIGN.md: raw 9.0, L = 1200, L_ref = 300, gamma = 0.5, p = 1.2 -> 0.74 and 8.26
    pen = polylog_penalty(1200, 300, 0.5, 1.2)
    assert pen == pytest.approx(0.5 * math.log(4) ** 1.2, rel=1e-12)
    assert pen == pytest.approx(0.7399, abs=1e-4)
    s = calibrate(9.0, 1200, 300, 0.5, 1.2, 0, 10)
    assert s == pytest.approx(8.2601, abs=1e-4)
    assert round(float(s), 2) == 8.26


def test_shorter_answers_get_a_symmetric_bonus_and_zero_at_l_ref():
    pen = polylog_penalty(np.array([75.0, 300.0, 1200.0]), 300, 0.5, 1.2)
    assert pen[0] == pytest.approx(-pen[2])
    assert pen[1] == 0.0


def test_length_zero_is_floored_at_one_unit():
    assert log_ratio(0, 300) == pytest.approx(math.log(1 / 300))
    assert log_ratio(0, 300) == log_ratio(1, 300)
    pen = polylog_penalty(np.array([0.0, 0.5]), 300, 0.5, 1.2)
    assert np.all(np.isfinite(pen))
    # bonus 0.5 * ln(300)^1.2 = 4.0398 pushes 9.0 above the scale: clipped to 10
    assert pen[0] == pytest.approx(-0.5 * math.log(300) ** 1.2)
    assert calibrate(9.0, 0, 300, 0.5, 1.2, 0, 10) == 10.0
    assert calibrate(8.0, 1e6, 300, 0.5, 1.2, 0, 10) == pytest.approx(8.0 - 0.5 * math.log(1e6 / 300) ** 1.2)
    assert calibrate(0.5, 1e9, 300, 2.0, 1.5, 0, 10) == 0.0  # clipped below


def test_vectorised_shapes():
    s = calibrate(np.full(4, 5.0), np.array([0, 100, 300, 900]), 300, 0.3, 1.0, 0, 9)
    assert s.shape == (4,)
    assert s[2] == 5.0
    assert s[3] == pytest.approx(5.0 - 0.3 * math.log(3))
    assert s[1] == pytest.approx(5.0 + 0.3 * math.log(3))


@pytest.mark.parametrize("kwargs", [dict(l_ref=0), dict(l_ref=-3), dict(gamma=-0.1), dict(p=0.0)])
def test_bad_parameters_raise_usage_error(kwargs):
    args = dict(length=[10.0], l_ref=300, gamma=0.5, p=1.2) | kwargs
    with pytest.raises(UsageError):
        polylog_penalty(**args)


def test_bad_scale_raises():
    with pytest.raises(UsageError):
        calibrate(5, 100, 300, 0.5, 1.2, 9, 0)


def test_token_entropy_known_values():
    assert token_entropy("") == 0.0
    assert token_entropy("x x x") == 0.0
    assert token_entropy("a a b b") == pytest.approx(1.0)
    assert token_entropy("a  b\nc\td") == pytest.approx(2.0)
    assert token_entropy("a a a b") == pytest.approx(-(0.75 * math.log2(0.75) + 0.25 * math.log2(0.25)))


def test_density_multiplier_known_values():
    length = np.array([1200, 1200, 1200, 100])
    h = np.array([3.0, 5.0, 1.0, 5.0])
    m = density_multiplier(length, 300, h, {"h_ref": 2.0, "w": 0.5})
    # (3-2)/2 = 0.5 -> 1 - 0.25; (5-2)/2 clipped to 1 -> 0.5; below h_ref -> 1; short -> 1
    np.testing.assert_allclose(m, [0.75, 0.5, 1.0, 1.0])
    s = calibrate(9.0, 1200, 300, 0.5, 1.2, 0, 10, density=3.0, density_params={"h_ref": 2.0, "w": 0.5})
    assert s == pytest.approx(9.0 - 0.75 * 0.5 * math.log(4) ** 1.2)
    # default h_ref = median of the densities, default w = 0.5
    m2 = density_multiplier([1200, 1200, 1200], 300, [2.0, 4.0, 8.0])
    np.testing.assert_allclose(m2, [1.0, 1.0, 0.5])


def test_density_bad_params():
    with pytest.raises(UsageError):
        density_multiplier([1200], 300, [3.0], {"h_ref": 0.0})
    with pytest.raises(UsageError):
        density_multiplier([1200], 300, [3.0], {"h_ref": 2.0, "w": 1.5})
