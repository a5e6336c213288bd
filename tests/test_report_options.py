"""report --bootstrap: 0 (no CIs) or at least 20 resamples; 1 to 19 are refused before any work
(one resample gave 'CIs' such as 0.950 [0.970, 0.970] that leave out their own figure)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("n", ["1", "2", "19"])
def test_too_few_resamples_are_refused(n, sqlite_url, run_cli):
    r = run_cli("--database-url", sqlite_url, "report", "--bootstrap", n)
    assert r.exit_code == 2 and "cannot give a 95% interval" in r.stderr and "Traceback" not in r.output


def test_zero_and_twenty_pass_the_option_check(sqlite_url, run_cli):
    for n in ("0", "20"):
        r = run_cli("--database-url", sqlite_url, "report", "--bootstrap", n)
        assert "--bootstrap" not in r.stderr  # an empty database: refused for having nothing, not for the option
