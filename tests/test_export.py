"""Exports round-trip through the importers into a fresh database."""

from __future__ import annotations

from pathlib import Path

import pytest

from judgecal.views.stats import collect_stats


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_export_import_round_trip(tmp_path, data_dir, run_cli, fmt):
    src = f"sqlite:///{tmp_path / 'src.db'}"
    dst = f"sqlite:///{tmp_path / 'dst.db'}"
    assert run_cli("--database-url", src, "import", "llmbar", data_dir / "llmbar" / "Adversarial_GPTInst").exit_code == 0
    d = data_dir / "alpaca_eval"
    assert run_cli("--database-url", src, "import", "alpaca-eval", "--pair",
                   d / "gpt4_1106_preview_concise.json", d / "gpt4_1106_preview_verbose.json").exit_code == 0
    for kind in ("responses", "labels", "ratings", "pairs"):
        f = tmp_path / f"{kind}.{fmt}"
        r = run_cli("--database-url", src, "export", kind, f)
        assert r.exit_code == 0, r
        r = run_cli("--database-url", dst, "import", fmt, f, "--kind", kind)
        assert r.exit_code == 0, r
    assert collect_stats(dst) == collect_stats(src)
    # and the exports of the copy are identical to the exports of the original
    for kind in ("labels", "ratings"):
        a, b = tmp_path / f"a.{fmt}", tmp_path / f"b.{fmt}"
        run_cli("--database-url", src, "export", kind, a)
        run_cli("--database-url", dst, "export", kind, b)
        assert a.read_text() == b.read_text()

    # "-" is standard output: the same bytes as the file, and no file named "-"
    r = run_cli("--database-url", src, "export", "ratings", "-", "--format", fmt)  # a.{fmt}: the last export above
    assert r.exit_code == 0 and r.stdout == (tmp_path / f"a.{fmt}").read_bytes().decode()
    assert "to standard output" in r.stderr and not Path("-").exists()


def test_export_file_permissions_and_missing_folder(tmp_path, data_dir, run_cli):
    """A new export gets the umask's permissions (not mkstemp's 0600), an overwritten one keeps
    its own; a missing folder is a usage error, not created."""
    import os
    import stat

    url = f"sqlite:///{tmp_path / 'src.db'}"
    assert run_cli("--database-url", url, "import", "llmbar", data_dir / "llmbar" / "Natural").exit_code == 0
    old = os.umask(0o022)
    try:
        new = tmp_path / "new.jsonl"
        assert run_cli("--database-url", url, "export", "labels", new).exit_code == 0
        assert stat.S_IMODE(new.stat().st_mode) == 0o644
        kept = tmp_path / "kept.csv"
        kept.write_text("x")
        kept.chmod(0o640)
        assert run_cli("--database-url", url, "export", "labels", kept).exit_code == 0
        assert stat.S_IMODE(kept.stat().st_mode) == 0o640 and kept.read_text().startswith("task_family")
    finally:
        os.umask(old)
    r = run_cli("--database-url", url, "export", "labels", tmp_path / "nope" / "x.jsonl")
    assert r.exit_code == 2 and "does not exist" in r.stderr and not (tmp_path / "nope").exists()
