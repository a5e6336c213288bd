"""The verbs and views of judgecal: what each command does and what a leaderboard, a
calibration, a report, a judge audit IS, built once from :mod:`judgecal.db` and
:mod:`judgecal.calibrate`.

The Click commands (:mod:`judgecal.cli`), the static report (:mod:`judgecal.report`) and the
web view (``judgecal serve``) are faces over these functions: they parse, render and print,
and never compute a number of their own (docs/architecture in ../shared/DESIGN.md, "Layers").
"""
