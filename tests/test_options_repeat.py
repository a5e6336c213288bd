"""Issue 18 item 7, nothing silent: an option that takes one value, given twice, is refused (one
line, exit 2) on every command, `fit --task-family A --task-family B` first of all; every
repeatable option uses all its values, and an exact repeat counts once with a note."""

from __future__ import annotations

import json

import click
import pytest

from judgecal.cli import cli
from judgecal.cliopts import StrictCommand, StrictGroup

FAMILIES = ("f1", "f2", "f3")


def _commands(cmd: click.Command = cli, path: tuple[str, ...] = ()):
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name in sorted(cmd.commands):
            yield from _commands(cmd.commands[name], path + (name,))


def _repeat_argv(path: tuple[str, ...], opt: click.Option) -> list[str]:
    """``path`` with ``opt`` given twice (two different values where it takes one)."""
    if opt.is_flag and opt.secondary_opts:
        twice = [opt.opts[0], opt.secondary_opts[0]]
    elif opt.is_flag:
        twice = [opt.opts[0], opt.opts[0]]
    else:
        twice = [opt.opts[0], *["1"] * opt.nargs, opt.opts[0], *["2"] * opt.nargs]
    if not path:  # an option of the group itself, before a command
        return twice + ["stats"]
    return list(path) + twice


def _single_valued():
    for path, cmd in _commands():
        for p in cmd.params:
            if isinstance(p, click.Option) and not p.multiple and not p.count and not p.is_eager:
                yield pytest.param(path, p, id=" ".join(path + (p.opts[0],)) or p.opts[0])


def test_every_command_is_strict():
    """A command added without the strict classes (e.g. `@click.command` + add_command) fails here."""
    for path, cmd in _commands():
        assert isinstance(cmd, StrictGroup if isinstance(cmd, click.Group) else StrictCommand), path


# ---------------------------------------------------------------- refused
def test_fit_refuses_a_repeated_task_family(run_cli, home):
    r = run_cli("fit", "--task-family", "llmbar/Natural", "--task-family", "llmbar/Adversarial_Neighbor",
                "--judge", "GPT-4")
    assert r.exit_code == 2, r
    assert r.stderr.splitlines() == [
        "error: fit takes one --task-family (got llmbar/Natural, llmbar/Adversarial_Neighbor): run one fit per "
        "family, or import the sets under one family name (`judgecal import ... --task-family NAME`) to fit them "
        "together"]
    assert r.stdout == ""
    assert not home.exists() or not any(home.rglob("*.db")), "nothing may run (no database opened)"


def test_fit_refuses_a_repeated_family_on_a_real_database(run_cli, sqlite_url, tmp_path):
    """With the data there (both families fittable), still refused, and no calibration stored."""
    _seed(tmp_path, run_cli, sqlite_url)
    r = run_cli("--database-url", sqlite_url, "fit", "--task-family", "f1", "--task-family", "f2", "--judge", "J",
                "--length-unit", "chars", "--bootstrap", "0", "--folds", "0")
    assert r.exit_code == 2 and "fit takes one --task-family (got f1, f2)" in r.stderr, r
    listed = run_cli("--database-url", sqlite_url, "fit", "--list", "--format", "json")
    assert listed.exit_code == 0 and json.loads(listed.stdout) == []


@pytest.mark.parametrize("argv, message", [
    (["fit", "--judge", "GPT-4", "--judge", "ChatGPT"], "fit takes one --judge (got GPT-4, ChatGPT): give it once"),
    (["report", "--judge", "a", "--judge", "b"], "report takes one --judge (got a, b)"),
    (["leaderboard", "--seed", "1", "--seed", "2"], "leaderboard takes one --seed (got 1, 2)"),
    (["check", "--calibration", "3", "--calibration", "4"], "check takes one --calibration (got 3, 4)"),
    (["import", "llmbar", "x", "--task-family", "a", "--task-family", "b"], "import llmbar takes one --task-family (got a, b)"),
    (["export", "ratings", "-", "--judge", "a", "--judge", "b"], "export takes one --judge (got a, b)"),
    (["rate", "--judge", "j", "--concurrency", "2", "--concurrency", "8"], "rate takes one --concurrency (got 2, 8)"),
    (["mc", "score", "--model", "m", "--task", "t", "--limit", "5", "--limit", "10"], "mc score takes one --limit (got 5, 10)"),
    (["fit", "--p-bounds", "1", "2", "--p-bounds", "1", "3"], "fit takes one --p-bounds (got 1 2, 1 3)"),
    (["fit", "--density", "--density"], "fit takes --density once (given 2 times)"),
    (["mc", "score", "--fewshot-as-multiturn", "--no-fewshot-as-multiturn"],
     "mc score takes one of --fewshot-as-multiturn/--no-fewshot-as-multiturn (got --fewshot-as-multiturn, "
     "--no-fewshot-as-multiturn): give one"),
    (["--database-url", "sqlite:///a.db", "--database-url", "sqlite:///b.db", "stats"],
     "judgecal takes one --database-url (got sqlite:///a.db, sqlite:///b.db)"),
])
def test_repeated_single_valued_option_is_one_line(run_cli, home, argv, message):
    r = run_cli(*argv)
    assert r.exit_code == 2, r
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], r
    assert "Traceback" not in r.output


def test_a_secret_in_a_repeated_value_is_scrubbed(run_cli, home):
    r = run_cli("--database-url", "postgresql+psycopg://u:s3cret@h/db", "--database-url", "sqlite:///b.db", "stats")
    assert r.exit_code == 2 and "s3cret" not in r.output and "--database-url" in r.stderr, r


@pytest.mark.parametrize("path, opt", list(_single_valued()))
def test_every_single_valued_option_refuses_a_repeat(run_cli, home, path, opt):
    """The audit, as a test: every option of every command that takes one value (flags too)."""
    r = run_cli(*_repeat_argv(path, opt))
    assert r.exit_code == 2, r
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and opt.opts[0] in lines[0] and " takes " in lines[0], r


def test_once_is_fine_and_help_twice_is_help(run_cli, home):
    assert run_cli("fit", "--density", "--task-family", "x").exit_code == 2  # (usage: --judge missing), not a repeat
    assert "takes" not in run_cli("fit", "--density", "--task-family", "x").stderr
    r = run_cli("fit", "-h", "--help")
    assert r.exit_code == 0 and "Usage:" in r.stdout


# ---------------------------------------------------------------- multiple options: every value used
MULTIPLE = {  # every multiple=True option of the CLI and the test below that shows its values are all used
    ("rate", "task_families"): "test_rate_uses_every_task_family",
    ("report", "families"): "test_report_transfers_to_every_family",
    ("report", "calibrations"): "test_report_every_calibration",
    ("leaderboard", "families"): "test_leaderboard_and_check_use_every_family",
    ("check", "families"): "test_leaderboard_and_check_use_every_family",
    ("publish", "families"): "test_leaderboard_and_check_use_every_family",
    ("export", "families"): "test_export_uses_every_family",
    ("import alpaca-eval", "pairs"): "test_alpaca_eval_every_pair",
    ("mc score", "include_paths"): "passed whole to lm-eval's TaskManager(include_path=[...])",
    ("mc score", "datasets_"): "test_mc_dataset_given_two_folders_is_refused",
}


def test_every_multiple_option_is_accounted_for():
    found = {(" ".join(path), p.name) for path, cmd in _commands() for p in cmd.params
             if isinstance(p, click.Option) and p.multiple}
    assert found == set(MULTIPLE), "a new repeatable option: show its consumer uses every value (add a test here)"


def _seed(tmp_path, run_cli, url, families=FAMILIES):
    """Judge J's ratings and expert labels of models a and b in each family (40 items each)."""
    rows, labels = [], []
    for fam in families:
        for i in range(40):
            for k, mo in enumerate(("a", "b")):
                rows.append({"task_family": fam, "prompt": f"{fam} q{i}", "model": mo,
                             "response": f"{k} " + "x" * (1 + i * (k == 0)), "judge": "J", "judge_model": "jm",
                             "scale_min": 1, "scale_max": 10, "score": 5 + (k == 0) + (i % 3 == 0)})
            labels.append({"task_family": fam, "prompt": f"{fam} q{i}", "model_a": "a", "response_a": "0 " + "x" * (1 + i),
                           "model_b": "b", "response_b": "1 x", "preference": "b" if i % 4 else "a"})
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "l.jsonl").write_text("".join(json.dumps(r) + "\n" for r in labels))
    assert run_cli("--database-url", url, "import", "jsonl", tmp_path / "r.jsonl", "--kind", "ratings").exit_code == 0
    assert run_cli("--database-url", url, "import", "jsonl", tmp_path / "l.jsonl", "--kind", "labels").exit_code == 0


def _fit(run_cli, url, family) -> int:
    r = run_cli("--database-url", url, "fit", "--task-family", family, "--judge", "J", "--length-unit", "chars",
                "--bootstrap", "0", "--folds", "0", "--format", "json")
    assert r.exit_code == 0, r
    return json.loads(r.stdout)["id"]


@pytest.fixture()
def seeded(tmp_path, run_cli, sqlite_url):
    _seed(tmp_path, run_cli, sqlite_url)
    return sqlite_url


def test_export_uses_every_family(seeded, run_cli, tmp_path):
    def families(*args):
        out = tmp_path / "out.jsonl"
        r = run_cli("--database-url", seeded, "export", "responses", out, *args)
        assert r.exit_code == 0, r
        return r, sorted({json.loads(line)["task_family"] for line in out.read_text().splitlines()})

    assert families("--task-family", "f1", "--task-family", "f3")[1] == ["f1", "f3"]
    r, fams = families("--task-family", "f2", "--task-family", "f2")
    assert fams == ["f2"] and "note: --task-family f2 given more than once: counted once" in r.stderr


def test_leaderboard_and_check_use_every_family(seeded, run_cli):
    ids = {fam: _fit(run_cli, seeded, fam) for fam in ("f1", "f2")}
    r = run_cli("--database-url", seeded, "leaderboard", "--judge", "J", "--task-family", "f1", "--task-family", "f2",
                "--bootstrap", "0", "--format", "json")
    assert r.exit_code == 0, r
    board = json.loads(r.stdout)
    assert board["families"] == ["f1", "f2"] and board["calibrations"] == ids
    r = run_cli("--database-url", seeded, "check", "--judge", "J", "--task-family", "f1", "--task-family", "f2",
                "--min-agreement-gain", "-1", "--max-verbosity-winrate", "1", "--format", "json")
    checked = json.loads(r.stdout)
    text = json.dumps(checked["checks"])
    assert "f1" in text and "f2" in text and "f3" not in text
    r = run_cli("--database-url", seeded, "publish", "--judge", "J", "--task-family", "f1", "--task-family", "f2",
                "--bootstrap", "0", "--format", "json")
    assert r.exit_code == 0, r
    assert [b["task_family"] for b in json.loads(r.stdout)["boards"]] == ["f1", "f2"]


def test_report_transfers_to_every_family(seeded, run_cli):
    cid = _fit(run_cli, seeded, "f1")
    r = run_cli("--database-url", seeded, "report", "--calibration", str(cid), "--task-family", "f2",
                "--task-family", "f3", "--task-family", "f2", "--bootstrap", "0", "--format", "json")
    assert r.exit_code == 0, r
    entries = json.loads(r.stdout)["entries"]
    assert [(e["task_family"], e.get("source_family")) for e in entries] == [("f2", "f1"), ("f3", "f1")]
    assert "counted once" in r.stderr


def test_report_every_calibration(seeded, run_cli):
    ids = [_fit(run_cli, seeded, fam) for fam in ("f1", "f2")]
    r = run_cli("--database-url", seeded, "report", *[a for i in ids for a in ("--calibration", str(i))],
                "--bootstrap", "0", "--format", "json")
    assert r.exit_code == 0, r
    assert [e["calibration_id"] for e in json.loads(r.stdout)["entries"]] == ids


def test_rate_uses_every_task_family(tmp_path, run_cli, sqlite_url):
    from stub_openai import StubServer

    responses = [{"task_family": fam, "prompt": f"{fam} q{i}", "model": "m", "response": f"answer {i}"}
                 for fam in FAMILIES for i in range(3)]
    (tmp_path / "resp.jsonl").write_text("".join(json.dumps(r) + "\n" for r in responses))
    assert run_cli("--database-url", sqlite_url, "import", "jsonl", tmp_path / "resp.jsonl", "--kind", "responses").exit_code == 0
    with StubServer() as s:
        r = run_cli("--database-url", sqlite_url, "rate", "--judge", "stub", "--base-url", s.base_url,
                    "--task-family", "f1", "--task-family", "f3", "--task-family", "f1", "--format", "json")
    assert r.exit_code == 0, r
    assert json.loads(r.stdout)["this_run"]["ok"] == 6  # f1 and f3, 3 responses each; f2 left alone
    assert "note: --task-family f1 given more than once: counted once" in r.stderr


def test_alpaca_eval_every_pair(tmp_path, run_cli, sqlite_url):
    def outputs(name, gen, extra):
        path = tmp_path / name
        path.write_text(json.dumps([{"instruction": f"say {i}", "output": f"{i}" + " more" * extra, "generator": gen,
                                     "dataset": "d"} for i in range(4)]))
        return path

    short, mid, long_ = outputs("s.json", "m_concise", 0), outputs("m.json", "m", 3), outputs("l.json", "m_verbose", 9)
    r = run_cli("--database-url", sqlite_url, "import", "alpaca-eval", "--pair", short, long_, "--pair", mid, long_,
                "--format", "json")
    assert r.exit_code == 0, r
    assert json.loads(r.stdout)["added"]["verbosity_pair"] == 8


def test_mc_dataset_given_two_folders_is_refused(run_cli, home):
    r = run_cli("mc", "score", "--model", "m", "--task", "arc_easy", "--dataset", "allenai/ai2_arc=/a",
                "--dataset", "allenai/ai2_arc=/b")
    assert r.exit_code == 2 and "allenai/ai2_arc given two folders (/a, /b)" in r.stderr, r
