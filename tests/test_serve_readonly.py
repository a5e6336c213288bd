"""Issue 35 item 5: a read-only page that would need a write stays a clear answer.

After a calibration in token lengths (``fit --length-unit tokens``), a response rated by the
judge without a stored token length makes the score board and the publish board want to count
it (``tokens.fill_lengths``), which the web view's read-only database refuses. The answer is
the documented 403 with the command to run, naming the tokenizer (``judgecal lengths
--tokenizer smollm2``), on SQLite and PostgreSQL alike, and the database is unchanged; once the
command has run, the page answers 200. (The issue saw 500 "unexpected OperationalError: attempt
to write a readonly database" / ReadOnlySqlTransaction; the page now refuses before it writes,
whatever the driver says.)"""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text
from starlette.testclient import TestClient

from judgecal import config

MODEL_DIR = config.default_model_dir()

pytestmark = pytest.mark.skipif(not (MODEL_DIR / "config.json").is_file(),
                                reason=f"the smollm2 tokenizer needs the model folder {MODEL_DIR}")


def _count(url: str) -> int:
    e = create_engine(url)
    with e.connect() as c:
        n = c.execute(text("SELECT COUNT(*) FROM token_length")).scalar_one()
    e.dispose()
    return n


def test_a_page_needing_token_lengths_answers_403_with_the_command(db_url, data_dir, run_cli):
    from judgecal.views import fitting, importing
    from judgecal.web.app import create_app

    importing.import_llmbar(data_dir / "llmbar" / "Natural", None, db_url)
    fit = fitting.run_fit("llmbar/Natural", "GPT-4", url=db_url, length_unit="tokens", tokenizer="smollm2",
                          n_bootstrap=20, folds=3, seed=0, nested=False)
    assert fit["length_unit"] == "tokens"
    e = create_engine(db_url)
    with e.begin() as c:  # three rated answers lose their token length (as new ratings have none yet)
        ids = [r[0] for r in c.execute(text("SELECT response_id FROM token_length ORDER BY response_id LIMIT 3"))]
        c.execute(text("DELETE FROM token_length WHERE response_id IN (%s)" % ",".join(map(str, ids))))
    e.dispose()
    before = _count(db_url)
    with TestClient(create_app(db_url)) as client:
        for path in ("/leaderboard?judge=GPT-4&bootstrap=20", "/publish", "/leaderboard?judge=GPT-4&format=json"):
            r = client.get(path)
            assert r.status_code == 403, (path, r.status_code, r.text[-500:])
            assert "3 response(s) have no token length under tokenizer smollm2 yet" in r.text, r.text[-800:]
            assert "run `judgecal lengths --tokenizer smollm2` on it" in r.text
            assert "OperationalError" not in r.text and "ReadOnlySqlTransaction" not in r.text
            assert "unexpected" not in r.text
    assert _count(db_url) == before  # nothing written
    # the command it names is the one that mends it
    done = run_cli("--database-url", db_url, "lengths", "--tokenizer", "smollm2")
    assert done.exit_code == 0, done
    assert _count(db_url) == before + 3
    with TestClient(create_app(db_url)) as client:
        assert client.get("/leaderboard?judge=GPT-4&bootstrap=20").status_code == 200
