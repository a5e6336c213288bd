"""Migrations never lose data silently (issue 23 item 1), on SQLite and PostgreSQL.

upgrade -> downgrade -> upgrade with real data in every table: every row and every value comes
back, except what the downgrade documents (judgecal.db.migration_losses) and counts; such a
downgrade is refused without ``yes`` (``--yes``), changing nothing."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import select

from judgecal.db import engine as eng
from judgecal.db import migrate, migration_losses
from judgecal.db import models as m
from judgecal.errors import DataLossError

T0 = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)


def test_every_revision_says_what_its_downgrade_loses():
    revs = {r.revision for r in ScriptDirectory.from_config(migrate.alembic_config()).walk_revisions()}
    assert revs <= set(migration_losses.LOSSES), revs - set(migration_losses.LOSSES)


def _fill(engine) -> None:
    """A few rows in every table, with what each migration added used (and not used)."""
    from sqlalchemy.orm import Session

    with Session(engine) as s, s.begin():
        fam = m.TaskFamily(id=1, name="chat ünïcode", l_ref=150.5, description="d", created_at=T0)
        s.add(fam)
        s.flush()
        s.add(m.Item(id=1, task_family_id=1, external_id="q1", prompt="Why? \u2014 é", prompt_sha256="a" * 64,
                     reference="ref", source="f.jsonl", created_at=T0))
        s.flush()
        for rid, model in ((1, "m1"), (2, "base"), (3, "m2")):
            s.add(m.Response(id=rid, item_id=1, model=model, text=f"text {rid} " * rid, text_sha256=f"{rid}" * 64,
                             n_bytes=7 * rid, n_chars=7 * rid, n_words=2 * rid, created_at=T0))
        s.flush()
        s.add(m.TokenLength(response_id=1, tokenizer="hf:x", n_tokens=5))
        s.add(m.Judge(id=1, judge_key="k" * 64, name="j", model="jm", endpoint="http://127.0.0.1:1/v1", prompt_name="p",
                      prompt_sha256="s" * 64, mode="pairwise", params={"temperature": 0.0}, scale_min=1, scale_max=10,
                      created_at=T0))
        s.flush()
        s.add(m.Rating(id=1, response_id=1, judge_id=1, sample_index=0, status="ok", raw_output="[[7]]", score=7.0,
                       expected_score=6.5, distribution={"probs": {"6": 0.5, "7": 0.5}, "outside": 0.1,
                                                         "source": "top_logprobs", "k": 20}, attempts=1, latency_s=0.25, prompt_tokens=10, completion_tokens=2,
                       created_at=T0, updated_at=T0))
        s.add(m.Rating(id=2, response_id=2, judge_id=1, sample_index=0, status="unparsed", raw_output="?",
                       error="no score", attempts=3, created_at=T0))
        # collected verdicts whose preference the upgrade refills: kept whole
        s.add(m.PairwiseJudgment(id=1, response_a_id=1, response_b_id=2, judge_id=1, position="ab", status="ok",
                                 verdict="a", preference=1.0, attempts=1, created_at=T0,
                                 distribution={"probs": {"a": 0.9, "b": 0.1, "tie": 0.0}, "outside": 0.0,
                                               "source": "forward", "prefix": "[[", "greedy": "a"}))
        s.add(m.PairwiseJudgment(id=2, response_a_id=1, response_b_id=2, judge_id=1, position="ba", status="ok",
                                 verdict="tie", preference=0.5, attempts=1, created_at=T0))
        # an imported verdict in a recorded order with a soft preference, a baseline side and its file
        s.add(m.PairwiseJudgment(id=3, response_a_id=3, response_b_id=2, judge_id=1, position="ab", status="ok",
                                 verdict="a", preference=0.75, baseline_side="b", source="ann.json", created_at=T0))
        # an imported verdict without a recorded order (AlpacaEval)
        s.add(m.PairwiseJudgment(id=4, response_a_id=3, response_b_id=1, judge_id=1, position="na", status="ok",
                                 verdict="b", preference=0.2, baseline_side="b", source="ann.json", created_at=T0))
        s.add(m.ExpertLabel(id=1, label_key="l" * 64, kind="pointwise", response_id=1, score=4.0, scale_min=1,
                            scale_max=5, annotator="expert", source="labels.jsonl", created_at=T0))
        s.add(m.ExpertLabel(id=2, label_key="L" * 64, kind="pairwise", response_a_id=1, response_b_id=3,
                            preference="tie", annotator="a2", source="pairs.jsonl", created_at=T0))
        s.add(m.VerbosityPair(id=1, item_id=1, concise_response_id=1, verbose_response_id=3, source="v.jsonl",
                              created_at=T0))
        s.add(m.Calibration(id=1, task_family_id=1, judge_id=1, method="polylog", objective="pairwise",
                            length_unit="tokens", tokenizer="hf:x", l_ref=150.5, gamma=0.3, p=1.2, p_min=1.0,
                            p_max=1.5, scale_min=1, scale_max=10, n=40, converged=True, loss=0.5, folds=5,
                            n_bootstrap=100, seed=2147483647, density_exemption=False, params={"gamma_ci": [0.1, 0.5]},
                            metrics={"raw": {"agreement": 0.58}}, data={"n_pairs": 40}, judgecal_version="0.1",
                            created_at=T0))
        s.add(m.McRun(id=1, model="smol", task="copa", task_path=None, dataset_sha256="d" * 64, backend="hf",
                      n_items=2, settings={"dtype": "float32"}, metrics={"acc": {"value": 0.5, "stderr": 0.1}},
                      diagnostics={}, created_at=T0))
        s.flush()
        choices = [{"ll": -1.5, "ll_null": None, "n_tokens": 2, "n_chars": 5, "n_bytes": 5, "is_greedy": True}]
        s.add(m.McItemResult(id=1, run_id=1, item_index=0, gold=0, choices=choices, pred_acc=0, pred_acc_norm=0,
                             pred_acc_bytes=0, pred_acc_per_token=0, pred_acc_pmi=None))  # a judgecal task file
        s.add(m.McItemResult(id=2, run_id=1, item_index=1, gold=1, choices=choices, pred_acc=0, pred_acc_norm=0,
                             pred_acc_bytes=0, pred_acc_per_token=0, pred_acc_pmi=0, task="copa", doc_id=7,
                             golds=[0, 1]))
        # the content hashes of two imported files (migration 0005): one without --task-family, one with
        s.add(m.ImportedFile(id=1, importer="autoj", family_option="", sha256="e" * 64,
                             path="/data/auto-j/testdata_pairwise.jsonl", n_bytes=3_000_000_000, created_at=T0))
        s.add(m.ImportedFile(id=2, importer="jsonl:labels", family_option="chat ünïcode", sha256="f" * 64,
                             path="/data/labels ünïcode.jsonl", n_bytes=120, created_at=T0))


def _snapshot(engine) -> dict[str, list[dict]]:
    out = {}
    with engine.connect() as c:
        for table in m.Base.metadata.sorted_tables:
            if table.name in migration_losses.DERIVED_TABLES:  # computed from the rest (0006): nobody's data
                continue
            cols = list(table.columns)
            rows = c.execute(select(*cols).order_by(*table.primary_key.columns)).all()
            out[table.name] = [
                {col.name: (json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v) for col, v in zip(cols, r)}
                for r in rows]
    return out


def _expected_after(before: dict, target: str) -> dict:
    """What must come back after downgrading to ``target`` and upgrading again."""
    want = json.loads(json.dumps(before, default=str))
    if target == "base":
        return {t: [] for t in want}
    want["imported_file"] = []  # 0005 undone: the table of file hashes is dropped (created empty again)
    if target in ("0003", "0002", "0001"):  # 0004 undone: the judgment distributions are dropped
        for table in ("rating", "pairwise_judgment"):
            for r in want[table]:
                r["distribution"] = None
    if target in ("0002", "0001"):  # 0003 undone: the lm-eval fields are dropped
        for r in want["mc_item_result"]:
            r.update(task=None, doc_id=None, golds=None)
    if target == "0001":  # 0002 undone
        rows = [r for r in want["pairwise_judgment"] if r["position"] != "na"]
        for r in rows:
            r.update(baseline_side=None, source=None,
                     preference={"a": 1.0, "b": 0.0, "tie": 0.5}[r["verdict"]] if r["status"] == "ok" else None)
        want["pairwise_judgment"] = rows
    return want


EXPECTED_LOSSES = {
    "0004": [("0005", 2)],
    "0003": [("0005", 2), ("0004", 1), ("0004", 1)],
    "0002": [("0005", 2), ("0004", 1), ("0004", 1), ("0003", 1)],
    "0001": [("0005", 2), ("0004", 1), ("0004", 1), ("0003", 1), ("0002", 1), ("0002", 1), ("0002", 1), ("0002", 1)],
}


@pytest.mark.parametrize("target", ["0004", "0003", "0002", "0001", "base"])
def test_round_trip_with_data_in_every_table(db_url, target):
    engine = eng.create(db_url)
    try:
        migrate.upgrade(engine, "head")
        _fill(engine)
        before = _snapshot(engine)
        assert all(before[t] for t in before), "every table holds data"
        losses = migrate.downgrade_losses(engine, target)
        if target == "base":
            counted = {c.what.split()[3]: c.n for c in losses if c.revision == "0001"}
            # each row counted once: the 'na' verdict is deleted undoing 0002 and imported_file
            # dropped undoing 0005, before undoing 0001 drops what is left
            first = {"pairwise_judgment": 1, "imported_file": 2}
            assert counted == {t: len(rows) - first.get(t, 0) for t, rows in before.items() if t != "imported_file"}
            assert sum(c.n for c in losses if "deleted" in c.what) == sum(len(rows) for rows in before.values())
        else:
            by_what = {(c.revision, c.what): c.n for c in losses}
            assert len(by_what) == len(losses)
            assert sorted((c.revision, c.n) for c in losses) == sorted(EXPECTED_LOSSES[target])
        # refused without yes: nothing changed
        with pytest.raises(DataLossError, match="nothing was changed: give --yes"):
            migrate.downgrade(engine, target)
        assert migrate.current(engine)[0] == migrate.head_revision()
        assert _snapshot(engine) == before
        done = migrate.downgrade(engine, target, yes=True)
        assert [(c.revision, c.n, c.what) for c in done] == [(c.revision, c.n, c.what) for c in losses]
        migrate.upgrade(engine, "head")
        after = json.loads(json.dumps(_snapshot(engine), default=str))
        assert after == _expected_after(before, target)
    finally:
        engine.dispose()


def test_downgrade_without_loss_needs_no_yes(db_url):
    """Data that the downgrade keeps whole (a judgecal-task MC row, ordered verdicts) is no reason to refuse."""
    engine = eng.create(db_url)
    try:
        migrate.upgrade(engine, "head")
        _fill(engine)
        from sqlalchemy import text

        with engine.begin() as c:
            c.execute(text("DELETE FROM mc_item_result WHERE id = 2"))
            c.execute(text("UPDATE rating SET distribution = NULL"))
            c.execute(text("UPDATE pairwise_judgment SET distribution = NULL"))
        # undoing 0007 and 0006 loses only what is computed from the data: no reason to refuse
        assert migrate.downgrade_losses(engine, "0005") == []
        # undoing 0005 loses the file hashes: counted, refused without yes
        assert [(c.revision, c.n) for c in migrate.downgrade_losses(engine, "0004")] == [("0005", 2)]
        with pytest.raises(DataLossError, match="2 imported files' content hashes are deleted"):
            migrate.downgrade(engine, "0004")
        with engine.begin() as c:
            c.execute(text("DELETE FROM imported_file"))
        assert migrate.downgrade_losses(engine, "0003") == []  # undoing 0007 down to 0004: nothing held there now
        assert migrate.downgrade(engine, "0003") == []
        assert migrate.current(engine)[0] == "0003"
        migrate.upgrade(engine, "head")
    finally:
        engine.dispose()


def test_cli_downgrade_counts_and_refuses_without_yes(db_url, run_cli):
    engine = eng.create(db_url)
    migrate.upgrade(engine, "head")
    _fill(engine)
    before = _snapshot(engine)
    r = run_cli("--database-url", db_url, "db", "downgrade", "0001")
    assert r.exit_code == 2, r
    assert "would lose data" in r.stderr and "1 pairwise verdicts without a recorded order" in r.stderr
    assert "--yes" in r.stderr and "Traceback" not in r.output
    assert _snapshot(engine) == before and migrate.current(engine)[0] == migrate.head_revision()
    r = run_cli("--database-url", db_url, "db", "downgrade", "base")
    assert r.exit_code == 2 and "3 rows of table pairwise_judgment" in r.stderr, r
    assert "rows of table imported_file" not in r.stderr, r  # 0005 drops it (counted there), not 0001
    assert _snapshot(engine) == before
    r = run_cli("--database-url", db_url, "db", "downgrade", "0001", "--yes")
    assert r.exit_code == 0, r
    assert "lost: 1 pairwise verdicts without a recorded order" in r.stdout and "at revision 0001" in r.stdout
    r = run_cli("--database-url", db_url, "db", "downgrade", "base", "--yes")
    assert r.exit_code == 0 and "lost: 3 rows of table pairwise_judgment" in r.stdout, r
    assert "at revision base" in r.stdout
    engine.dispose()
