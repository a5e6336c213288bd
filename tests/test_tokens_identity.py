"""One identity per tokenizer: `smollm2` and `hf:<its folder>` are tokenized once."""

from __future__ import annotations

import shutil

import pytest

from judgecal import config, tokens


@pytest.fixture()
def smol():
    folder = config.default_model_dir()
    if not (folder / "tokenizer.json").exists():
        pytest.skip("the local SmolLM2 folder is not pulled (`judgecal model pull`)")
    return folder


def test_canonical_names(smol, tmp_path, monkeypatch):
    assert tokens.canonical_name("smollm2") == "smollm2"
    assert tokens.canonical_name(f"hf:{smol}") == "smollm2"
    assert tokens.canonical_name(f"hf:{smol}/") == "smollm2"
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in tokens.TOKENIZER_FILES:
        if (smol / name).exists():
            shutil.copy(smol / name, copy / name)
    assert tokens.canonical_name(f"hf:{copy}") == "smollm2"  # byte-identical tokenizer files
    other = tmp_path / "other"
    other.mkdir()
    (other / "tokenizer.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    assert tokens.canonical_name("hf:other") == tokens.canonical_name(f"hf:{other}/") == f"hf:{other.resolve()}#{tokens._fingerprint(other.resolve())[:12]}"
    assert tokens.canonical_name("words") == "words"


def test_smollm2_and_its_folder_are_tokenized_once(smol, sqlite_url, data_dir, run_cli):
    assert run_cli("--database-url", sqlite_url, "import", "llmbar", data_dir / "llmbar" / "Natural").exit_code == 0
    first = tokens.fill_lengths("smollm2", sqlite_url)
    again = tokens.fill_lengths(f"hf:{smol}", sqlite_url)
    assert first["added"] == 200 and first["tokenizer"] == "smollm2"
    assert again == {"tokenizer": "smollm2", "added": 0, "total": 200}
