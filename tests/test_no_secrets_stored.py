"""Secrets never stored, from any path (issue 35 item 3).

One function (:func:`judgecal.secrets.endpoint_without_secrets`) drops credentials, query
string and fragment from every endpoint before it is stored: ``judgecal rate`` (pointwise and
pairwise), ``import jsonl|csv --kind ratings|verdicts`` (``judge_endpoint``) and, behind them,
the judge row itself. A secret is planted through every path, then every column of every
table (SQLAlchemy's metadata: a table added later is scanned too), every export kind in both
formats and the command lines' output are searched for it, on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

sys.path.insert(0, str(Path(__file__).parent))
from stub_openai import StubServer  # noqa: E402

from judgecal.db import engine as eng  # noqa: E402
from judgecal.db import models as m  # noqa: E402
from judgecal.secrets import endpoint_without_secrets  # noqa: E402
from judgecal.views.export import KINDS  # noqa: E402

PASSWORD, KEY = "S3cretPW", "SECRETKEY"
PLANTED = f"http://user:{PASSWORD}@127.0.0.1:1/v1?api_key={KEY}#frag"


@pytest.mark.parametrize("url,stored", [
    (PLANTED, "http://127.0.0.1:1/v1"),
    ("http://[::1]:19101/v1", "http://[::1]:19101/v1"),  # an IPv6 host keeps its brackets
    (f"http://user:{PASSWORD}@[::1]:19101/v1/?token={KEY}", "http://[::1]:19101/v1"),
    ("https://Api.Example.com/v1/", "https://api.example.com/v1"),
    ("import", "import"), ("import:llmbar", "import:llmbar"),  # an imported judge's label
    (f"user:{PASSWORD}@host/v1?key={KEY}#x", "host/v1"),  # no scheme: still no credentials
    (f"http://h/v1/api_key={KEY}", "http://h/v1/api_key=***"),  # a secret in the path
])
def test_endpoint_without_secrets(url, stored):
    assert endpoint_without_secrets(url) == stored
    assert endpoint_without_secrets(stored) == stored  # what is stored comes back unchanged


def _records(endpoint: str) -> dict[str, list[dict]]:
    item = {"task_family": "secrets", "prompt": "What is 2 + 2?"}
    return {
        "ratings": [{**item, "model": "m", "response": "4", "judge": "rj", "judge_endpoint": endpoint, "score": 5,
                     "scale_min": 1, "scale_max": 10}],
        "verdicts": [{**item, "model_a": "m", "response_a": "4", "model_b": "base", "response_b": "four",
                      "judge": "vj", "judge_endpoint": endpoint, "preference": 0.75, "position": "ab", "baseline": "b"}],
    }


def _write(path: Path, rows: list[dict], fmt: str) -> Path:
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    else:
        with path.open("w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return path


def _scan_tables(url: str) -> dict[str, int]:
    """{table.column: rows holding a planted secret} over every column of every table."""
    engine = eng.create(url)
    found: dict[str, int] = {}
    n_tables = 0
    with engine.connect() as conn:
        for table in m.Base.metadata.sorted_tables:
            n_tables += 1
            for row in conn.execute(select(table)):
                for col, value in row._mapping.items():
                    text = json.dumps(value, default=str) if not isinstance(value, str) else value
                    if PASSWORD in text or KEY in text:
                        found[f"{table.name}.{col}"] = found.get(f"{table.name}.{col}", 0) + 1
    engine.dispose()
    assert n_tables >= 12  # every table of the schema was read
    return found


def test_a_planted_secret_is_stored_nowhere(db_url, tmp_path, run_cli):
    url = db_url
    responses = [{"task_family": "secrets", "prompt": "What is 2 + 2?", "model": mdl, "response": text}
                 for mdl, text in (("m", "4"), ("base", "four"))]
    r = run_cli("--database-url", url, "import", "jsonl", _write(tmp_path / "r.jsonl", responses, "jsonl"),
                "--kind", "responses")
    assert r.exit_code == 0, r
    outputs = [r.output]
    # every importer that stores an endpoint, in both formats
    for fmt in ("jsonl", "csv"):
        for kind, rows in _records(PLANTED).items():
            rows = [{**row, "judge": f"{row['judge']}-{fmt}"} for row in rows]
            r = run_cli("--database-url", url, "import", fmt, _write(tmp_path / f"{kind}.{fmt}", rows, fmt), "--kind", kind)
            assert r.exit_code == 0, r
            outputs.append(r.output)
    # judgecal rate, pointwise and pairwise: the endpoint given with credentials, query and fragment
    with StubServer() as s:
        planted = f"http://user:{PASSWORD}@127.0.0.1:{s.port}/v1?api_key={KEY}#frag"
        for extra in ([], ["--pairwise", "--baseline", "base"]):
            r = run_cli("--database-url", url, "rate", "--judge", "stub", "--base-url", planted, "--task-family", "secrets",
                        "--max-attempts", "1", "--max-outage", "0", *extra)
            outputs.append(r.output)
    assert not _scan_tables(url)
    engine = eng.create(url)
    with engine.connect() as conn:
        endpoints = sorted(set(conn.execute(select(m.Judge.endpoint)).scalars()))
    engine.dispose()
    assert endpoints == sorted({"http://127.0.0.1:1/v1", f"http://127.0.0.1:{s.port}/v1"})
    # every export, both formats
    for kind in KINDS:
        for fmt in ("jsonl", "csv"):
            out = tmp_path / f"export-{kind}.{fmt}"
            r = run_cli("--database-url", url, "export", kind, out)
            outputs.append(r.output)
            if out.exists():
                text = out.read_text(encoding="utf-8")
                assert PASSWORD not in text and KEY not in text, (kind, fmt)
    for text in outputs:
        assert PASSWORD not in text and KEY not in text, text


def test_an_ipv6_base_url_is_stored_with_its_brackets(sqlite_url, tmp_path, run_cli):
    """`rate --base-url http://[::1]:PORT/v1` stores the endpoint bracketed (it was stored
    as http://::1:PORT/v1, which is no URL)."""
    rows = [{"task_family": "v6", "prompt": "q", "model": "m", "response": "a"}]
    assert run_cli("--database-url", sqlite_url, "import", "jsonl", _write(tmp_path / "r.jsonl", rows, "jsonl"),
                   "--kind", "responses").exit_code == 0
    r = run_cli("--database-url", sqlite_url, "rate", "--judge", "j", "--base-url", "http://[::1]:9/v1/",
                "--max-attempts", "1", "--max-outage", "0", "--timeout", "2")
    engine = eng.create(sqlite_url)
    with engine.connect() as conn:
        assert list(conn.execute(select(m.Judge.endpoint)).scalars()) == ["http://[::1]:9/v1"], r.output
    engine.dispose()


def test_mc_base_url_is_stored_without_secrets():
    """`mc --base-url` keeps the endpoint in mc_run.settings: stored as the scrubber gives it."""
    from judgecal.views.mc import _without_secrets

    settings = {"batch_size": 4, "base_url": PLANTED}
    assert _without_secrets(settings) == {"batch_size": 4, "base_url": "http://127.0.0.1:1/v1"}
    assert _without_secrets({"batch_size": 4, "base_url": None}) == {"batch_size": 4, "base_url": None}


def test_credentials_in_the_base_url_authenticate_the_calls_and_are_stored_nowhere(sqlite_url, tmp_path, run_cli):
    """``rate --base-url http://user:pw@host/v1`` against a server that requires HTTP Basic
    auth: every call succeeds (the SDK alone dropped the userinfo: every call failed 401), and
    no table, export or output holds the password or its Basic token."""
    import base64

    url = sqlite_url
    responses = [{"task_family": "secrets", "prompt": f"What is {i} + 2?", "model": "m", "response": str(i + 2)}
                 for i in range(3)]
    assert run_cli("--database-url", url, "import", "jsonl", _write(tmp_path / "r.jsonl", responses, "jsonl"),
                   "--kind", "responses").exit_code == 0
    token = base64.b64encode(f"user:{PASSWORD}".encode()).decode()
    with StubServer(require_auth=f"Basic {token}") as s:
        r = run_cli("--database-url", url, "rate", "--judge", "stub", "--base-url",
                    f"http://user:{PASSWORD}@127.0.0.1:{s.port}/v1", "--task-family", "secrets", "--max-attempts", "1",
                    "--format", "json")
        assert s.unauthorised == 0 and s.auth == {f"Basic {token}"}
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout[r.stdout.index("{"):])
    assert summary["this_run"]["ok"] == 3 and summary["this_run"]["failed"] == 0, summary["this_run"]
    found = _scan_tables(url)
    assert not found, found
    engine = eng.create(url)
    with engine.connect() as conn:
        assert list(conn.execute(select(m.Judge.endpoint)).scalars()) == [f"http://127.0.0.1:{s.port}/v1"]
        texts = [json.dumps(list(row), default=str) for table in m.Base.metadata.sorted_tables
                 for row in conn.execute(select(table))]
    engine.dispose()
    assert not [t for t in texts if token in t]
    outputs = [r.output]
    for kind in ("ratings", "responses"):
        out = tmp_path / f"export-{kind}.jsonl"
        outputs.append(run_cli("--database-url", url, "export", kind, out).output + out.read_text(encoding="utf-8"))
    assert not [t for t in outputs if PASSWORD in t or token in t]
    # a wrong password is refused by the server: failed calls, the password in no message
    with StubServer(require_auth=f"Basic {token}") as s:
        r = run_cli("--database-url", url, "rate", "--judge", "stub2", "--base-url",
                    f"http://user:wrong{PASSWORD}@127.0.0.1:{s.port}/v1", "--task-family", "secrets",
                    "--max-attempts", "1", "--max-outage", "0")
        assert s.unauthorised == 3
    out = tmp_path / "failed.jsonl"
    assert run_cli("--database-url", url, "export", "ratings", out, "--judge", "stub2").exit_code == 0
    failed = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [x["status"] for x in failed] == ["failed"] * 3 and all("authentication required" in x["error"] for x in failed)
    assert PASSWORD not in r.output + out.read_text(encoding="utf-8") and not _scan_tables(url)
