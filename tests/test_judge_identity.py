"""Judge identity (issue 19 item 5): a pairwise judge that shares its name with a pointwise judge
is found by the report's pairwise section; 0 and 0.0 in judge parameters are one judge (also
for a row stored before); stats and the ambiguity message say what tells two judges apart."""

from __future__ import annotations

import json

from judgecal.views import importing
from judgecal.db import queries as q
from judgecal.db.engine import get_engine, session_scope


def _files(tmp_path, params_r=None, params_v=None):
    ratings, verdicts = [], []
    for i in range(4):
        prompt = f"Question {i}?"
        for model, text in (("m1", f"short {i}"), ("m2", f"a longer answer to {i}")):
            ratings.append({"task_family": "fam", "prompt": prompt, "model": model, "response": text, "judge": "J",
                            "scale_min": 0, "scale_max": 10, "score": 5 + (model == "m2"),
                            **({"judge_params": params_r} if params_r is not None else {})})
        for pos, pref in (("ab", 1.0), ("ba", 0.0)):
            verdicts.append({"task_family": "fam", "prompt": prompt, "model_a": "m1", "response_a": f"short {i}",
                             "model_b": "m2", "response_b": f"a longer answer to {i}", "judge": "J",
                             "position": pos, "preference": pref,
                             **({"judge_params": params_v} if params_v is not None else {})})
    r, v = tmp_path / "r.jsonl", tmp_path / "v.jsonl"
    r.write_text("".join(json.dumps(x) + "\n" for x in ratings))
    v.write_text("".join(json.dumps(x) + "\n" for x in verdicts))
    return r, v


def test_pairwise_judge_sharing_a_pointwise_judges_name(tmp_path, db_url, run_cli):
    r, v = _files(tmp_path)
    importing.import_generic(r, "ratings", "jsonl", url=db_url)
    importing.import_generic(v, "verdicts", "jsonl", url=db_url)
    out = run_cli("--database-url", db_url, "report", "--format", "json", "--bootstrap", "20")
    assert out.exit_code == 0, out
    sec = json.loads(out.stdout)["pairwise_judges"]
    assert len(sec) == 1 and sec[0]["judge"].startswith("J (id ") and sec[0]["n_pairs"] == 4
    assert sec[0]["consistent"] == 0.0 and sec[0]["first_position_preference"] == 1.0
    from judgecal.views.pairwise_report import collect_pairwise

    assert len(collect_pairwise(judge="J", url=db_url, n_bootstrap=0)) == 1  # the one J with verdicts
    stats = json.loads(run_cli("--database-url", db_url, "stats", "--format", "json").stdout)
    apart = stats[0]["judges_told_apart"]
    assert sorted(apart.values())[0].startswith("mode pairwise") and sorted(apart.values())[1].startswith("mode pointwise")
    table = run_cli("--database-url", db_url, "stats").stdout
    assert "mode pairwise" in table and "mode pointwise" in table
    # the score board reads ratings: the name resolves to the one J with ratings (issue 32); a command that reads
    # both (report --judge J over every family) lists them with what tells them apart
    res = run_cli("--database-url", db_url, "leaderboard", "--judge", "J", "--format", "json")
    assert res.exit_code == 0 and json.loads(res.stdout)["judge"] == "J", res
    res = run_cli("--database-url", db_url, "export", "ratings", str(tmp_path / "x.jsonl"), "--judge", "J")
    assert res.exit_code == 2 and "what tells them apart" in res.stderr and "mode pairwise" in res.stderr


def test_zero_and_zero_point_zero_are_one_judge(tmp_path, db_url):
    r, _ = _files(tmp_path, params_r={"temperature": 0})
    importing.import_generic(r, "ratings", "jsonl", url=db_url)
    r2, _ = _files(tmp_path, params_r={"temperature": 0.0})
    again = importing.import_generic(r2, "ratings", "jsonl", url=db_url)
    assert again["added"]["rating"] == 0
    engine = get_engine(db_url)
    with session_scope(engine) as s:
        judges = list(s.scalars(q.select(q.m.Judge)))
        assert len(judges) == 1 and judges[0].params == {"temperature": 0}
    engine.dispose()


def test_a_row_stored_with_the_old_key_is_reused(sqlite_url):
    from judgecal.db.engine import get_engine

    engine = get_engine(sqlite_url)
    fields = dict(name="old", model="m", endpoint="e", prompt_name="p", prompt_sha256="0" * 64, mode="pointwise",
                  scale_min=0.0, scale_max=10.0)
    with session_scope(engine) as s:
        # as judgecal stored it before: the key made from the parameters as given
        ident = {"model": "m", "endpoint": "e", "prompt_sha256": "0" * 64, "mode": "pointwise",
                 "params": {"max_tokens": 512, "temperature": 0.0}, "scale_min": 0.0, "scale_max": 10.0}
        q.insert_ignore(s, q.m.Judge, [dict(fields, params=ident["params"], judge_key=q.key_of(ident),
                                            created_at=q.m.utcnow())])
    with session_scope(engine) as s:
        old = s.scalar(q.select(q.m.Judge.id))
        again = q.get_or_create_judge(s, **fields, params={"temperature": 0, "max_tokens": 512})
        assert again.id == old
        other = q.get_or_create_judge(s, **fields, params={"temperature": 0.5, "max_tokens": 512})
        assert other.id != old
        assert q.judge_differences([again, other]) == {old: 'params {"max_tokens":512,"temperature":0.0}',
                                                      other.id: 'params {"max_tokens":512,"temperature":0.5}'}
    engine.dispose()
