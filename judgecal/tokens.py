"""Token lengths of responses under a named tokenizer (``judgecal lengths``).

Tokenizer names: ``smollm2`` (the tokenizer of the pulled SmolLM2 folder; the default),
``hf:<folder>`` (any transformers tokenizer folder, loaded offline), and the tokenizer-free
units ``words`` (whitespace words), ``chars`` (Unicode code points), ``bytes`` (UTF-8 bytes).
Counts exclude special tokens (no BOS/EOS), so they measure the response text only.

**One identity per tokenizer** (:func:`canonical_name`): lengths are stored under the
tokenizer's identity, not under the name the user typed. ``smollm2`` is the identity of the
pulled SmolLM2 folder's tokenizer; ``hf:<folder>`` whose tokenizer files are byte-identical to
it (the same folder, a copy, a symlink) is stored as ``smollm2`` too; any other folder is
``hf:<absolute resolved folder>#<content hash>`` - so ``hf:./x``, ``hf:x/`` and ``hf:/abs/x`` are one
identity, no tokenizer is counted twice under two names, and a folder whose tokenizer files
changed is a new identity (its lengths are not mixed with those of the files before)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from sqlalchemy import select

from judgecal import config
from judgecal.db import models as m
from judgecal.db import queries as q
from judgecal.db.engine import get_engine, session_read_only, session_scope
from judgecal.errors import ModelError, ReadOnlyError, UsageError

FREE_UNITS = {"words": "n_words", "chars": "n_chars", "bytes": "n_bytes"}
#: Files whose bytes define a transformers tokenizer (those present are hashed).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "tokenizer.model",
                   "special_tokens_map.json", "added_tokens.json", "vocab.txt")


def _fingerprint(folder: Path) -> str | None:
    """SHA-256 over the tokenizer files present in ``folder`` (None when there is none)."""
    import hashlib

    h = hashlib.sha256()
    found = False
    for name in TOKENIZER_FILES:
        f = folder / name
        if f.is_file():
            found = True
            h.update(name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest() if found else None


_PINNED = re.compile(r"(.*)#([0-9a-f]{12})")


def _hf_folder(name: str) -> Path:
    """The folder of tokenizer ``hf:<folder>`` (not resolved). Raises UsageError naming the
    option and the folder when it is empty, missing, or holds none of :data:`TOKENIZER_FILES`."""
    raw = name[3:]
    pinned = None
    m = _PINNED.fullmatch(raw)
    if m and not Path(raw).expanduser().is_dir():  # an identity (canonical_name): folder#hash of its files
        raw, pinned = m.group(1), m.group(2)
    if not raw.strip():
        raise UsageError("--tokenizer hf: names no folder: use hf:<folder holding the tokenizer files>")
    folder = Path(raw).expanduser()
    if not folder.is_dir():
        raise UsageError(f"--tokenizer {name}: folder {folder} does not exist")
    found = _fingerprint(folder)
    if found is None:
        raise UsageError(f"--tokenizer {name}: folder {folder} holds no tokenizer files "
                         f"(expected one of {', '.join(TOKENIZER_FILES)})")
    if pinned is not None and found[:12] != pinned:
        raise UsageError(f"--tokenizer {name}: the tokenizer files in {folder} changed since lengths were stored "
                         f"under this name (their hash is now {found[:12]}): it is another tokenizer; give "
                         f"hf:{folder} to count with the files as they are")
    return folder


def canonical_name(name: str) -> str:
    """The one identity under which lengths of tokenizer ``name`` are stored (module doc).

    ``words``/``chars``/``bytes`` and ``smollm2`` are returned unchanged; ``hf:<folder>`` becomes
    ``smollm2`` when its tokenizer files equal the pulled SmolLM2 folder's, else
    ``hf:<absolute resolved folder>#<first 12 hex digits of the SHA-256 of its tokenizer files>``
    (a folder whose files changed is another tokenizer: its lengths are counted again, never
    mixed with the old ones under one name). Raises UsageError for an unknown name (as :func:`counter`)
    and for an ``hf:`` folder that is empty, missing or holds no tokenizer files."""
    if name in FREE_UNITS or name == "smollm2":
        return name
    if not name.startswith("hf:"):
        raise UsageError(f"unknown tokenizer {name!r}: use smollm2, hf:<folder>, words, chars or bytes")
    folder = _hf_folder(name).resolve()
    smol = config.default_model_dir()
    try:
        if smol.exists() and (smol.resolve() == folder or
                              (_fingerprint(folder) is not None and _fingerprint(folder) == _fingerprint(smol))):
            return "smollm2"
    except OSError:
        pass
    return f"hf:{folder}#{_fingerprint(folder)[:12]}"


def counter(name: str) -> Callable[[Sequence[str]], list[int]]:
    """A function mapping a list of texts to their token counts under tokenizer ``name``.

    Raises UsageError for an unknown name or an ``hf:`` folder without a loadable tokenizer (the
    message names --tokenizer and the folder), ModelError when the smollm2 folder or transformers
    is missing."""
    if name in FREE_UNITS:
        fn = {"words": lambda t: len(t.split()), "chars": len, "bytes": lambda t: len(t.encode("utf-8"))}[name]
        return lambda texts: [fn(t) for t in texts]
    if name == "smollm2":
        folder = config.default_model_dir()
        if not (folder / "config.json").exists():
            raise ModelError("the smollm2 tokenizer needs the local model: run `judgecal model pull` first")
    elif name.startswith("hf:"):
        folder = _hf_folder(name)
    else:
        raise UsageError(f"unknown tokenizer {name!r}: use smollm2, hf:<folder>, words, chars or bytes")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise ModelError("token lengths under a transformers tokenizer need the local extra: pip install 'judgecal[local]'") from None
    try:
        tok = AutoTokenizer.from_pretrained(str(folder))
    except (OSError, ValueError, TypeError, KeyError) as exc:  # files present but not a loadable tokenizer
        what = "--tokenizer " + name if name.startswith("hf:") else f"tokenizer {name}"
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
        raise UsageError(f"{what}: the tokenizer in {folder} cannot be loaded: {reason[:200]}") from None

    def count(texts: Sequence[str]) -> list[int]:
        enc = tok(list(texts), add_special_tokens=False)["input_ids"]
        return [len(ids) for ids in enc]

    return count


def fill_lengths(tokenizer: str = "smollm2", url: str | None = None, *, response_ids: Sequence[int] | None = None) -> dict:
    """Compute and store token lengths for every response (or those in ``response_ids``) that
    has none under the tokenizer's identity (:func:`canonical_name`). Returns {"tokenizer" (the
    identity), "added", "total"}. On a database open read-only (:func:`judgecal.db.engine.session_read_only`)
    with lengths missing: ReadOnlyError naming ``judgecal lengths --tokenizer <identity>``."""
    tokenizer = canonical_name(tokenizer)
    count = counter(tokenizer)
    engine = get_engine(url)
    added = 0
    with session_scope(engine) as s:
        have = select(m.TokenLength.response_id).where(m.TokenLength.tokenizer == tokenizer)
        stmt = select(m.Response.id, m.Response.text).where(m.Response.id.not_in(have)).order_by(m.Response.id)
        if response_ids is not None:
            stmt = stmt.where(m.Response.id.in_(list(response_ids)))
        todo = s.execute(stmt).all()
        if todo and session_read_only(s):  # say what to run, not the driver's "readonly database"
            raise ReadOnlyError(
                f"{len(todo)} response(s) have no token length under tokenizer {tokenizer} yet, and this database is "
                f"open read-only (judgecal serve): run `judgecal lengths --tokenizer {tokenizer}` on it, then reload")
        for start in range(0, len(todo), 2000):
            part = todo[start : start + 2000]
            counts = count([t for _, t in part])
            added += q.insert_ignore(
                s, m.TokenLength, [{"response_id": rid, "tokenizer": tokenizer, "n_tokens": n} for (rid, _), n in zip(part, counts)]
            )
        total = len(s.scalars(have).all())
    engine.dispose()
    return {"tokenizer": tokenizer, "added": added, "total": total}
