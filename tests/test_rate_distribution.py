"""Judgment distributions from an API judge (issue 22 item 1), on SQLite and PostgreSQL against
the stub server: ``rate --logprobs`` asks for ``top_logprobs`` (default 20, ``--top-logprobs N``
1..20) and stores the verdict's distribution over the scale (normalised, with the mass outside
it), its mean, and for pairwise verdicts P(a)/P(b)/P(tie) in canonical order; a server that
returns no logprobs is named and counted; exports carry the distribution and generic import
reads it back unchanged."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stub_openai import StubServer  # noqa: E402

from judgecal.db import models as m  # noqa: E402
from judgecal.judge import distribution as D  # noqa: E402

FAMILY = "dist"
ITEMS = [f"Question {i}: what is {i} + {i}?" for i in range(3)]


def _responses(tmp_path: Path) -> Path:
    rows = [{"task_family": FAMILY, "prompt": q, "model": model, "response": f"{model} says {2 * i}"}
            for i, q in enumerate(ITEMS) for model in ("m1", "base")]
    path = tmp_path / "responses.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture()
def seeded(db_url, tmp_path):
    from judgecal.views import importing

    importing.import_generic(_responses(tmp_path), "responses", "jsonl", url=db_url)
    return db_url


def _rate(url, server, **kw):
    from judgecal.views.rate import run_rate

    return run_rate(judge="stub-judge", base_url=server.base_url, database_url=url, progress=False,
                    task_families=[FAMILY], concurrency=2, **kw)


def _rows(url, table, judge_id):
    eng = create_engine(url)
    T = table
    cols = [T.status, T.distribution] + ([T.position, T.verdict, T.preference] if T is m.PairwiseJudgment
                                         else [T.score, T.expected_score])
    with eng.connect() as conn:
        rows = [tuple(r) for r in conn.execute(select(*cols).where(T.judge_id == judge_id).order_by(T.id))]
    eng.dispose()
    return rows


def test_pointwise_distribution_known_answer(seeded):
    """Stub alternatives of the verdict token: 9 (0.5), 10 (0.25), 3 (0.05) and ' the' (0.2,
    not a score): probs 9 = 0.625, 10 = 0.3125, 3 = 0.0625 over the scale, 0 elsewhere,
    outside 0.2, mean 9.0625; top_logprobs 20 requested by default."""
    top = {"9": math.log(0.5), "10": math.log(0.25), "3": math.log(0.05), " the": math.log(0.2)}
    with StubServer(answer="Good.\nRating: [[9]]", verdict_top=top) as s:
        out = _rate(seeded, s, logprobs=True)
        assert {b["top_logprobs"] for b in s.bodies} == {20} and all(b["logprobs"] is True for b in s.bodies)
    assert out["logprobs"] == {"with": 6, "without": 0, "no_verdict_token": 0, "no_verdict_alternative": 0,
                               "distributions": 6, "refused": 0, "dropped": 0, "top_logprobs": 20}
    rows = _rows(seeded, m.Rating, out["judge_id"])
    assert len(rows) == 6
    for status, dist, score, expected in rows:
        assert status == "ok" and score == 9.0
        assert list(dist["probs"]) == [str(v) for v in range(1, 11)]  # every score of the scale, in order
        want = {"9": 0.625, "10": 0.3125, "3": 0.0625}
        assert dist["probs"] == pytest.approx({str(v): want.get(str(v), 0.0) for v in range(1, 11)}, abs=1e-12)
        assert sum(dist["probs"].values()) == pytest.approx(1.0, abs=1e-12)
        assert dist["outside"] == pytest.approx(0.2, abs=1e-12)
        assert (dist["source"], dist["k"]) == ("top_logprobs", 4)
        assert expected == pytest.approx(9 * 0.625 + 10 * 0.3125 + 3 * 0.0625)


def test_top_logprobs_option_is_sent_and_tokens_sum_per_value(seeded):
    """--top-logprobs 5 is what the request asks; ' 7' and '7' are the same score (their
    mass adds up): probs 7 = (0.3 + 0.3) / 0.8 = 0.75, 8 = 0.25, outside 0.2."""
    top = {"7": math.log(0.3), " 7": math.log(0.3), "8": math.log(0.2), "x": math.log(0.2)}
    with StubServer(answer="[[7]]", verdict_top=top) as s:
        out = _rate(seeded, s, logprobs=True, top_logprobs=5, limit=1)
        assert [b["top_logprobs"] for b in s.bodies] == [5]
    (status, dist, score, expected), = _rows(seeded, m.Rating, out["judge_id"])
    assert dist["probs"]["7"] == pytest.approx(0.75) and dist["probs"]["8"] == pytest.approx(0.25)
    assert dist["outside"] == pytest.approx(0.2) and expected == pytest.approx(7.25)


def test_pairwise_distribution_canonical_in_both_orders(seeded):
    """Letters shown A (0.5), B (0.3), C (0.1), other (0.1): in order 'ab' a = 5/9, b = 3/9,
    tie = 1/9; in order 'ba' the first shown is response_b, so a = 3/9, b = 5/9; outside 0.1;
    the stored preference is the distribution's P(a) + P(tie)/2."""
    top = {"A": math.log(0.5), "B": math.log(0.3), "C": math.log(0.1), "x": math.log(0.1)}
    with StubServer(answer="A is better. [[A]]", verdict_top=top) as s:
        out = _rate(seeded, s, baseline="base", logprobs=True)
    rows = _rows(seeded, m.PairwiseJudgment, out["judge_id"])
    assert len(rows) == 6 and out["logprobs"]["distributions"] == 6
    for status, dist, position, verdict, pref in rows:
        first, second = 5 / 9, 3 / 9
        a, b = (first, second) if position == "ab" else (second, first)
        assert status == "ok" and verdict == ("a" if position == "ab" else "b")
        assert dist["probs"] == pytest.approx({"a": a, "b": b, "tie": 1 / 9}, abs=1e-12)
        assert dist["outside"] == pytest.approx(0.1, abs=1e-12)
        assert pref == pytest.approx(a + 0.5 / 9, abs=1e-12) == pytest.approx(D.preference(dist))


class _NoLogprobsStub(StubServer):
    """A server that accepts logprobs=true and answers without them (as `transformers serve` does)."""

    def _logprobs(self, text):
        return None


def test_server_without_logprobs_is_named_and_counted(seeded, run_cli):
    with _NoLogprobsStub(answer="[[6]]") as s:
        r = run_cli("--database-url", seeded, "rate", "--judge", "stub-judge", "--base-url", s.base_url,
                    "--task-family", FAMILY, "--logprobs", "--format", "json")
    assert r.exit_code == 0, r
    summary = json.loads(r.stdout)
    assert summary["logprobs"]["without"] == 6 and summary["logprobs"]["distributions"] == 0
    assert f"the endpoint {summary['endpoint']} returned no logprobs for 6 of 6 answered call(s)" in r.stderr
    assert "Traceback" not in r.output
    rows = _rows(seeded, m.Rating, summary["judge_id"])
    assert all(st == "ok" and dist is None and score == 6.0 and exp is None for st, dist, score, exp in rows)


def test_no_verdict_token_is_counted_not_an_error(seeded):
    with StubServer(answer="I cannot rate this.") as s:
        out = _rate(seeded, s, logprobs=True, limit=2)
    assert out["logprobs"]["no_verdict_token"] == 2 and out["logprobs"]["distributions"] == 0


@pytest.mark.parametrize("args,needle", [
    (["--top-logprobs", "21"], "--top-logprobs must be an integer from 1 to 20"),
    (["--top-logprobs", "0"], "--top-logprobs must be an integer from 1 to 20"),
    (["--logprobs", "--top-logprobs", "-3"], "--top-logprobs must be an integer from 1 to 20"),
    (["--verdict-prefix", "[["], "--verdict-prefix applies to --local only"),
    (["--local-dtype", "bfloat16"], "--local-dtype applies to --local only"),
])
def test_bad_logprob_options_are_one_line(sqlite_url, run_cli, args, needle):
    r = run_cli("--database-url", sqlite_url, "rate", "--judge", "j", "--base-url", "http://127.0.0.1:9/v1", *args)
    assert r.exit_code == 2, r
    assert needle in r.stderr and "Traceback" not in r.output and len(r.stderr.strip().splitlines()) == 1, r


@pytest.mark.parametrize("args,needle", [
    (["--top-logprobs", "5"], "--top-logprobs does not apply with --local"),
    (["--base-url", "http://127.0.0.1:9/v1"], "--base-url does not apply with --local"),
    (["--judge", "other"], "with --local the judge is the --local model"),
    (["--samples", "2"], "--samples: the local distribution is deterministic"),
    (["--temperature", "0.7"], "--temperature: the local path stores the whole distribution"),
])
def test_bad_local_options_are_one_line(sqlite_url, run_cli, args, needle):
    r = run_cli("--database-url", sqlite_url, "rate", "--local", "smollm2", *args)
    assert r.exit_code == 2, r
    assert needle in r.stderr and "Traceback" not in r.output and len(r.stderr.strip().splitlines()) == 1, r


def test_missing_judge_without_local(sqlite_url, run_cli):
    r = run_cli("--database-url", sqlite_url, "rate", "--base-url", "http://127.0.0.1:9/v1")
    assert r.exit_code == 2 and "--judge" in r.stderr and "Traceback" not in r.output, r


def _without_source(path: Path, fmt: str) -> list[dict]:
    import csv

    if fmt == "jsonl":
        rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    else:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    return [{k: v for k, v in r.items() if k != "source"} for r in rows]


def test_export_import_round_trip_keeps_distributions(seeded, tmp_path, sqlite_url):
    """Ratings and verdicts with distributions, exported as JSONL and CSV, imported into a
    fresh database and exported again: the same, distributions included (ratings byte for
    byte; verdicts but their source, which an import sets to the file)."""
    from judgecal.views import importing
    from judgecal.views.export import export

    top_p = {"9": math.log(0.5), "10": math.log(0.25), "x": math.log(0.25)}
    with StubServer(answer="[[9]]", verdict_top=top_p) as s:
        _rate(seeded, s, logprobs=True)
    top_v = {"A": math.log(0.6), "C": math.log(0.2), "x": math.log(0.2)}
    with StubServer(answer="[[A]]", verdict_top=top_v) as s:
        _rate(seeded, s, baseline="base", logprobs=True)
    for fmt in ("jsonl", "csv"):
        other = f"sqlite:///{tmp_path / f'other_{fmt}.db'}"
        for kind in ("ratings", "verdicts"):
            first = tmp_path / f"{kind}.{fmt}"
            assert export(kind, fmt, first, seeded) == 6
            importing.import_generic(first, kind, fmt, url=other)
            again = tmp_path / f"{kind}_again.{fmt}"
            assert export(kind, fmt, again, other) == 6
            if kind == "ratings":
                assert again.read_bytes() == first.read_bytes(), (kind, fmt)
            else:  # an imported verdict records its file as source (a collected one has none)
                assert _without_source(again, fmt) == _without_source(first, fmt)
            if fmt == "jsonl":
                rows = [json.loads(x) for x in first.read_text().splitlines()]
                assert all(r["distribution"]["outside"] == pytest.approx(0.25 if kind == "ratings" else 0.2)
                           for r in rows)
                if kind == "ratings":
                    assert all(r["expected_score"] == pytest.approx(9 + 1 / 3) for r in rows)
        # importing the same files again adds nothing and is no conflict
        for kind in ("ratings", "verdicts"):
            importing.import_generic(tmp_path / f"{kind}.{fmt}", kind, fmt, url=other)


def test_import_refuses_bad_distributions(sqlite_url, tmp_path):
    from judgecal.errors import InputError
    from judgecal.views import importing

    base = {"task_family": FAMILY, "prompt": "q", "model": "m", "response": "r", "judge": "j", "scale_min": 1,
            "scale_max": 10, "score": 7}
    bad = [
        ({"distribution": {"probs": {"7": 0.5}}}, "'probs' must sum to 1"),
        ({"distribution": {"probs": {"11": 1.0}}}, "'probs' key '11' is not a verdict"),
        ({"distribution": {"probs": {"7": 1.0}, "outside": 1.5}}, "'outside' must be a probability"),
        ({"distribution": {"probs": {"7": 1.0}, "colour": "red"}}, "unknown key(s) 'colour'"),
        ({"distribution": "{not json"}, "is not valid JSON"),
        ({"distribution": {"probs": {"7": 1.0}}, "expected_score": 6}, "contradicts the distribution"),
        ({"status": "failed", "score": None, "distribution": {"probs": {"7": 1.0}}}, "a failed rating carries no"),
    ]
    for i, (extra, needle) in enumerate(bad):
        path = tmp_path / f"bad{i}.jsonl"
        path.write_text(json.dumps({**base, **extra}) + "\n")
        with pytest.raises(InputError, match=None) as exc:
            importing.import_generic(path, "ratings", "jsonl", url=sqlite_url)
        assert needle in str(exc.value) and f"bad{i}.jsonl" in str(exc.value), (needle, str(exc.value))
    # a good one: expected_score derived from the distribution
    path = tmp_path / "good.jsonl"
    path.write_text(json.dumps({**base, "distribution": {"probs": {"7": 0.5, "8": 0.5}, "outside": 0.0}}) + "\n")
    importing.import_generic(path, "ratings", "jsonl", url=sqlite_url)
    eng = create_engine(sqlite_url)
    with eng.connect() as conn:
        (exp,) = conn.execute(select(m.Rating.expected_score)).one()
    eng.dispose()
    assert exp == 7.5
