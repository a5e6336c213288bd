"""Benchmark: fit the seed-formula calibration on 1,000,000 synthetic ratings in 10 families.

Simulation per family f (100,000 ratings = 50,000 expert-labelled pairs):
  lengths L ~ LogNormal(ln m_f, 0.8) tokens (m_f the family's typical length), L_ref = median;
  true quality q ~ N(5, 1.5); judge score S = q + gamma_f * sign(r) |r|^p_f + N(0, 0.3),
  r = ln(L / L_ref) (the planted length term of DESIGN.md's seed formula);
  expert outcome: a beats b with probability sigmoid(1.5 (q_a - q_b)), a tie (0.5) when
  |q_a - q_b| < 0.05.
Every family is fitted with judgecal.calibrate.fit.fit_pairwise (L-BFGS-B, analytic gradient,
default starting points); the script prints planted vs recovered gamma and p per family, the
seconds of all fits together (goal: <= 5 s on 2 cores), and exits 1 if a recovery misses the
tolerance (|gamma error| <= 0.05 + 10 %, |p error| <= 0.1).

Run: .venv/bin/python benchmarks/bench_fit.py [--ratings 1000000] [--families 10] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from judgecal.calibrate.fit import fit_pairwise


def simulate(n_pairs: int, gamma: float, p: float, median_len: float, rng):
    """Planted-penalty pairs: (score_a, score_b, len_a, len_b, outcome, l_ref)."""
    la = np.exp(rng.normal(np.log(median_len), 0.8, n_pairs))
    lb = np.exp(rng.normal(np.log(median_len), 0.8, n_pairs))
    l_ref = float(np.median(np.concatenate([la, lb])))

    def term(length):
        r = np.log(length / l_ref)
        return gamma * np.sign(r) * np.abs(r) ** p

    qa, qb = rng.normal(5.0, 1.5, n_pairs), rng.normal(5.0, 1.5, n_pairs)
    sa = qa + term(la) + rng.normal(0, 0.3, n_pairs)
    sb = qb + term(lb) + rng.normal(0, 0.3, n_pairs)
    y = (rng.random(n_pairs) < 1.0 / (1.0 + np.exp(-1.5 * (qa - qb)))).astype(float)
    y[np.abs(qa - qb) < 0.05] = 0.5
    return sa, sb, la, lb, y, l_ref


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ratings", type=int, default=1_000_000)
    ap.add_argument("--families", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    n_pairs = args.ratings // args.families // 2
    planted_g = np.linspace(0.2, 1.0, args.families)
    planted_p = np.linspace(1.05, 1.45, args.families)[rng.permutation(args.families)]
    medians = np.geomspace(150, 600, args.families)
    data = [simulate(n_pairs, g, p, m, rng) for g, p, m in zip(planted_g, planted_p, medians)]

    t0 = time.perf_counter()
    fits = [fit_pairwise(sa, sb, la, lb, y, l_ref=l_ref, scale=(0, 10))
            for sa, sb, la, lb, y, l_ref in data]
    seconds = time.perf_counter() - t0

    print(f"{args.families} families x {2 * n_pairs} ratings ({n_pairs} pairs each)")
    print(f"{'family':>6} {'L_ref':>7} {'gamma':>7} {'fitted':>7} {'p':>6} {'fitted':>7} {'conv':>5}")
    ok = True
    for i, (g, p, fit) in enumerate(zip(planted_g, planted_p, fits)):
        good = abs(fit.gamma - g) <= 0.05 + 0.1 * g and abs(fit.p - p) <= 0.1
        ok &= good and fit.converged
        print(f"{i:>6} {fit.l_ref:>7.1f} {g:>7.3f} {fit.gamma:>7.3f} {p:>6.3f} {fit.p:>7.3f} "
              f"{str(fit.converged):>5}{'' if good else '  MISS'}")
    print(f"fit time, all families: {seconds:.2f} s ({seconds / args.families:.3f} s a family)")
    print("recovery:", "all within tolerance" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
