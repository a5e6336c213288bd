"""Break-it follow-ups of issue 11 on imports, exports and the command line: importers read
only regular files, export options are honoured or refused, a closed stdout is one line,
ratings JSONL round trips byte for byte, an empty --model-filter is refused, and the real
importers refuse over-long names and conflicting duplicates with FILE:LINE."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rate_helpers import child_env  # noqa: E402

from judgecal.errors import InputError  # noqa: E402
from judgecal.importers import records  # noqa: E402

IMPORTS = [("jsonl", ["--kind", "responses", "--task-family", "f"]), ("csv", ["--kind", "responses", "--task-family", "f"]),
           ("autoj", []), ("pandalm", []), ("judgebench", []), ("alpaca-eval", [])]


# ------------------------------------------------------------------ case 3: only regular files
@pytest.mark.parametrize("command,extra", IMPORTS)
def test_import_of_a_device_is_refused_before_reading(tmp_path, run_cli, command, extra):
    r = run_cli("--database-url", f"sqlite:///{tmp_path / 'x.db'}", "import", command, "/dev/zero", *extra)
    assert r.exit_code == 2
    assert r.stderr.strip() == "error: /dev/zero: is a device, not a regular file: judgecal reads only regular files"


def test_import_of_a_fifo_without_writer_does_not_wait(tmp_path):
    fifo = tmp_path / "in.jsonl"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, "-m", "judgecal", "--database-url", f"sqlite:///{tmp_path / 'x.db'}", "import",
                           "jsonl", str(fifo), "--kind", "responses", "--task-family", "f"],
                          env=child_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: {fifo}: is a FIFO (named pipe), not a regular file: judgecal reads only regular files"


def test_socket_symlink_and_size_limit(tmp_path, monkeypatch):
    sock_path = tmp_path / "s.jsonl"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        with pytest.raises(InputError, match=r"s\.jsonl: is a socket, not a regular file"):
            records.read_text(sock_path)
    link = tmp_path / "link.jsonl"
    link.symlink_to("/dev/zero")
    with pytest.raises(InputError, match=r"link\.jsonl: is a device, not a regular file"):
        records.read_text(link)
    big = tmp_path / "big.jsonl"
    big.write_bytes(b"x" * 101)
    from judgecal.importers import filereading

    monkeypatch.setattr(filereading, "MAX_FILE_BYTES", 100)  # where the readers look it up
    with pytest.raises(InputError, match=r"big\.jsonl: the file has 101 bytes; judgecal reads files of at most 100 bytes"):
        records.read_text(big)
    ok = tmp_path / "ok.csv"
    ok.write_bytes("\ufeffa,b\r\n\"x\r\ny\",2\r\n".encode("utf-8"))
    assert records.read_text(ok) == "a,b\r\n\"x\r\ny\",2\r\n"  # BOM dropped, line ends kept


# ------------------------------------------------------------------ case 4: export options honoured or refused
def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture()
def two_judges(db_url, tmp_path, run_cli):
    """Two families x two models, rated by judges j1 and j2; a label, a pair and a verdict each."""
    rows = [{"task_family": fam, "prompt": f"{fam} q", "model": mo, "response": f"{fam} {mo} answer", "judge": j,
             "scale_min": 1, "scale_max": 10, "score": s}
            for fam in ("fa", "fb") for mo, s in (("m1", 3), ("m2", 7)) for j in ("j1", "j2")]
    r = run_cli("--database-url", db_url, "import", "jsonl", _jsonl(tmp_path / "r.jsonl", rows), "--kind", "ratings")
    assert r.exit_code == 0, r.stderr
    pair = [{"task_family": fam, "prompt": f"{fam} q", "model_a": "m1", "response_a": f"{fam} m1 answer", "model_b": "m2",
             "response_b": f"{fam} m2 answer", "preference": "a"} for fam in ("fa", "fb")]
    assert run_cli("--database-url", db_url, "import", "jsonl", _jsonl(tmp_path / "l.jsonl", pair),
                   "--kind", "labels").exit_code == 0
    verdicts = [{**{k: v for k, v in p.items() if k != "preference"}, "judge": j, "verdict": "a"}
                for p in pair for j in ("v1", "v2")]
    assert run_cli("--database-url", db_url, "import", "jsonl", _jsonl(tmp_path / "v.jsonl", verdicts),
                   "--kind", "verdicts").exit_code == 0
    vpairs = [{"task_family": fam, "prompt": f"{fam} q", "concise_model": "m1", "concise": f"{fam} m1 answer",
               "verbose_model": "m2", "verbose": f"{fam} m2 answer"} for fam in ("fa", "fb")]
    assert run_cli("--database-url", db_url, "import", "jsonl", _jsonl(tmp_path / "p.jsonl", vpairs),
                   "--kind", "pairs").exit_code == 0
    return db_url


def _export(run_cli, url, tmp_path, *args) -> list[dict]:
    out = tmp_path / "out.jsonl"
    r = run_cli("--database-url", url, "export", *args[:1], out, *args[1:])
    assert r.exit_code == 0, r.stderr
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def test_export_judge_and_family_select_rows(two_judges, tmp_path, run_cli):
    url = two_judges
    everything = _export(run_cli, url, tmp_path, "ratings")
    assert len(everything) == 8
    only = _export(run_cli, url, tmp_path, "ratings", "--judge", "j1")
    assert len(only) == 4 and {r["judge"] for r in only} == {"j1"}
    both = _export(run_cli, url, tmp_path, "ratings", "--judge", "j2", "--task-family", "fb")
    assert [(r["task_family"], r["model"], r["judge"], r["score"]) for r in both] == [("fb", "m1", "j2", 3.0),
                                                                                     ("fb", "m2", "j2", 7.0)]
    v = _export(run_cli, url, tmp_path, "verdicts", "--judge", "v2")
    assert len(v) == 2 and {r["judge"] for r in v} == {"v2"} and {r["task_family"] for r in v} == {"fa", "fb"}
    for kind, n in (("responses", 2), ("labels", 1), ("pairs", 1), ("verdicts", 2), ("ratings", 4)):
        rows = _export(run_cli, url, tmp_path, kind, "--task-family", "fa")
        assert len(rows) == n and {r["task_family"] for r in rows} == {"fa"}, kind
    assert _export(run_cli, url, tmp_path, "calibrations", "--judge", "j1", "--task-family", "fa") == []


@pytest.mark.parametrize("args,message", [
    (("responses", "--judge", "j1"), "error: --judge: responses have no judge"),
    (("labels", "--judge", "j1"), "error: --judge: labels have no judge"),
    (("pairs", "--judge", "j1"), "error: --judge: pairs have no judge"),
    (("ratings", "--calibration", "3"), "error: --calibration applies to the leaderboard export only, not to ratings"),
    (("calibrations", "--calibration", "latest"), "error: --calibration applies to the leaderboard export only"),
    (("ratings", "--judge", "nobody"), "error: no judge named 'nobody' (known judges: j1, j2, v1, v2)"),
    (("ratings", "--task-family", "nope"), "error: task family 'nope' does not exist"),
])
def test_export_options_a_kind_cannot_honour_are_refused(two_judges, tmp_path, run_cli, args, message):
    out = tmp_path / "o.jsonl"
    r = run_cli("--database-url", two_judges, "export", args[0], out, *args[1:])
    assert r.exit_code == 2 and r.stderr.startswith(message) and "\n" not in r.stderr.strip(), r.stderr
    assert not out.exists()


# ------------------------------------------------------------------ case 6: standard output closed
@pytest.mark.parametrize("args", [["stats"], ["--version"], ["export", "ratings", "-"]])
def test_closed_stdout_is_one_line_and_a_nonzero_exit(tmp_path, args):
    argv = " ".join([sys.executable, "-m", "judgecal", "--database-url", f"sqlite:///{tmp_path / 'x.db'}", *args])
    proc = subprocess.run(["bash", "-c", f"{argv} >&-"], env=child_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr == ("error: standard output is closed; judgecal writes its results there (redirect it to a file "
                           "or /dev/null)\n")


# ------------------------------------------------------------------ case 7: ratings JSONL round trip byte for byte
@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_collected_ratings_round_trip_byte_identical(db_url, tmp_path, fmt):
    """Ratings collected by `judgecal rate` (judge_params built as temperature, max_tokens)
    exported, imported into a fresh database and exported again: the same bytes."""
    from stub_openai import StubServer

    from judgecal.views import importing
    from judgecal.views.export import export
    from judgecal.views.rate import run_rate

    responses = [{"task_family": "f", "prompt": f"q{i}", "model": "m", "response": f"answer {i}"} for i in range(3)]
    importing.import_generic(_jsonl(tmp_path / "r.jsonl", responses), "responses", "jsonl", url=db_url)
    with StubServer() as s:
        out = run_rate(judge="stub-judge", base_url=s.base_url, database_url=db_url, progress=False, temperature=0.5,
                       max_tokens=64)
    assert out["this_run"]["ok"] == 3
    first = tmp_path / f"first.{fmt}"
    export("ratings", fmt, first, db_url)
    text = first.read_text(encoding="utf-8")
    params = '{"max_tokens": 64, "temperature": 0.5}' if fmt == "jsonl" else '"{""max_tokens"": 64, ""temperature"": 0.5}"'
    assert text.count(params) == 3
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    importing.import_generic(first, "ratings", fmt, url=fresh)
    second = tmp_path / f"second.{fmt}"
    export("ratings", fmt, second, fresh)
    assert second.read_bytes() == first.read_bytes()
    # and back into the database it came from: nothing added, the same bytes again
    assert importing.import_generic(second, "ratings", fmt, url=db_url)["added"]["rating"] == 0
    third = tmp_path / f"third.{fmt}"
    export("ratings", fmt, third, db_url)
    assert third.read_bytes() == first.read_bytes()


# ------------------------------------------------------------------ case 9: real importers, names and duplicates
def _json(path: Path, data) -> Path:
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return path


LONG = "g" * 201


@pytest.mark.parametrize("name,records,message", [
    ("outputs.json", [{"instruction": "i", "output": "o", "generator": LONG}],
     "outputs.json:2: field 'generator' is 201 characters long; at most 200 are stored"),
    ("annotations.json", [{"instruction": "i", "output_1": "a", "generator_1": "base", "output_2": "b",
                           "generator_2": LONG, "annotator": "ann", "preference": 2}],
     "annotations.json:2: field 'generator_2' is 201 characters long; at most 200 are stored"),
    ("annotations.json", [{"instruction": "i", "output_1": "a", "generator_1": LONG, "output_2": "b",
                           "generator_2": "m", "annotator": "ann", "preference": 2}],
     "annotations.json:2: field 'generator_1' is 201 characters long; at most 200 are stored"),
    ("annotations.json", [{"instruction": "i", "output_1": "a", "generator_1": "base", "output_2": "b",
                           "generator_2": "m", "annotator": "a" * 301, "preference": 2}],
     "annotations.json:2: field 'annotator' is 301 characters long; at most 300 are stored"),
])
def test_alpaca_eval_over_long_names_are_file_line_errors(db_url, tmp_path, run_cli, name, records, message):
    f = _json(tmp_path / name, records)
    r = run_cli("--database-url", db_url, "import", "alpaca-eval", f)
    assert r.exit_code == 2 and r.stderr.strip() == f"error: {tmp_path}/{message}", r.stderr


@pytest.mark.parametrize("command", ["pandalm", "alpaca-eval"])
def test_over_long_task_family_is_refused(db_url, tmp_path, run_cli, command):
    f = _json(tmp_path / "x.json", [{"instruction": "i", "output": "o", "generator": "g"}])
    r = run_cli("--database-url", db_url, "import", command, f, "--task-family", "f" * 201)
    assert r.exit_code == 2
    # refused at the CLI before any work (issue 23: every column's limit checked before work starts)
    err = r.stderr.strip()
    assert err.count("\n") == 0 and "--task-family" in err and "201 characters; at most 200 are stored" in err, err


PANDALM = {"idx": 1, "motivation_app": "x", "cmp_key": "alpha_beta", "instruction": "Say hi", "input": "",
           "response1": "hi", "response2": "hello there", "annotator1": 1, "annotator2": 1, "annotator3": 0}


def test_pandalm_conflicting_duplicate_names_the_earlier_line(db_url, tmp_path, run_cli):
    other = dict(PANDALM, idx=2, instruction="Other", annotator1=2)
    f = _json(tmp_path / "p.json", [PANDALM, other, dict(PANDALM, annotator1=2)])
    r = run_cli("--database-url", db_url, "import", "pandalm", f)
    assert r.exit_code == 2, r.stderr
    assert r.stderr.strip() == (f"error: {f}:26: record conflicts with line 2 (same instruction, input, models and "
                                'responses, different values: {"annotator1": "a", "annotator2": "a", "annotator3": '
                                '"tie"} there, {"annotator1": "b", "annotator2": "a", "annotator3": "tie"} here); remove '
                                "one of them"), r.stderr
    assert "\n" not in r.stderr.strip()
    r = run_cli("--database-url", db_url, "stats", "--format", "json")
    assert json.loads(r.stdout) == []  # nothing written: no task family at all


def test_pandalm_exact_repeats_are_kept_once_with_a_warning(db_url, tmp_path, run_cli):
    f = _json(tmp_path / "p.json", [PANDALM, dict(PANDALM, idx=7), PANDALM])
    r = run_cli("--database-url", db_url, "import", "pandalm", f, "--format", "json")
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["added"]["expert_label"] == 3 and out["added"]["response"] == 2
    assert f"{f}: 2 record(s) repeat an earlier record exactly and were imported once (lines 14, 26)" in out["warnings"]
