"""The stored results stay current without a manual step (issue 32, item 5; judgecal._cli.autorefresh).

On the real LLMBar sets (SQLite): a database never refreshed is never refreshed by a write;
once refreshed, an import ends by refreshing (the stored results are at the new generation,
read back, and equal to a fresh computation, which sees the new family); ``--no-refresh`` and
``JUDGECAL_NO_REFRESH=1`` leave them stale and say so; a refresh that fails leaves the write
committed, exit 0, and says so in one line."""

from __future__ import annotations

from sqlalchemy import text

from judgecal.db import derived
from judgecal.db import engine as eng


def _rows(url: str) -> int:
    engine = eng.get_engine(url)
    with engine.connect() as conn:
        n = conn.execute(text("SELECT count(*) FROM derived_result")).scalar_one()
    engine.dispose()
    return n


def _families(url: str) -> list[str]:
    from judgecal.views.browse import overview

    return sorted(f["task_family"] for f in overview.compute(url)["families"])


def test_never_refreshed_database_is_not_refreshed(sqlite_url, data_dir, run_cli):
    for fam in ("Natural", "Adversarial_GPTInst"):
        r = run_cli("--database-url", sqlite_url, "import", "llmbar", data_dir / "llmbar" / fam)
        assert r.exit_code == 0, r
        assert "note:" not in r.stderr and "refresh" not in r.stderr, r
    assert _rows(sqlite_url) == 0
    assert derived.store_state(sqlite_url)["rows"] == 0 and not derived.store_state(sqlite_url)["stale"]


def test_refreshed_database_stays_current_after_an_import(sqlite_url, data_dir, run_cli):
    from judgecal.views.browse import overview
    from judgecal.views.judge import judge_profile

    url = sqlite_url
    assert run_cli("--database-url", url, "import", "llmbar", data_dir / "llmbar" / "Natural").exit_code == 0
    r = run_cli("--database-url", url, "db", "refresh")
    assert r.exit_code == 0 and "stored " in r.stdout, r
    first = derived.store_state(url)
    assert first["rows"] > 0 and not first["stale"]

    r = run_cli("--database-url", url, "import", "llmbar", data_dir / "llmbar" / "Adversarial_GPTInst")
    assert r.exit_code == 0, r
    assert "note: refreshed the stored results: " in r.stderr and " pages, " in r.stderr and " s (content generation sqlite:" in r.stderr, r
    assert "imported llmbar/Adversarial_GPTInst" in r.stdout  # the import's own report is unchanged
    state = derived.store_state(url)
    assert state["current"] != first["current"] and state["stored"] == state["current"] and not state["stale"]
    # read back at the new generation, and equal to a fresh computation (which sees the new family)
    for kind, fn, args, params in [("overview", overview, (url,), {}),
                                   ("judge_profile", judge_profile, ("GPT-4", url), {"judge": "GPT-4", "n_bootstrap": 1000, "seed": 0})]:
        got = derived.lookup(url, kind, derived.result_key(kind, params))
        assert got is not derived._MISSING, kind
        assert derived.same(got, fn.compute(*args)), kind
        assert derived.same(fn(*args), got), kind
    assert sorted(f["task_family"] for f in derived.lookup(url, "overview", derived.result_key("overview", {}))["families"]) \
        == ["llmbar/Adversarial_GPTInst", "llmbar/Natural"]

    # a re-import that adds nothing moves nothing: nothing to refresh, nothing said
    r = run_cli("--database-url", url, "import", "llmbar", data_dir / "llmbar" / "Adversarial_GPTInst")
    assert r.exit_code == 0 and "note:" not in r.stderr, r
    assert derived.store_state(url)["current"] == state["current"]

    # skipped: stale, and the note says so; nothing stored is read
    r = run_cli("--database-url", url, "import", "llmbar", data_dir / "llmbar" / "Adversarial_Neighbor", "--no-refresh")
    assert r.exit_code == 0, r
    assert "note: stored results not refreshed (--no-refresh): they are stale" in r.stderr and "judgecal db refresh" in r.stderr, r
    stale = derived.store_state(url)
    assert stale["stale"] and stale["stored"] == state["current"] != stale["current"]
    assert derived.lookup(url, "overview", derived.result_key("overview", {})) is derived._MISSING
    assert "llmbar/Adversarial_Neighbor" in _families(url)
    r = run_cli("--database-url", url, "lengths", "--tokenizer", "words", env={"JUDGECAL_NO_REFRESH": "1"})
    assert r.exit_code == 0 and "note: stored results not refreshed (JUDGECAL_NO_REFRESH=1)" in r.stderr, r


def test_a_failed_refresh_keeps_the_write(sqlite_url, data_dir, run_cli):
    url = sqlite_url
    assert run_cli("--database-url", url, "import", "llmbar", data_dir / "llmbar" / "Natural").exit_code == 0
    assert run_cli("--database-url", url, "db", "refresh").exit_code == 0
    engine = eng.get_engine(url)
    with engine.begin() as conn:  # the store refuses every new result (a real SQLite error at the refresh's write)
        conn.execute(text("CREATE TRIGGER refuse_store BEFORE INSERT ON derived_result "
                          "BEGIN SELECT RAISE(ABORT, 'store refused'); END"))
    engine.dispose()
    r = run_cli("--database-url", url, "lengths", "--tokenizer", "words")
    assert r.exit_code == 0, r
    assert "words: 200 token lengths added, 200 stored" in r.stdout
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("note: the write is committed, but refreshing the stored results failed (")
    assert "store refused" in r.stderr and "judgecal db refresh" in r.stderr, r
    engine = eng.get_engine(url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM token_length WHERE tokenizer = 'words'")).scalar_one() == 200
    engine.dispose()


# ---------------------------------------------------------------- judgecal serve: the overview says when they are stale
NOTE = "Pages are computed on request."


def test_overview_says_when_stored_results_are_stale(sqlite_url, data_dir, run_cli):
    import pytest

    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from judgecal.web import create_app

    url = sqlite_url

    def overview_html() -> str:
        client = TestClient(create_app(url, cache_mb=0))
        r = client.get("/")
        assert r.status_code == 200
        return r.text

    assert run_cli("--database-url", url, "import", "llmbar", data_dir / "llmbar" / "Natural").exit_code == 0
    assert NOTE not in overview_html()  # never refreshed: nothing stored, nothing to say
    assert run_cli("--database-url", url, "db", "refresh").exit_code == 0
    assert NOTE not in overview_html()  # stored at the current generation
    r = run_cli("--database-url", url, "import", "llmbar", data_dir / "llmbar" / "Adversarial_GPTInst", "--no-refresh")
    assert r.exit_code == 0 and "stale" in r.stderr, r
    html = overview_html()
    assert NOTE in html and "<code>judgecal db refresh</code> stores them again" in html
    assert html.index(NOTE) < html.index("<h1>")  # above the page, not in a corner of it
    # the same app, once refreshed, drops the note (the page cache follows the data)
    client = TestClient(create_app(url))
    assert NOTE in client.get("/").text
    assert run_cli("--database-url", url, "db", "refresh").exit_code == 0
    assert NOTE not in client.get("/").text
