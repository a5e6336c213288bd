"""Issue 23 confirming break-it pass (a second helper acting as a new user): each defect it found,
on both dialects where the database is involved."""

from __future__ import annotations

import json

from db_helpers import count_rows as _count




def test_jsonl_key_given_twice_is_refused(db_url, run_cli, tmp_path):
    """A JSONL record giving one field twice ({"prompt": "p", ..., "prompt": "q"}) was imported with
    the LAST value, exit 0, nothing said (the json module keeps the last key): now FILE:LINE names
    the field, nothing is written; in nested objects too, and in every JSONL importer."""
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    good = {"task_family": "fam", "prompt": "p", "model": "m", "response": "r"}
    f = tmp_path / "dup.jsonl"
    f.write_text(json.dumps(good) + "\n" + json.dumps(good)[:-1] + ', "prompt": "q"}\n')
    r = run_cli("--database-url", db_url, "import", "jsonl", "--kind", "responses", f)
    assert r.exit_code == 2, r
    assert "dup.jsonl:2: field 'prompt' appears twice" in r.stderr, r.stderr
    assert _count(db_url, "item") == 0
    rating = {**good, "judge": "J", "scale_min": 1, "scale_max": 10, "score": 5}
    f.write_text(json.dumps(rating)[:-1] + ', "judge_params": {"t": 0, "t": 1}}\n')
    r = run_cli("--database-url", db_url, "import", "jsonl", "--kind", "ratings", f)
    assert r.exit_code == 2 and "dup.jsonl:1: field 't' appears twice" in r.stderr, r
    autoj = {"prompt": "p", "response 1": "x", "response 2": "y", "label": 0, "scenario": "s"}
    f.write_text(json.dumps(autoj)[:-1] + ', "label": 1}\n')
    r = run_cli("--database-url", db_url, "import", "autoj", f)
    assert r.exit_code == 2 and "dup.jsonl:1: field 'label' appears twice" in r.stderr, r
    assert _count(db_url, "expert_label") == 0
    # a record without repeats still imports
    f.write_text(json.dumps(good) + "\n")
    assert run_cli("--database-url", db_url, "import", "jsonl", "--kind", "responses", f).exit_code == 0
    assert _count(db_url, "item") == 1


def test_db_migrate_to_blank_or_unresolvable_revision_is_a_usage_error(db_url, run_cli):
    """`db downgrade ''`, `db upgrade ''` and `db downgrade 0004@head` ended in
    'error: URL: AssertionError' (Alembic's bare assert, exit 2 as a database error): now a usage
    error naming the revision, nothing changed."""
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    for args in (("upgrade", ""), ("downgrade", ""), ("downgrade", "  "), ("downgrade", "0004@head")):
        r = run_cli("--database-url", db_url, "db", *args)
        assert r.exit_code == 2, (args, r)
        assert "AssertionError" not in r.output and f"cannot migrate to {args[1]!r}" in r.stderr, (args, r)
    r = run_cli("--database-url", db_url, "db", "current")
    assert r.exit_code == 0 and "up to date" in r.stdout, r


def test_judgebench_third_reward_model_judgment_is_counted(db_url, run_cli, tmp_path):
    """A JudgeBench reward-model record with three judgments imported the first two and dropped
    the third without a word (judgments[:2]), exit 0: now it is counted as not imported, with
    FILE:LINE."""
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    base = {"pair_id": "p1", "original_id": "o", "source": "s", "question": "q", "response_model": "rm",
            "response_A": "a", "response_B": "b", "label": "A>B", "judge_name": "reward_model"}
    judgments = [{"judgment": {"scores": s, "judge_model": "RM"}} for s in ([1.0, 2.0], [2.0, 1.0], [5.0, 5.0])]
    f = tmp_path / "out.jsonl"
    f.write_text(json.dumps({**base, "judgments": judgments}) + "\n")
    r = run_cli("--database-url", db_url, "import", "judgebench", "--format", "json", f)
    assert r.exit_code == 0, r
    skipped = json.loads(r.stdout)["skipped"]
    (reason, entry), = [(k, v) for k, v in skipped.items() if "more than two judgments" in k]
    assert entry["count"] == 1 and entry["where"] == [f"{f}:1"] or entry["where"][0].endswith("out.jsonl:1"), skipped
    assert _count(db_url, "rating") == 4


def test_fit_list_refuses_fitting_options(db_url, run_cli):
    """`fit --list --seed 3` (or --bootstrap, --density, --p-bounds ...) listed the calibrations and
    ignored the fitting options silently, exit 0: they are refused, naming them."""
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    for extra in (("--seed", "3"), ("--density",), ("--bootstrap", "10", "--folds", "2"), ("--length-unit", "words")):
        r = run_cli("--database-url", db_url, "fit", "--list", *extra)
        assert r.exit_code == 2, (extra, r)
        assert extra[0] in r.stderr and "not to --list" in r.stderr, (extra, r)
    r = run_cli("--database-url", db_url, "fit", "--list", "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout) == [], r


def test_alpaca_pair_and_its_reverse_in_one_import_are_refused(db_url, run_cli, tmp_path):
    """`import alpaca-eval --pair C V --pair V C` stored every verbosity pair both ways round
    (1610 rows from 805 instructions; they cancel in the verbosity win-rate), exit 0: the pairs of
    one import were checked against the database only, not against each other. Now refused at
    FILE:LINE naming the other, nothing written."""
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    c, v = tmp_path / "c" / "model_outputs.json", tmp_path / "v" / "model_outputs.json"
    for path, model, n in ((c, "m_concise", 1), (v, "m_verbose", 5)):
        path.parent.mkdir()
        path.write_text(json.dumps([{"dataset": "d", "instruction": f"I{i}", "output": "word " * n * (i + 1),
                                     "generator": model} for i in range(3)]))
    r = run_cli("--database-url", db_url, "import", "alpaca-eval", "--pair", c, v, "--pair", v, c)
    assert r.exit_code == 2, r
    assert "other way round" in r.stderr and "model_outputs.json:" in r.stderr, r.stderr
    assert _count(db_url, "verbosity_pair") == 0 and _count(db_url, "response") == 0
    r = run_cli("--database-url", db_url, "import", "alpaca-eval", "--pair", c, v)
    assert r.exit_code == 0, r
    assert _count(db_url, "verbosity_pair") == 3


def test_serve_negative_seed_is_a_bad_request(db_url, run_cli, tmp_path):
    """`/leaderboard?judge=J&seed=-1` answered 500 'unexpected ValueError: expected non-negative
    integer' (the pages took seeds from -2**31, the CLI from 0): now 400 naming the range, on every
    page that takes a seed."""
    import pytest

    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from judgecal.web import create_app

    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    rows = [{"task_family": "fam", "prompt": f"P{i}", "model": m, "response": m * (i + 1), "judge": "J",
             "scale_min": 1, "scale_max": 10, "score": 3 + i % 3} for i in range(4) for m in ("a", "b")]
    f = tmp_path / "r.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert run_cli("--database-url", db_url, "import", "jsonl", "--kind", "ratings", f).exit_code == 0
    c = TestClient(create_app(db_url))
    for path in ("/leaderboard?judge=J&seed=-1", "/winrates?seed=-1", "/calibration?family=fam&judge=J&seed=-1"):
        r = c.get(path)
        assert r.status_code == 400 and "seed must be between 0 and" in r.text, (path, r.status_code, r.text[-500:])
        assert "unexpected" not in r.text, path
    assert c.get("/leaderboard?judge=J&seed=1").status_code == 200
