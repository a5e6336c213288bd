"""Results computed when the data is written (issue 32, item 5; judgecal.db.derived, `judgecal db refresh`).

On the team fixture: what the store gives back is the freshly computed result value for value,
and a page served from it is byte for byte the page computed without it. On both dialects: any
insert, update or delete of a content table, by judgecal or by plain SQL, moves the content
generation, after which nothing stored before is read; a store written while the data changed
is refused; a database without the triggers reads nothing from the store."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from judgecal.db import derived
from judgecal.db import engine as eng
from judgecal.db import migrate

sys.path.insert(0, str(Path(__file__).parent))
import serve_data as sd  # noqa: E402

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

from judgecal.web import create_app  # noqa: E402

BASE = "gpt4_1106_preview"
AE_JUDGE = "weighted_alpaca_eval_gpt4_turbo"
#: the pages whose figures are stored (each stored kind at least once), HTML and JSON
PAGES = ["/", "/leaderboard?judge=id%3A2", "/leaderboard?judge=id%3A2&format=json", "/calibration?calibration=3", "/calibration?calibration=3&format=json",
         "/calibration?family=llmbar%2FNatural&judge=id%3A2&format=json",
         "/judge?judge=GPT-4%2FVanilla", "/judge?judge=GPT-4%2FVanilla&format=json",
         f"/winrates?baseline={BASE}", f"/winrates?baseline={BASE}&format=json", f"/winrates?baseline={BASE}&joint=1",
         f"/publish?baseline={BASE}", f"/publish?baseline={BASE}&format=json",
         f"/audit?family=alpaca_eval&judge={AE_JUDGE}", f"/audit?family=alpaca_eval&judge={AE_JUDGE}&format=json",
         f"/audit?family=alpaca_eval&judge={AE_JUDGE}&model=claude-2&filter=won_longer&format=json",
         f"/bt?judge={AE_JUDGE}", f"/bt?judge={AE_JUDGE}&format=json"]


@pytest.fixture(scope="module")
def team_copy(tmp_path_factory, data_dir):
    """A copy of the team's database (the shared one stays without stored results)."""
    team = sd.team_db(tmp_path_factory, data_dir)
    src = Path(eng.sqlite_path(eng.make_url(team["url"])))
    folder = tmp_path_factory.mktemp("derived")
    for suffix in ("", "-wal"):
        if Path(str(src) + suffix).exists():
            shutil.copy(str(src) + suffix, folder / ("team.db" + suffix))
    return f"sqlite:///{folder / 'team.db'}", team["url"]


def _pages(url: str) -> dict[str, bytes]:
    out = {}
    for path in PAGES:
        r = TestClient(create_app(url, cache_mb=0)).get(path)
        assert r.status_code == 200, (path, r.text[:300])
        out[path] = r.content
    return out


def test_stored_results_equal_fresh_ones_on_the_team_fixture(team_copy):
    url, _ = team_copy
    fresh_pages = _pages(url)  # nothing stored yet: every figure computed
    from judgecal.web.app import App

    ro = eng.read_only_url(url)
    eng.pin_engine(ro)
    try:
        pages = App(ro, url)
        handlers = {"/": pages.overview, "/leaderboard": pages.leaderboard, "/calibration": pages.calibration, "/judge": pages.judge, "/winrates": pages.winrates,
                    "/publish": pages.publish, "/audit": pages.audit, "/bt": pages.bt}
        from judgecal.web.app import page_key
        from urllib.parse import parse_qsl, urlsplit

        engine = eng.get_engine(url)
        with engine.connect() as conn:
            gen = derived.generation(conn)
        assert gen is not None and gen.startswith("sqlite:")
        with derived.recording() as records:
            for path in PAGES:
                u = urlsplit(path)
                pages.compute_key(handlers[u.path], page_key(u.path, parse_qsl(u.query)))
    finally:
        eng.unpin_engine(ro)
    kinds = {kind for kind, _ in records.values()}
    assert kinds == {"overview", "score_board", "report_entries", "pairwise_summary", "report_plots", "judge_profile", "winrate_board",
                     "audit_index", "bt_board"}
    # each stored value decodes to the value computed, value for value (types, NaN, arrays, tuples)
    for key, (kind, value) in records.items():
        assert derived.encode(derived.decode(value)) == value, kind
    assert derived.write(engine, gen, records) == len(records)
    # read back at this generation: every key
    for key, (kind, value) in records.items():
        got = derived.lookup(url, kind, key)
        assert got is not derived._MISSING, kind
    # and the functions' own results equal the stored ones, value for value
    from judgecal.views.judge import judge_profile
    from judgecal.views.pairwise_report import collect_pairwise
    from judgecal.views.winrates import build_winrate_board

    assert derived.same(collect_pairwise(None, None, url), collect_pairwise.compute(None, None, url))
    assert derived.same(judge_profile("GPT-4/Vanilla", url), judge_profile.compute("GPT-4/Vanilla", url))
    assert derived.same(build_winrate_board(BASE, [], None, url), build_winrate_board.compute(BASE, [], None, url))
    from judgecal.views.btboard import build_bt_board

    bt_args = dict(n_bootstrap=20, control="both", length_unit="chars")
    assert derived.same(build_bt_board([], AE_JUDGE, None, url, **bt_args), build_bt_board.compute([], AE_JUDGE, None, url,
                                                                                                  **bt_args))
    from judgecal.views.browse import overview
    from judgecal.views.leaderboard import build_leaderboard

    assert derived.same(overview(url), overview.compute(url))
    assert derived.same(build_leaderboard(None, "id:2", url=url), build_leaderboard.compute(None, "id:2", url=url))
    # the pages served from the store are the pages computed without it, byte for byte
    assert _pages(url) == fresh_pages
    engine.dispose()


def test_refresh_command_stores_and_a_write_retires_it(team_copy, run_cli):
    url, _ = team_copy
    res = run_cli("--database-url", url, "db", "refresh")
    assert res.exit_code == 0, res.output
    assert "stored " in res.stdout and "content generation sqlite:" in res.stdout
    engine = eng.get_engine(url)
    with engine.connect() as conn:
        gen = derived.generation(conn)
        n = conn.execute(text("SELECT count(*) FROM derived_result WHERE generation = :g"), {"g": gen}).scalar_one()
    assert n > 100  # every judge's page, the audits, the boards, the reports
    with engine.connect() as conn:  # every kind a page stores, the Bradley-Terry boards included (they were left out)
        kinds = set(conn.execute(text("SELECT DISTINCT kind FROM derived_result WHERE generation = :g"), {"g": gen}).scalars())
    assert {"bt_board", "judge_profile", "winrate_board", "audit_index", "score_board", "overview"} <= kinds
    from judgecal.views.judge import judge_profile

    key = derived.result_key("judge_profile", {"judge": "GPT-4/Vanilla", "n_bootstrap": 1000, "seed": 0})
    assert derived.lookup(url, "judge_profile", key) is not derived._MISSING
    with engine.begin() as conn:  # a plain SQL write, outside judgecal
        conn.execute(text("UPDATE pairwise_judgment SET verdict = 'b', preference = 0.0 WHERE id = "
                          "(SELECT min(id) FROM pairwise_judgment WHERE verdict = 'a')"))
    with engine.connect() as conn:
        assert derived.generation(conn) != gen
    assert derived.lookup(url, "judge_profile", key) is derived._MISSING
    assert derived.same(judge_profile("GPT-4/Vanilla", url), judge_profile.compute("GPT-4/Vanilla", url))
    engine.dispose()


# ---------------------------------------------------------------- the generation, both dialects
@derived.stored("test_count")
def _count_ok(label: str, url: str | None = None) -> dict:
    engine = eng.get_engine(url)
    with engine.connect() as conn:
        n = conn.execute(text("SELECT count(*) FROM rating WHERE status = 'ok'")).scalar_one()
    return {"label": label, "n": int(n), "pair": (1, 2.5, float("nan"))}


def _add_rating(url: str) -> None:
    from judgecal.db import models as m

    engine = eng.get_engine(url)
    with eng.session_scope(engine) as s:
        fam = m.TaskFamily(name="f")
        s.add(fam)
        s.flush()
        item = m.Item(task_family_id=fam.id, prompt="p", prompt_sha256="a" * 64)
        s.add(item)
        s.flush()
        resp = m.Response(item_id=item.id, model="x", text="t", text_sha256="b" * 64, n_bytes=1, n_chars=1, n_words=1)
        judge = m.Judge(judge_key="k" * 64, name="j", model="jm", endpoint="e", prompt_name="p", prompt_sha256="c" * 64,
                        params={}, scale_min=1, scale_max=10)
        s.add_all([resp, judge])
        s.flush()
        s.add(m.Rating(response_id=resp.id, judge_id=judge.id, sample_index=0, status="ok", score=5.0))


def _store(url: str) -> str:
    engine = eng.get_engine(url)
    with engine.connect() as conn:
        gen = derived.generation(conn)
    with derived.recording() as records:
        _count_ok("a", url)
    assert derived.write(engine, gen, records) == 1
    return gen


@pytest.mark.parametrize("write", [
    "UPDATE rating SET score = 6.0",
    "UPDATE rating SET status = 'failed'",
    "INSERT INTO token_length (response_id, tokenizer, n_tokens) SELECT id, 'w', 1 FROM response",
    "DELETE FROM rating",
    "UPDATE judge SET name = 'j2'",
])
def test_every_write_moves_the_generation(db_url, write):
    _add_rating(db_url)
    gen = _store(db_url)
    key = derived.result_key("test_count", {"label": "a"})
    got = derived.lookup(db_url, "test_count", key)
    assert derived.same(got, {"label": "a", "n": 1, "pair": (1, 2.5, float("nan"))})
    assert derived.same(_count_ok("a", db_url), _count_ok.compute("a", db_url))
    engine = eng.get_engine(db_url)
    with engine.begin() as conn:
        conn.execute(text(write))
    with engine.connect() as conn:
        assert derived.generation(conn) != gen
    assert derived.lookup(db_url, "test_count", key) is derived._MISSING
    expected = 0 if ("status = 'failed'" in write or "DELETE" in write) else 1
    assert _count_ok("a", db_url)["n"] == expected
    engine.dispose()


def test_postgresql_change_log_is_compacted_by_a_store(pg_url):
    _add_rating(pg_url)
    gen = _store(pg_url)
    engine = eng.get_engine(pg_url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM content_change")).scalar_one() == 0
        assert derived.generation(conn) == gen  # the rows moved into the number
    assert derived.lookup(pg_url, "test_count", derived.result_key("test_count", {"label": "a"})) is not derived._MISSING
    with engine.begin() as conn:
        conn.execute(text("UPDATE rating SET score = 3.0"))
    with engine.connect() as conn:
        assert derived.generation(conn) != gen
    assert derived.lookup(pg_url, "test_count", derived.result_key("test_count", {"label": "a"})) is derived._MISSING
    engine.dispose()


def test_a_store_written_after_a_change_is_refused(db_url):
    _add_rating(db_url)
    engine = eng.get_engine(db_url)
    with engine.connect() as conn:
        gen = derived.generation(conn)
    with derived.recording() as records:
        _count_ok("a", db_url)
    with engine.begin() as conn:  # the data changes while the results are computed
        conn.execute(text("UPDATE rating SET score = 2.0"))
    assert derived.write(engine, gen, records) == 0
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM derived_result")).scalar_one() == 0
    engine.dispose()


def test_without_the_triggers_nothing_stored_is_read(db_url):
    _add_rating(db_url)
    _store(db_url)
    engine = eng.get_engine(db_url)
    with engine.begin() as conn:
        if conn.dialect.name == "sqlite":
            conn.execute(text("DROP TRIGGER jc_gen_rating_update"))
        else:
            conn.execute(text("ALTER TABLE rating DISABLE TRIGGER jc_gen_rating"))
    with engine.connect() as conn:
        assert derived.generation(conn) is None
    assert derived.lookup(db_url, "test_count", derived.result_key("test_count", {"label": "a"})) is derived._MISSING
    engine.dispose()
    migrate_engine = eng.create(db_url)
    migrate.downgrade(migrate_engine, "0005")  # the downgrade drops what is left of them, and the tables
    migrate.upgrade(migrate_engine, "head")
    with migrate_engine.connect() as conn:
        assert derived.generation(conn) is not None
    migrate_engine.dispose()


def test_codec_keeps_types():
    import numpy as np

    value = {"t": (1, "a", None), 3: [float("inf"), float("nan")], (1, 2): {"__t": 1},
             "arr": np.arange(6, dtype=np.int32).reshape(2, 3), "f": np.float64(0.1), "b": np.bool_(True)}
    back = derived.decode(derived.encode(value))
    assert back[3][0] == float("inf") and back[3][1] != back[3][1]
    assert back["t"] == (1, "a", None) and back[(1, 2)] == {"__t": 1}
    assert back["arr"].dtype == np.int32 and back["arr"].shape == (2, 3) and back["arr"][1, 2] == 5
    assert back["f"] == 0.1 and back["b"] is True
    with pytest.raises(TypeError):
        derived.encode({"x": object()})
