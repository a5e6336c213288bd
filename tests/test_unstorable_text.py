"""Text that no database stores alike (a NUL character: PostgreSQL refuses it; an unpaired
surrogate: not UTF-8) coming from a judge's endpoint or an LLMBar result file. Before: a rating
job died with "unexpected DataError" on PostgreSQL (NUL) or "unexpected UnicodeEncodeError" on
both dialects (surrogate), and LLMBar's raw outputs did the same at import."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select

sys.path.insert(0, str(Path(__file__).parent))
from stub_openai import StubServer  # noqa: E402

from db_helpers import count_rows as _count  # noqa: E402
from judgecal.db import models as m  # noqa: E402


@pytest.mark.parametrize("text,expected,n", [
    ("plain", "plain", 0), ("a\x00b", "a\ufffdb", 1), ("\ud800x\udfff", "\ufffdx\ufffd", 2),
    ("é 😀 \u2028", "é 😀 \u2028", 0), ("", "", 0),
])
def test_storable_known_answers(text, expected, n):
    from judgecal.judge.client import storable

    assert storable(text) == (expected, n)
    expected.encode("utf-8")  # what it gives is UTF-8 text without NUL


@pytest.mark.parametrize("answer,stored", [
    ("Fine.\x00 Rating: [[7]]", "Fine.\ufffd Rating: [[7]]"),
    ("Fine \ud800 Rating: [[7]]", "Fine \ufffd Rating: [[7]]"),
])
def test_endpoint_text_no_database_stores_is_stored_replaced_and_reported(db_url, tmp_path, answer, stored):
    from judgecal.views import importing
    from judgecal.views.rate import notices, run_rate

    rows = [{"task_family": "nul", "prompt": f"q{i}", "model": "m", "response": f"answer {i}"} for i in range(2)]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    importing.import_generic(path, "responses", "jsonl", url=db_url)
    with StubServer(answer=answer) as s:
        out = run_rate(judge="stub-judge", base_url=s.base_url, database_url=db_url, progress=False,
                       task_families=["nul"], concurrency=2)
    assert out["this_run"]["ok"] == 2 and out["this_run"]["failed"] == 0
    assert out["raw_output_replaced"] == 2
    assert any("gave 2 answer(s) or error(s) holding a NUL character or an unpaired surrogate" in line
               for line in notices(out))
    engine = create_engine(db_url)
    with engine.connect() as conn:
        got = sorted(tuple(r) for r in conn.execute(select(m.Rating.status, m.Rating.score, m.Rating.raw_output)))
    engine.dispose()
    assert got == [("ok", 7.0, stored)] * 2  # the score read from the answer as given


@pytest.mark.parametrize("value,problem", [('"x\\u0000"', "contains a NUL character"),
                                           ('"\\ud800"', "contains an unpaired surrogate")])
def test_llmbar_raw_output_no_database_stores_is_refused(db_url, run_cli, tmp_path, value, problem):
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    rec = {"input": "q", "output_1": "a", "output_2": "bb", "label": 1}
    folder = tmp_path / "set1"
    folder.mkdir()
    (folder / "dataset.json").write_text(json.dumps([rec]))
    (folder / "ratings_j.json").write_text(
        json.dumps([rec])[:-2] + ', "results": [{"score_1": ' + value + ', "score_2": 3}]}]')
    r = run_cli("--database-url", db_url, "import", "llmbar", folder)
    assert r.exit_code == 2 and f"ratings_j.json:1: results[-1]['score_1'] {problem}" in r.stderr, r
    assert "unexpected" not in r.stderr
    assert _count(db_url, "rating") == 0 and _count(db_url, "response") == 0


def test_render_error_text_is_stored_but_not_blamed_on_the_endpoint(db_url, tmp_path):
    """A template whose render error holds a NUL or surrogate (helper-11): the error is stored
    with U+FFFD in their place, and not counted as the endpoint's text (no call was made)."""
    from judgecal.views import importing
    from judgecal.views.rate import exit_status, notices, run_rate

    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"task_family": "nul", "prompt": "q", "model": "m", "response": "a"}) + "\n")
    importing.import_generic(path, "responses", "jsonl", url=db_url)
    base = (Path(__file__).parent.parent / "prompts" / "pointwise_v1.md").read_text(encoding="utf-8")
    hostile = tmp_path / "hostile.md"
    hostile.write_text(base.replace("name: pointwise_v1", "name: hostile_v1").replace(
        "{{ question }}", "{{ question }}{{ ('{0:' ~ '\\x00\\ud800}').format(1) }}", 1), encoding="utf-8")
    with StubServer() as s:
        out = run_rate(judge="stub-judge", base_url=s.base_url, database_url=db_url, progress=False,
                       task_families=["nul"], prompt=str(hostile))
        assert s.requests == 0
    assert out["this_run"]["failed"] == 1 and out["failed_by_cause"]["render"] == 1
    assert out["raw_output_replaced"] == 0 and notices(out) == []
    engine = create_engine(db_url)
    with engine.connect() as conn:
        (error,) = conn.execute(select(m.Rating.error)).one()
    engine.dispose()
    assert error.startswith("cannot render the prompt") and "\ufffd\ufffd" in error
    assert "`judgecal export ratings`" in exit_status(out)[1]


def test_llmbar_completion_text_is_checked_and_the_finish_reason_is_not(db_url, run_cli, tmp_path, data_dir):
    """A pairwise LLMBar result: a NUL in the completion text (stored as the raw output) is
    refused naming ['completion'][0]; one in the finish reason (stored only escaped, as its
    repr, in an unparsed verdict's error) is read, as it is for the rating protocols."""
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    data = data_dir / "llmbar_repo" / "Dataset" / "LLMBar" / "Natural"
    for where, value in (("[0] (the completion text) contains a NUL", ["Output (a)\u0000", "stop"]),
                         (None, ["Output (a)", "st\u0000op"])):
        folder = tmp_path / ("text" if where else "finish") / "Natural"
        (folder / "evaluators" / "j" / "Vanilla").mkdir(parents=True)
        shutil.copy(data / "dataset.json", folder / "dataset.json")
        records = json.loads((data / "dataset.json").read_text(encoding="utf-8"))
        results = [dict(r, output=None, results=[{"swap = False": {"winner": "1", "completion": ["Output (a)", "stop"]},
                                                  "swap = True": {"winner": "2", "completion": ["Output (b)", "stop"]}}])
                   for r in records]
        results[3]["results"][0]["swap = False"]["completion"] = value
        (folder / "evaluators" / "j" / "Vanilla" / "result.json").write_text(json.dumps(results), encoding="utf-8")
        r = run_cli("--database-url", db_url, "import", "llmbar", folder)
        if where:
            assert r.exit_code == 2 and f"result.json:1: results[-1]['swap = False']['completion']{where}" in r.stderr, r
            assert _count(db_url, "pairwise_judgment") == 0
        else:
            assert r.exit_code == 0, r
