"""Verdicts that do not hang on one seed (issue 33, item 3): a transfer's gain CI is resampled
until the side of zero it lies on is decided beyond Monte Carlo error, or says "undecided at N
resamples", which the gate treats as a failure; check --bootstrap/--seed set the resampling."""

from __future__ import annotations

import json

import numpy as np
import pytest

from judgecal.calibrate.resample import decided_mean_ci, percentile_ci, resample_counts
from judgecal.report.build import verdict

SIDE = {"below": "hurts", "above": "helps", "spans": "no measurable effect"}


def _plain(credit, seed, b=1000):
    n = len(credit)
    w = resample_counts(n, b, np.random.default_rng(seed))
    ci = percentile_ci(w @ credit / w.sum(axis=1))
    return "helps" if ci[0] > 0 else "hurts" if ci[1] < 0 else "no measurable effect"


def _decided(credit, seed, b=1000):
    n = len(credit)
    d = decided_mean_ci(credit, np.arange(n), n, b, seed)
    return ("undecided" if not d["decided"] else SIDE[d["side"]]), d


def _gain(n, worse, better):
    c = np.zeros(n)
    c[:worse], c[worse:worse + better] = -1.0, 1.0
    return c


@pytest.mark.parametrize("n, worse, better", [(25, 6, 1), (25, 8, 2), (40, 6, 1), (60, 8, 2), (20, 8, 2)])
def test_a_verdict_on_the_boundary_is_the_same_for_every_seed(n, worse, better):
    credit = _gain(n, worse, better)
    plain = {_plain(credit, s) for s in range(5)}
    assert len(plain) == 2  # 1000 resamples: "hurts" for some seeds, "no measurable effect" for others
    found = [_decided(credit, s) for s in range(5)]
    assert len({v for v, _ in found}) == 1, found  # one verdict, at every seed
    assert all(d["n_resamples"] > 1000 for _, d in found)  # it took more resamples than the default


def test_a_knife_edge_says_undecided_at_every_seed():
    credit = _gain(12, 6, 1)
    found = [_decided(credit, s) for s in range(5)]
    assert {v for v, _ in found} == {"undecided"} and {d["n_resamples"] for _, d in found} == {32000}


def test_a_clear_verdict_keeps_the_plain_interval():
    rng = np.random.default_rng(3)
    credit = rng.normal(0.3, 0.2, 80)  # far above zero: decided at the first 1000 resamples
    d = decided_mean_ci(credit, np.arange(80), 80, 1000, 11)
    w = resample_counts(80, 1000, np.random.default_rng(11))
    assert d["decided"] and d["side"] == "above" and d["n_resamples"] == 1000
    assert d["ci"] == pytest.approx(percentile_ci(w @ credit / w.sum(axis=1)), rel=1e-12)  # BLAS rounding only
    # a difference that is zero on every item: decided, it spans (touches) zero
    z = decided_mean_ci(np.zeros(30), np.arange(30), 30, 1000, 0)
    assert z["decided"] and z["side"] == "spans" and z["ci"] == [0.0, 0.0]
    assert decided_mean_ci(credit, np.arange(80), 80, 0, 0)["ci"] is None


def _transfer_ev(decided, side, ci):
    cal = {"agreement": 0.70, "gain": -0.16, "gain_ci": ci, "gain_ci_decided": decided, "gain_ci_side": side,
           "gain_ci_resamples": 32000 if not decided else 1000}
    return {"kind": "transfer", "fitted": True, "source_family": "src", "target_family": "tgt",
            "methods": {"raw": {"agreement": 0.86}, "polylog": cal}, "recommended": None, "identification": None}


def test_the_verdict_and_the_gate_say_undecided():
    v = verdict(_transfer_ev(False, "spans", [-0.31, 0.0]))
    assert v["code"] == "undecided" and v["text"].startswith("Undecided at 32000 resamples after transfer")
    assert verdict(_transfer_ev(True, "below", [-0.31, -0.011]))["code"] == "hurts"
    assert verdict(_transfer_ev(True, "spans", [-0.31, 0.0]))["code"] == "no measurable effect"


def test_check_takes_bootstrap_and_seed_for_transfers(tmp_path, data_dir, run_cli):
    url = f"sqlite:///{tmp_path / 'j.db'}"
    for fam in ("Natural", "Adversarial_GPTInst"):
        assert run_cli("--database-url", url, "import", "llmbar", data_dir / "llmbar" / fam).exit_code == 0
    fit = json.loads(run_cli("--database-url", url, "fit", "--task-family", "llmbar/Natural", "--judge", "GPT-4",
                             "--bootstrap", "0", "--no-nested", "--format", "json").stdout)
    base = ("--database-url", url, "check", "--calibration", str(fit["id"]), "--task-family", "llmbar/Adversarial_GPTInst",
            "--allow-unidentified", "--format", "json")
    verdicts = set()
    for seed in range(5):
        res = run_cli(*base, "--seed", str(seed), "--bootstrap", "500")
        transfer = [c for c in json.loads(res.stdout)["checks"] if c["check"] == "transfer"]
        assert len(transfer) == 1, res
        verdicts.add(transfer[0]["message"].split(":", 2)[1].strip().split(" resamples")[0][:40])
    assert len(verdicts) == 1, verdicts
    idle = run_cli("--database-url", url, "check", "--judge", "GPT-4", "--seed", "3")
    assert idle.exit_code == 2 and "nothing is resampled here" in idle.stderr


def test_the_doubling_draws_in_chunks_same_stream_bounded_memory():
    """Issue 33 break-it: the doubling drew each batch in one piece, (resamples x units) arrays
    several times over: a knife edge at --bootstrap 20000 on a ~1000-item family reached
    320,000 x 1000 cells a batch (2.6 GB an array). Now chunks of CHUNK_CELLS cells: the
    knife edge below (12 items of 100 rows each, 32,000 resamples) stays under 100 MB of numpy
    memory (in one piece: 221 MB) and gives what one piece gives: the plain percentile
    CI of the same 32,000 resamples."""
    import tracemalloc

    credit_items = _gain(12, 6, 1)
    codes = np.repeat(np.arange(12), 100)  # every item 100 rows of its credit: the same means
    tracemalloc.start()
    try:
        d = decided_mean_ci(credit_items[codes], codes, 12, 1000, 4)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not d["decided"] and d["n_resamples"] == 32000
    assert peak < 100 * 2**20, f"{peak / 2**20:.0f} MB"
    w = resample_counts(12, 32000, np.random.default_rng(4))
    assert d["ci"] == pytest.approx(percentile_ci(w @ credit_items / w.sum(axis=1)), abs=1e-12)
    assert d["share_at_or_above_0"] == pytest.approx(float(np.mean(w @ credit_items / w.sum(axis=1) >= -1e-12)))


def test_an_undecided_transfer_of_an_unidentified_fit_still_fails_the_gate():
    """Issue 33 break-it: the polylog transfer of a source fit that is not identified became
    "not identified" whatever its verdict but "hurts", so an undecided one passed check's
    transfer check (which fails only "hurts" and "undecided"), under --allow-unidentified even
    the whole gate, while its text said a gate treats it as a failure. Now it stays
    "undecided", as "hurts" does; a decided verdict of such a fit is still "not identified"."""
    ev = _transfer_ev(False, "spans", [-0.31, 0.0])
    ev["identification"] = {"identified": False, "reasons": ["one item decides the optimum"]}
    v = verdict(ev)
    assert v["code"] == "undecided" and v["text"].startswith("Undecided at 32000 resamples after transfer")
    ev = _transfer_ev(True, "spans", [-0.31, 0.0])
    ev["identification"] = {"identified": False, "reasons": ["one item decides the optimum"]}
    assert verdict(ev)["code"] == "not identified"
    ev = _transfer_ev(True, "below", [-0.31, -0.011])
    ev["identification"] = {"identified": False, "reasons": ["one item decides the optimum"]}
    assert verdict(ev)["code"] == "hurts"
