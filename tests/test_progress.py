"""The progress line of long steps (issue 21 item 6): shown on a terminal with each phase the
view reports, nothing at all when stderr is a pipe."""

from __future__ import annotations

import io

from rich.console import Console

from judgecal.progress import no_step, steps


def test_progress_on_a_terminal_shows_each_phase():
    buf = io.StringIO()
    con = Console(file=buf, force_terminal=True, width=100)
    with steps(con, "fit llmbar/Natural / GPT-4") as step:
        assert step is not no_step
        step("reading llmbar/Natural's ratings, labels and lengths")
        step("fitting every method (5-fold CV, 1000 bootstrap resamples)")
    shown = buf.getvalue()
    assert "fit llmbar/Natural / GPT-4: fitting every method (5-fold CV, 1000 bootstrap resamples) (0 s)" in shown


def test_no_progress_in_a_pipe():
    buf = io.StringIO()
    con = Console(file=buf, force_terminal=False)
    with steps(con, "report") as step:
        assert step is no_step
        step("anything")
    assert buf.getvalue() == ""


def test_fit_reports_its_phases(tmp_path):
    """run_fit calls step at each phase: reading, the nested selection's lengths, fitting, storing."""
    import json

    from judgecal.views import fitting, importing

    url = f"sqlite:///{tmp_path / 'p.db'}"
    lines = []
    for i in range(12):
        a, b = "short answer " * (1 + i % 3), "a much longer answer " * (4 + i % 5)
        lines.append({"task_family": "f", "prompt": f"q{i}", "response_a": a, "response_b": b,
                      "model_a": "m1", "model_b": "m2", "preference": "a" if i % 3 else "b"})
    src = tmp_path / "pairs.jsonl"
    src.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    importing.import_generic(src, "labels", "jsonl", url=url)
    ratings = tmp_path / "ratings.jsonl"
    ratings.write_text("\n".join(json.dumps({"task_family": "f", "prompt": x["prompt"], "model": m, "response": r,
                                             "judge": "J", "score": float(3 + len(r) % 5), "scale_min": 0, "scale_max": 9})
                                 for x in lines for m, r in (("m1", x["response_a"]), ("m2", x["response_b"]))) + "\n")
    importing.import_generic(ratings, "ratings", "jsonl", url=url)
    seen = []
    fitting.run_fit("f", "J", url=url, length_unit="words", n_bootstrap=0, folds=2, step=seen.append)
    assert seen[0] == "reading f's ratings, labels and lengths"
    assert any(s.startswith("fitting every method (2-fold CV, 0 bootstrap resamples") for s in seen)
    assert seen[-1] == "storing the calibration"
