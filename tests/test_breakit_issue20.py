"""Issue 20, the break-it pass on the AlpacaEval import after raw_completion.message got its fast
reader (a helper acting as a hostile user): each defect it found, on both dialects where the
database is involved, and on both readers (the fast one, and the careful one that a value equal
to a field name sends the file to)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from db_helpers import count_rows as _count
from judgecal.errors import InputError
from judgecal.importers import alpaca_eval, fastjson
from judgecal.importers.fastjson import read_json_fields

ANN = {"instruction": "Say hi", "output_1": "Hello", "generator_1": "base", "output_2": "Hi there",
       "generator_2": "m", "annotator": "a", "preference": 1.75}
HUGE = "1" + "0" * 5000  # over Python's 4,300-digit limit for int(str)
READERS = {"fast": "", "careful": ', "dataset": "preference"'}  # a value equal to a field name: the careful reader


def _file(path: Path, raw_completion: str, reader: str, instruction: str = "Say hi") -> Path:
    body = json.dumps(dict(ANN, instruction=instruction))[:-1] + READERS[reader] + ', "raw_completion": ' + raw_completion + "}"
    path.write_text("[\n" + body + "\n]\n", encoding="utf-8")
    return path


def _import(run_cli, url, f):
    return run_cli("--database-url", url, "import", "alpaca-eval", f)


def _raw_outputs(url) -> list:
    from sqlalchemy import create_engine, text
    engine = create_engine(url)
    with engine.connect() as c:
        out = [r[0] for r in c.execute(text("SELECT raw_output FROM pairwise_judgment ORDER BY raw_output"))]
    engine.dispose()
    return out


@pytest.mark.parametrize("reader", sorted(READERS))
def test_huge_integer_inside_the_message_is_one_file_line_error(db_url, run_cli, tmp_path, reader):
    """A 5,001-digit integer inside raw_completion.message (read: its content is the raw output)
    escaped the fast reader as a bare ValueError ("unexpected ValueError", exit 1, no FILE:LINE).
    Now both readers refuse it as the careful reader does, nothing written."""
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    f = _file(tmp_path / "hugeint.json", '{"message": {"content": "c", "n": ' + HUGE + "}}", reader)
    r = _import(run_cli, db_url, f)
    assert r.exit_code == 2 and "hugeint.json:2: invalid JSON value: Exceeds the limit" in r.stderr, r
    assert "unexpected" not in r.stderr and "Traceback" not in r.stderr
    assert _count(db_url, "pairwise_judgment") == 0 and _count(db_url, "response") == 0


@pytest.mark.parametrize("reader", sorted(READERS))
def test_huge_integer_in_unread_logprobs_reads_the_same_on_both_readers(db_url, run_cli, tmp_path, reader):
    """The fast reader skips the token log-probabilities unread and imported such a file; the
    careful reader refused it (Python's int limit). Both now read it alike: imported, the raw
    output stored, the number never read."""
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    f = _file(tmp_path / "lp.json", '{"text": "t", "logprobs": {"content": [{"token": "t", "n": ' + HUGE + "}]}}", reader)
    r = _import(run_cli, db_url, f)
    assert r.exit_code == 0, r
    assert _raw_outputs(db_url) == ["t"]


def test_readers_agree_on_huge_integers(tmp_path):
    """read_json_fields (fast) and its reference (the careful reader, reading every file the fast
    one cannot) give the same values or the same error, wherever the integer is."""
    cases = {
        "logprobs": '{"text": "t", "logprobs": ' + HUGE + "}",
        "message": '{"message": {"content": "c", "n": ' + HUGE + "}}",
        "text": '{"text": ' + HUGE + "}",
        "completion_list": "[" + HUGE + "]",
    }
    for name, rc in cases.items():
        for reader in READERS:
            path = _file(tmp_path / f"{name}-{reader}.json", rc, reader)
            out = []
            for read in (lambda: read_json_fields(path, alpaca_eval._Record),
                         lambda: fastjson._reference(path, alpaca_eval._Record)):
                try:
                    out.append([alpaca_eval._raw_output(o) for o in read().objects])
                except InputError as exc:
                    out.append(str(exc))
            assert out[0] == out[1], (name, reader, out)
            if name == "logprobs":
                assert out[0] == ["t"]
            else:
                assert ":2: invalid JSON value: Exceeds the limit" in out[0], (name, out)


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("where,rc", [
    ("raw_completion.message.content", '{"message": {"content": "x\\ud800y"}}'),
    ("raw_completion.text", '{"text": "a\\udc00"}'),
    ("raw_completion", '"a\\ud800"'),
])
def test_unpaired_surrogate_in_the_raw_output_is_refused(db_url, run_cli, tmp_path, reader, where, rc):
    """Both readers read the surrogate; the write then failed ("unexpected UnicodeEncodeError",
    exit 1, no FILE:LINE). Refused now at FILE:LINE as in output_2, nothing written."""
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    f = _file(tmp_path / "surrogate.json", rc, reader)
    r = _import(run_cli, db_url, f)
    assert r.exit_code == 2 and f"surrogate.json:2: field {where!r} contains an unpaired surrogate" in r.stderr, r
    assert _count(db_url, "pairwise_judgment") == 0 and _count(db_url, "response") == 0


@pytest.mark.parametrize("reader", sorted(READERS))
def test_nul_in_the_raw_output_is_refused_on_every_dialect(db_url, run_cli, tmp_path, reader):
    """A NUL character in the raw output was stored on SQLite and could not be on PostgreSQL:
    refused on both, as in every other text field."""
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    f = _file(tmp_path / "nul.json", '{"message": {"content": "a\\u0000b"}}', reader)
    r = _import(run_cli, db_url, f)
    assert r.exit_code == 2 and "nul.json:2: field 'raw_completion.message.content' contains a NUL" in r.stderr, r
    assert _count(db_url, "pairwise_judgment") == 0


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("field,rc", [
    ("message", '{"logprobs": 1, "logprobs": 2, "message": {"content": "1"}, "message": {"content": "2"}}'),
    ("text", '{"logprobs": 1, "logprobs": 2, "text": "1", "text": "2"}'),
])
def test_repeat_of_a_read_key_after_a_repeat_of_an_unread_one(db_url, run_cli, tmp_path, reader, field, rc):
    """Only the first repeated key of an object was marked: a repeated `logprobs` (never read)
    hid a repeated `message` or `text` after it, and the last one was stored silently. Every
    repeated key is marked now: refused at FILE:LINE, nothing written."""
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    f = _file(tmp_path / "hidden.json", rc, reader)
    r = _import(run_cli, db_url, f)
    assert r.exit_code == 2 and f"hidden.json:2: field {field!r} appears twice" in r.stderr, r
    assert _count(db_url, "pairwise_judgment") == 0


def test_a_path_that_is_not_utf8_is_one_error(db_url, run_cli, tmp_path):
    """A file or folder name of bytes that are not UTF-8 (any bytes are allowed in a name) ended
    in "unexpected UnicodeEncodeError" (exit 1) where the path was looked up or stored. Refused
    now, naming the path, by every importer, nothing written (the confirming pass, helper-10)."""
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    bad = os.fsdecode(b"x\xff.json")
    f = _file(tmp_path / bad, '{"text": "t"}', "fast")
    folder = tmp_path / "res" / os.fsdecode(b"m\xfe") / "a"
    folder.mkdir(parents=True)
    (folder / "annotations.json").write_bytes(f.read_bytes())
    llmbar = tmp_path / os.fsdecode(b"set\xff")
    llmbar.mkdir()
    (llmbar / "dataset.json").write_text(json.dumps([{"input": "q", "output_1": "a", "output_2": "bb", "label": 1}]))
    csv = tmp_path / os.fsdecode(b"r\xff.csv")
    csv.write_text("prompt,response,model,score,scale_min,scale_max,judge\nq,a,m,5,1,10,j\n")
    for args, shown in ((["alpaca-eval", f], "x\\xff.json"), (["alpaca-eval", tmp_path / "res"], "m\\xfe/a/annotations.json"),
                        (["llmbar", llmbar], "set\\xff"), (["csv", "--kind", "ratings", csv], "r\\xff.csv")):
        r = run_cli("--database-url", db_url, "import", *args)
        assert r.exit_code == 2 and "the path is not UTF-8 text" in r.stderr and shown in r.stderr, (args, r)
        assert "unexpected" not in r.stderr and "Traceback" not in r.stderr
    for table in ("response", "pairwise_judgment", "rating", "expert_label", "imported_file"):
        assert _count(db_url, table) == 0, table
