"""Issue 23 break-it pass (a helper acting as a new user): each defect it found, on both dialects
where the database is involved."""

from __future__ import annotations

import json
import re

import pytest
from sqlalchemy import event, inspect
from sqlalchemy.engine import Engine

from judgecal.db import engine as eng
from judgecal.db import migrate

from test_migration_roundtrip import _fill, _snapshot


class _InterruptAt:
    """Raise KeyboardInterrupt (as Ctrl-C does) just before the first statement matching ``pattern``."""

    def __init__(self, pattern: str):
        self.pattern, self.fired = re.compile(pattern, re.I), False

    def __call__(self, conn, cursor, statement, params, context, executemany):
        if not self.fired and self.pattern.search(statement):
            self.fired = True
            raise KeyboardInterrupt

    def __enter__(self):
        event.listen(Engine, "before_cursor_execute", self)
        return self

    def __exit__(self, *exc):
        event.remove(Engine, "before_cursor_execute", self)


def _tables(engine) -> set[str]:
    return set(inspect(engine).get_table_names())


@pytest.mark.parametrize("target, at", [
    ("0001", r"DELETE FROM pairwise_judgment"),            # after 0005 dropped imported_file, 0004 dropped columns
    ("0001", r"INSERT INTO _alembic_tmp_pairwise_judgment|ALTER TABLE pairwise_judgment DROP COLUMN baseline_side"),
    ("base", r'DROP TABLE "?response"?'),                  # half the tables dropped
    ("base", r"DELETE FROM alembic_version"),              # every table dropped, the stamp not yet
])
def test_interrupted_downgrade_changes_nothing(db_url, run_cli, target, at):
    """A Ctrl-C in the middle of `db downgrade --yes` rolls the whole run back, on SQLite too (its
    DDL used to run outside the transaction: imported_file dropped while the database stayed at
    0005), and says "interrupted", exit 130, not SQLAlchemy's "Can't reconnect until invalid
    transaction is rolled back"."""
    engine = eng.create(db_url)
    try:
        migrate.upgrade(engine, "head")
        _fill(engine)
        before, tables = _snapshot(engine), _tables(engine)
        with _InterruptAt(at) as hook:
            r = run_cli("--database-url", db_url, "db", "downgrade", target, "--yes")
        assert hook.fired, at
        assert r.exit_code == 130, r
        assert "error" not in r.stderr and "reconnect" not in r.stderr, r
        engine.dispose()
        assert migrate.current(engine)[0] == migrate.head_revision()
        assert _tables(engine) == tables
        assert _snapshot(engine) == before
        # and the same downgrade, not interrupted, then works
        r = run_cli("--database-url", db_url, "db", "downgrade", target, "--yes")
        assert r.exit_code == 0 and f"at revision {target}" in r.stdout, r
        r = run_cli("--database-url", db_url, "db", "upgrade")
        assert r.exit_code == 0, r
    finally:
        engine.dispose()


def test_interrupted_upgrade_changes_nothing(db_url, run_cli):
    """A Ctrl-C during `db upgrade` (0001 -> head) leaves the database at 0001 with 0001's tables:
    no imported_file table created behind the revision's back (a later upgrade then failed with
    'table imported_file already exists')."""
    engine = eng.create(db_url)
    try:
        migrate.upgrade(engine, "0001")
        tables = _tables(engine)
        with _InterruptAt(r"CREATE TABLE imported_file") as hook:
            r = run_cli("--database-url", db_url, "db", "upgrade")
        assert hook.fired and r.exit_code == 130, r
        engine.dispose()
        assert migrate.current(engine)[0] == "0001"
        assert _tables(engine) == tables and "imported_file" not in tables
        r = run_cli("--database-url", db_url, "db", "upgrade")
        assert r.exit_code == 0 and f"at revision {migrate.head_revision()}" in r.stdout, r
    finally:
        engine.dispose()


# ------------------------------------------------------------------ leaderboard --lc-weights
BASELINE = "gpt4_1106_preview"


def _alpaca_subset(tmp_path, data_dir, db_url, run_cli, *, gamed_verdicts: bool = False) -> None:
    """The real annotations of a few AlpacaEval models (and, with ``gamed_verdicts``, two of them
    again under the names of the gamed baselines, so that the judge's own verdicts on them exist)."""
    import shutil

    res = data_dir / "alpaca_eval" / "results"
    folders = [res / n for n in (BASELINE, "claude-2", "gpt4_gamed")]
    if gamed_verdicts:
        for src, name in (("alpaca-7b_verbose", f"{BASELINE}_verbose"), ("alpaca-7b_concise", f"{BASELINE}_concise")):
            dst = tmp_path / "results" / name
            shutil.copytree(res / src, dst)
            folders.append(dst)
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    r = run_cli("--database-url", db_url, "import", "alpaca-eval", *folders)
    assert r.exit_code == 0, r


def _weights(tmp_path, data_dir):
    src = (data_dir / "alpaca_eval" / "length_controlled_v1_weights.csv").read_text()
    assert f"\n{BASELINE}_verbose,-1.58" in src
    mod = tmp_path / "my_weights.csv"
    mod.write_text(src.replace(f"\n{BASELINE}_verbose,-1.58", f"\n{BASELINE}_verbose,-5.58"))
    return mod


def test_lc_weights_named_in_the_title_and_the_calibration_strength(tmp_path, data_dir, db_url, run_cli):
    """`leaderboard --lc-weights FILE` moved LC and the calibrated column while the title still said
    'LC regulariser: AlpacaEval (packaged)' and the strength note 'of the packaged AlpacaEval
    regulariser' (in table and Markdown; JSON's strength_from too)."""
    _alpaca_subset(tmp_path, data_dir, db_url, run_cli)
    mod = _weights(tmp_path, data_dir)
    base = ["--database-url", db_url, "leaderboard", "--baseline", BASELINE, "--bootstrap", "0"]
    plain = json.loads(run_cli(*base, "--format", "json").stdout)
    r = run_cli(*base, "--format", "json", "--lc-weights", mod)
    assert r.exit_code == 0, r
    board = json.loads(r.stdout)
    assert board["calibration"]["gamma"] != pytest.approx(plain["calibration"]["gamma"])  # the file changed it
    assert "packaged AlpacaEval regulariser" not in board["calibration"]["strength_from"]
    assert str(mod) in board["calibration"]["strength_from"] and board["lc"]["weights_file"] == str(mod)
    assert plain["lc"]["weights_file"] is None
    for fmt in ("table", "markdown"):
        r = run_cli(*base, "--format", fmt, "--lc-weights", mod)
        assert r.exit_code == 0, r
        out = " ".join(r.output.split())
        assert "(packaged)" not in out and "packaged AlpacaEval regulariser" not in out, out
        assert f"LC regulariser: AlpacaEval (GLM weights from {mod})" in out, out
        r = run_cli(*base, "--format", fmt)
        assert "LC regulariser: AlpacaEval (packaged)" in " ".join(r.output.split())


def test_lc_weights_refused_where_the_regulariser_does_not_use_them(tmp_path, data_dir, db_url, run_cli):
    """--lc-weights with --lc-regulariser none or verdicts (or auto choosing the judge's verdicts)
    was silently ignored."""
    _alpaca_subset(tmp_path, data_dir, db_url, run_cli, gamed_verdicts=True)
    mod = _weights(tmp_path, data_dir)
    base = ["--database-url", db_url, "leaderboard", "--baseline", BASELINE, "--bootstrap", "0", "--lc-weights", mod]
    for reg in ("none", "verdicts", "auto"):
        r = run_cli(*base, "--lc-regulariser", reg)
        assert r.exit_code == 2 and "--lc-weights" in r.stderr and "--lc-regulariser alpaca-eval" in r.stderr, (reg, r)
        assert "Traceback" not in r.output
    r = run_cli(*base, "--lc-regulariser", "alpaca-eval", "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["lc"]["weights_file"] == str(mod), r


# ------------------------------------------------------------------ hostile names in terminal tables
def test_newline_in_a_name_stays_on_its_row_in_terminal_tables(tmp_path, db_url, run_cli):
    """A model named "gpt-5\\nclaude-9" was printed on two lines of the leaderboard's model column
    (the second line reading as another model's row, without numbers); tabs and escapes were
    already shown as <U+XXXX>: the newline now is too, in every terminal table."""
    rows = []
    for i in range(3):
        for model, score in (("gpt-5\nclaude-9", 7), ("plain", 5)):
            rows.append({"task_family": "fam", "prompt": f"P{i}", "model": model, "response": f"{model} {i}",
                         "judge": "J", "scale_min": 1, "scale_max": 10, "score": score})
    f = tmp_path / "r.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    assert run_cli("--database-url", db_url, "import", "jsonl", "--kind", "ratings", f).exit_code == 0
    r = run_cli("--database-url", db_url, "leaderboard", "--judge", "J", "--bootstrap", "0", "--columns", "model,raw")
    assert r.exit_code == 0, r
    assert "gpt-5<U+000A>" in r.stdout, r.stdout  # (the column may fold it further on)
    assert not any(line.strip("│ ").startswith("claude-9") for line in r.stdout.splitlines()), r.stdout
    from judgecal.report.tables import Col, board_table, simple_table
    from rich.console import Console

    cols = [Col("model", "model", 0, "name"), Col("x", "x", 0, "ci")]
    for table in (board_table("t", cols, [["a\nb", "0.5 [0.1, 0.9]"]], 20)[0],
                  simple_table("t", ["model", "x"], [["a\nb", 1.5]])):
        con = Console(record=True, width=60)
        con.print(table)
        assert "a<U+000A>b" in con.export_text()


# ------------------------------------------------------------------ empty names
@pytest.mark.parametrize("args", [
    ("check", "--judge", ""),                      # checked every judge
    ("check", "--task-family", " "),
    ("leaderboard", "--task-family", ""),          # every family
    ("leaderboard", "--judge", ""),
    ("leaderboard", "--calibration-from", ""),
    ("leaderboard", "--baseline", ""),
    ("report", "--judge", ""),
    ("fit", "--task-family", "fam", "--judge", "J", "--verbosity-family", ""),
    ("export", "ratings", "-", "--judge", ""),
    ("rate", "--judge", "x", "--base-url", "http://127.0.0.1:9/v1", "--judge-name", ""),  # used the model name
    ("rate", "--judge", "\t", "--base-url", "http://127.0.0.1:9/v1"),
])
def test_an_empty_name_is_refused_not_read_as_absent(db_url, run_cli, args):
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    r = run_cli("--database-url", db_url, *args)
    assert r.exit_code == 2, r
    assert "is empty: it names nothing" in r.stderr and "Traceback" not in r.output, r


# ------------------------------------------------------------------ hostile file names in messages
def test_file_names_in_warnings_and_errors_are_shown_as_they_are(tmp_path, db_url, run_cli):
    """A warning read its message as rich markup: the file '[bold]big.jsonl' was named 'big.jsonl'
    (the wrong file); an error or warning printed a newline or an escape sequence of a file name
    raw, forging a second line ('imported ...: all fine') or recolouring the terminal."""
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    rec = {"task_family": "fam", "prompt": "L", "model_a": "X", "response_a": "x", "model_b": "Y", "response_b": "y",
           "preference": "tie"}
    marked = tmp_path / "[bold]big.jsonl"
    marked.write_text(json.dumps(rec) + "\n" + json.dumps(rec) + "\n")  # an exact repeat: a warning naming the file
    r = run_cli("--database-url", db_url, "import", "jsonl", "--kind", "labels", marked)
    assert r.exit_code == 0, r
    assert "warning: " in r.stderr and "[bold]big.jsonl: 1 record(s) repeat" in r.stderr, r.stderr
    forged = tmp_path / "x\nimported jsonl:labels: all fine\x1b[32m.jsonl"
    forged.write_text(json.dumps({**rec, "preference": "sideways"}) + "\n")
    r = run_cli("--database-url", db_url, "import", "jsonl", "--kind", "labels", forged)
    assert r.exit_code == 2, r
    assert r.stderr.count("\n") == 1 and "\x1b" not in r.stderr, r.stderr
    assert "x<U+000A>imported jsonl:labels: all fine<U+001B>[32m.jsonl:1:" in r.stderr, r.stderr
    forged.rename(tmp_path / "y\u202e.jsonl")
    r = run_cli("--database-url", db_url, "import", "jsonl", "--kind", "labels", tmp_path / "y\u202e.jsonl")
    assert r.exit_code == 2 and "\u202e" not in r.stderr and "y<U+202E>.jsonl:1:" in r.stderr, r.stderr


# ------------------------------------------------------------------ calibration ids at their limits
@pytest.mark.parametrize("value, says", [
    ("9223372036854775808", "is not a calibration id (ids are at most 2147483647"),  # unexpected OverflowError / DataError
    ("2147483648", "is not a calibration id (ids are at most 2147483647"),
    ("\u00b2", "is not a calibration id: write it with the digits 0-9"),            # unexpected ValueError (int('²'))
    ("\u0661", "is not a calibration id: write it with the digits 0-9"),
])
@pytest.mark.parametrize("command", [("report",), ("check",), ("leaderboard", "--judge", "J"),
                                     ("export", "leaderboard", "-", "--judge", "J")])
def test_calibration_id_out_of_range_or_not_ascii_is_refused(db_url, run_cli, command, value, says):
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    r = run_cli("--database-url", db_url, *command, "--calibration", value)
    assert r.exit_code == 2 and says in r.stderr, r
    assert "unexpected" not in r.stderr


# ------------------------------------------------------------------ judge references of other digits
def test_judge_reference_with_non_ascii_digits(tmp_path, db_url, run_cli):
    """`--judge id:²` and `--judge ²` (a judge may be named so) ended in "unexpected ValueError:
    invalid literal for int()" ('²'.isdigit() is true); now id: takes the digits 0-9 only and a
    name of other digits is looked up as a name. rate's --judge (the model name sent) is untouched."""
    rows = [{"task_family": "fam", "prompt": f"P{i}", "model": "m", "response": f"answer {i}", "judge": "\u00b2",
             "scale_min": 1, "scale_max": 10, "score": 5} for i in range(3)]
    f = tmp_path / "r.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    assert run_cli("--database-url", db_url, "import", "jsonl", "--kind", "ratings", f).exit_code == 0
    for ref in ("id:\u00b2", "id:\u0661", "id:2147483648"):
        r = run_cli("--database-url", db_url, "fit", "--list", "--judge", ref)
        assert r.exit_code == 2 and "written with the digits 0-9" in r.stderr and "unexpected" not in r.stderr, r
    r = run_cli("--database-url", db_url, "leaderboard", "--judge", "\u00b2", "--bootstrap", "0", "--format", "json")
    assert r.exit_code == 0, r
    assert json.loads(r.stdout)["judge"] == "\u00b2"
    r = run_cli("--database-url", db_url, "leaderboard", "--judge", "\u0662", "--bootstrap", "0")
    assert r.exit_code == 2 and "no judge named" in r.stderr and "unexpected" not in r.stderr, r
    # the library look-up itself (judgecal serve hands it query values unchecked by the CLI)
    from judgecal.db import queries as q
    from judgecal.db.engine import get_engine, session_scope
    from judgecal.errors import NotFoundError, UsageError

    engine = get_engine(db_url)
    try:
        with session_scope(engine) as s:
            assert q.judge_by_name(s, "\u00b2").name == "\u00b2"
            with pytest.raises(NotFoundError, match="no judge named"):
                q.judge_by_name(s, "\u0661")
            with pytest.raises(UsageError, match="id: takes"):
                q.judge_by_name(s, "id:\u00b2")
    finally:
        engine.dispose()


# ------------------------------------------------------------------ win-rate options that did nothing
def test_win_rate_options_without_their_partner_are_refused(tmp_path, db_url, run_cli):
    """`leaderboard --baseline B --compare-column X` without --compare-to, and `--tokenizer T`
    without --length-unit tokens, printed the board as if they were not given (exit 0)."""
    rows = [{"task_family": "fam", "prompt": f"P{i}", "model_a": mm, "response_a": f"{mm} answer {i} " + "x" * (i % 9),
             "model_b": "base", "response_b": f"baseline {i}", "judge": "WJ", "preference": float((i + k) % 2),
             "baseline": "b"} for i in range(12) for k, mm in enumerate(("m1", "m2"))]
    f = tmp_path / "v.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    assert run_cli("--database-url", db_url, "import", "jsonl", "--kind", "verdicts", f).exit_code == 0
    base = ["--database-url", db_url, "leaderboard", "--baseline", "base", "--bootstrap", "0"]
    r = run_cli(*base, "--compare-column", "score")
    assert r.exit_code == 2 and "--compare-to" in r.stderr, r
    for extra in ((), ("--length-unit", "words")):
        r = run_cli(*base, "--tokenizer", "words", *extra)
        assert r.exit_code == 2 and "applies to --length-unit tokens" in r.stderr, r
    r = run_cli(*base, "--tokenizer", "words", "--length-unit", "tokens", "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["tokenizer"] == "words", r


# ------------------------------------------------------------------ db upgrade to an older revision
def test_upgrade_to_a_revision_below_the_database_is_refused(db_url, run_cli):
    """`db upgrade 0001` (or `base`) on a database at 0005 did nothing and exited 0; `db downgrade`
    to a revision above the database's was already refused."""
    assert run_cli("--database-url", db_url, "db", "upgrade", "0003").exit_code == 0
    for rev in ("0002", "0001", "base"):
        r = run_cli("--database-url", db_url, "db", "upgrade", rev)
        assert r.exit_code == 2 and "never goes down" in r.stderr and f"db downgrade {rev}" in r.stderr, r
    assert run_cli("--database-url", db_url, "db", "upgrade", "0003").exit_code == 0  # where it is: nothing to do
    r = run_cli("--database-url", db_url, "db", "upgrade")
    head = migrate.head_revision()  # 0005 when this was written; every later migration moves it
    assert r.exit_code == 0 and f"at revision {head}" in r.stdout, r
    r = run_cli("--database-url", db_url, "db", "upgrade", "0004")
    assert r.exit_code == 2 and f"at revision {head}, above it" in r.stderr, r


def test_fit_tokenizer_without_token_lengths_is_refused(tmp_path, db_url, run_cli):
    """`fit --tokenizer X --length-unit words` fitted on words and never used X (exit 0): refused
    before any work; with --length-unit tokens, or tokens among --select-units, it is used."""
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    base = ("--database-url", db_url, "fit", "--task-family", "nofam", "--judge", "nojudge")
    r = run_cli(*base, "--length-unit", "words", "--tokenizer", "gpt2")
    assert r.exit_code == 2 and "--tokenizer gpt2 applies to token lengths" in r.stderr and "--length-unit words" in r.stderr, r
    r = run_cli(*base, "--length-unit", "chars", "--tokenizer", "gpt2", "--select-units", "chars,words")
    assert r.exit_code == 2 and "--select-units chars,words" in r.stderr, r
    # used: past the option check, to the look-up of the family that does not exist
    for extra in (("--length-unit", "tokens", "--tokenizer", "smollm2"),
                  ("--length-unit", "words", "--tokenizer", "smollm2", "--select-units", "words,tokens")):
        r = run_cli(*base, *extra)
        assert "applies to token lengths" not in r.stderr and "Traceback" not in r.output, r
    r = run_cli(*base, "--length-unit", "words")  # the default tokenizer, not given: no refusal
    assert "applies to token lengths" not in r.stderr


def test_control_characters_in_names_are_visible_in_markdown():
    """Issue 23 item 6 (break-it): a name 'a\\nb' or 'a\\tb' read as 'a b' in Markdown tables
    and headings (whitespace collapsed); now shown as in the terminal, <U+000A> / <U+0009>,
    and still one table row when rendered by a CommonMark library."""
    from markdown_it import MarkdownIt

    from judgecal.report.render_markdown import md_cell, md_table

    assert md_cell("a\nb") == "a&lt;U+000A&gt;b" and md_cell("a\tb") == "a&lt;U+0009&gt;b"
    assert md_cell("gpt4_1106 [0.5, 0.6]") == "gpt4_1106 [0.5, 0.6]"  # plain text as before
    table = md_table(["model", "win rate"], [["x\ny", "50.0"], ["x y", "40.0"]])
    html = MarkdownIt("commonmark").enable("table").render(table)
    assert html.count("<tr>") == 3 and ">x&lt;U+000A&gt;y</td>" in html and ">x y</td>" in html
