"""Pure calibration maths (numpy/scipy/statsmodels; no I/O, no database).

* :mod:`.penalty`   the seed formula, L = 0 handling, the information-density exemption
* :mod:`.fit`       L-BFGS-B fits of gamma and p (Bradley-Terry pairwise, least squares pointwise)
* :mod:`.baselines` raw, linear, polylog, LOWESS (Huang et al. 2025), lc_glm (Dubois et al. 2024)
* :mod:`.metrics`   verbosity win-rate, expert agreement, length preference, slope, rank metrics
* :mod:`.resample`  item-grouped CV folds, bootstrap multiplicities, batched weighted metrics
* :mod:`.evaluate`  every method in-sample, cross-validated and bootstrapped: the `fit`/`report` core
  (plus the lean, the best method out of sample, the length-only rule, judge ties broken)
* :mod:`.select`    nested cross-validated choice of method, bounds and length unit
* :mod:`.transfer`  a stored calibration applied to another family's labels
* :mod:`.data`      input containers PairData, PointData, VerbosityData
* :mod:`.ranking`   leaderboard statistics

The maths, every formula's source and the evaluation output keys: docs/calibration.md.
"""
