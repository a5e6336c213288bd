"""The ratings list's content order as one stored, indexed text: ``rating.content_key``.

A page of ratings is shown in content order: task family name, item prompt SHA-256, the
answer's model, the answer's text SHA-256, judge key, sample index, texts compared by code
point (never row-id order, so every database holding the same data shows the same page). On a
million ratings, sorting the joined rows in that order took 0.7-1.4 s per page; the order stored
as one column with a B-tree index answers a page by walking the index (docs/performance.md).

``content_key`` is those six parts joined so that comparing two keys by code point compares
the six-tuples: each free-text part (family name, model) has every U+0001 doubled as U+0001
U+0002 and ends with U+0001 U+0001, which sorts below every character a name can hold (U+0000
cannot be stored on PostgreSQL); the SHA-256 digests and the judge key are 64 hexadecimal
digits each; the sample index is written as ``sample_index + 2**31`` in 10 decimal digits (every
32-bit integer, negative ones included, in numeric order). PostgreSQL stores the column with
``COLLATE "C"`` (byte order of UTF-8 = code-point order), SQLite compares it with BINARY.

The database fills the column itself, whoever writes the rating, and computes it again when
another client renames a family or a model (triggers of migration 0008,
``migrations/versions/0008_rating_content_key.py``): :func:`rating_content_key` is the same
definition in Python, which the tests hold the trigger's keys to on both dialects.
"""

from __future__ import annotations

#: ends a free-text part; sorts below every character of a part
END = "\x01\x01"
#: the sample index is written plus this offset, in :data:`SAMPLE_DIGITS` digits
SAMPLE_OFFSET = 2**31
SAMPLE_DIGITS = 10


def text_part(text: str) -> str:
    """One free-text part of a key: ``text`` with U+0001 doubled as U+0001 U+0002, then :data:`END`."""
    return text.replace("\x01", "\x01\x02") + END


def rating_content_key(family: str, prompt_sha256: str, model: str, text_sha256: str, judge_key: str,
                       sample_index: int) -> str:
    """The ``rating.content_key`` of a rating (module doc): keys compare by code point as the
    tuples (family, prompt_sha256, model, text_sha256, judge_key, sample_index) do.

    Raises ValueError when a digest or the judge key is not 64 characters or the sample index is
    outside the 32-bit range the column holds."""
    for name, digest in (("prompt_sha256", prompt_sha256), ("text_sha256", text_sha256), ("judge_key", judge_key)):
        if len(digest) != 64:
            raise ValueError(f"{name} must be 64 hexadecimal digits, got {len(digest)} characters")
    if not -SAMPLE_OFFSET <= sample_index < SAMPLE_OFFSET:
        raise ValueError(f"sample_index {sample_index} is outside the 32-bit range")
    return (text_part(family) + prompt_sha256 + text_part(model) + text_sha256 + judge_key
            + str(sample_index + SAMPLE_OFFSET).zfill(SAMPLE_DIGITS))


def family_range(family: str) -> tuple[str, str]:
    """[low, high): the keys of the ratings of ``family`` are exactly those in this range (the
    part after a family's name starts with a hexadecimal digit, above U+0001 U+0002)."""
    part = text_part(family)
    return part, part[:-1] + "\x02"
