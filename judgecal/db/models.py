"""SQLAlchemy 2.0 models of the rating database (one schema for SQLite and PostgreSQL).

Natural keys make every import and every rating idempotent: re-importing a file or re-running
``judgecal rate`` never adds a duplicate row. Lengths are stored in UTF-8 bytes, characters and
whitespace-separated words on the response; token counts per named tokenizer in
``token_length``. Times are UTC.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Optional

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> dt.datetime:
    """The current time, timezone-aware UTC."""
    return dt.datetime.now(dt.timezone.utc)


def as_utc(value: dt.datetime) -> dt.datetime:
    """A stored time as an aware UTC datetime, the same on both dialects: SQLite gives back a
    naive datetime (stored as UTC), PostgreSQL an aware one."""
    return value.replace(tzinfo=dt.timezone.utc) if value.tzinfo is None else value.astimezone(dt.timezone.utc)


def iso_utc(value: dt.datetime | None) -> str | None:
    """A stored time as ISO 8601 text in UTC with its offset (``2026-12-03T18:09:59.946506+00:00``),
    the same on both dialects (:func:`as_utc`). None stays None."""
    return None if value is None else as_utc(value).isoformat()


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


Created = mapped_column(DateTime(timezone=True), default=utcnow, nullable=False)


class TaskFamily(Base):
    """A family of tasks that share a length distribution (code, summaries, chat...).

    ``l_ref`` fixes the reference length L_ref of the calibration; NULL means "the median
    length of the family", computed at fit time in the fit's length unit."""

    __tablename__ = "task_family"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    l_ref: Mapped[Optional[float]] = mapped_column(Float)
    description: Mapped[Optional[str]] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Item(Base):
    """A prompt (instruction) of a task family; unique on (family, SHA-256 of the prompt)."""

    __tablename__ = "item"
    __table_args__ = (UniqueConstraint("task_family_id", "prompt_sha256"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    task_family_id: Mapped[int] = mapped_column(ForeignKey("task_family.id", ondelete="CASCADE"), index=True)
    external_id: Mapped[Optional[str]] = mapped_column(String(200))
    prompt: Mapped[str] = mapped_column(Text)
    prompt_sha256: Mapped[str] = mapped_column(String(64))
    reference: Mapped[Optional[str]] = mapped_column(Text)
    source: Mapped[Optional[str]] = mapped_column(String(500))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


def _style_default(column: str):
    """A column default computing the Markdown count ``column`` from the inserted row's text
    (:func:`judgecal.calibrate.style.style_counts`), for rows inserted through SQLAlchemy
    without it; judgecal's bulk writer (judgecal.db.ingest) passes the counts itself."""
    from judgecal.calibrate.style import COLUMNS

    at = COLUMNS.index(column)

    def default(context) -> int | None:
        from judgecal.calibrate.style import style_counts

        text = context.get_current_parameters().get("text")
        return None if text is None else style_counts(text)[at]

    return default


class Response(Base):
    """A candidate response to an item by a producing model; unique on (item, model, SHA-256 of text).

    Lengths: ``n_bytes`` UTF-8 bytes, ``n_chars`` Unicode code points, ``n_words``
    whitespace-separated words (``len(text.split())``). Style (migration 0007; docs/style.md):
    Arena-Hard-Auto's Markdown counts outside fenced code blocks, ``md_headers`` (h1-h6),
    ``md_list_ordered``, ``md_list_unordered``, ``md_bold`` (``**``/``__`` pairs), computed from
    the text once, when the row is written (:func:`judgecal.calibrate.style.style_counts`);
    NULL only for a row written by another client than judgecal after the migration."""

    __tablename__ = "response"
    __table_args__ = (UniqueConstraint("item_id", "model", "text_sha256"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    item_id: Mapped[int] = mapped_column(ForeignKey("item.id", ondelete="CASCADE"), index=True)
    model: Mapped[str] = mapped_column(String(200), index=True)
    text: Mapped[str] = mapped_column(Text)
    text_sha256: Mapped[str] = mapped_column(String(64))
    n_bytes: Mapped[int] = mapped_column(Integer)
    n_chars: Mapped[int] = mapped_column(Integer)
    n_words: Mapped[int] = mapped_column(Integer)
    md_headers: Mapped[Optional[int]] = mapped_column(Integer, default=_style_default("md_headers"))
    md_list_ordered: Mapped[Optional[int]] = mapped_column(Integer, default=_style_default("md_list_ordered"))
    md_list_unordered: Mapped[Optional[int]] = mapped_column(Integer, default=_style_default("md_list_unordered"))
    md_bold: Mapped[Optional[int]] = mapped_column(Integer, default=_style_default("md_bold"))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class TokenLength(Base):
    """Length of a response in tokens under a named tokenizer (``hf:<folder>``, ``words``...)."""

    __tablename__ = "token_length"
    response_id: Mapped[int] = mapped_column(ForeignKey("response.id", ondelete="CASCADE"), primary_key=True)
    tokenizer: Mapped[str] = mapped_column(String(500), primary_key=True)
    n_tokens: Mapped[int] = mapped_column(Integer)


class Judge(Base):
    """A judge: model + endpoint (never with secrets) + prompt (name and SHA-256 of the exact
    template text) + sampling parameters + score scale. ``judge_key`` is the SHA-256 of that
    identity, so the same settings always map to the same row."""

    __tablename__ = "judge"
    id: Mapped[int] = mapped_column(primary_key=True)
    judge_key: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(String(300), index=True)
    model: Mapped[str] = mapped_column(String(300))
    endpoint: Mapped[str] = mapped_column(String(500))
    prompt_name: Mapped[str] = mapped_column(String(300))
    prompt_sha256: Mapped[str] = mapped_column(String(64))
    mode: Mapped[str] = mapped_column(String(20), default="pointwise")  # pointwise | pairwise
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    scale_min: Mapped[float] = mapped_column(Float)
    scale_max: Mapped[float] = mapped_column(Float)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


RATING_STATUSES = ("pending", "running", "ok", "unparsed", "failed")


class Rating(Base):
    """One pointwise judge call (or imported judge score) for a response.

    Unique on (response, judge, sample_index). ``status``: pending/running (claimed by a
    worker), ok (``score`` set), unparsed (raw output kept, ``error`` says why), failed
    (``error`` says why, after the capped retries). ``latency_s`` in seconds; token usage as
    the endpoint reported it."""

    __tablename__ = "rating"
    __table_args__ = (
        UniqueConstraint("response_id", "judge_id", "sample_index"),
        CheckConstraint("status IN ('pending','running','ok','unparsed','failed')", name="status"),
        Index("ix_rating_judge_status", "judge_id", "status"),
        Index("ix_rating_content_key", "content_key"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    response_id: Mapped[int] = mapped_column(ForeignKey("response.id", ondelete="CASCADE"), index=True)
    judge_id: Mapped[int] = mapped_column(ForeignKey("judge.id", ondelete="CASCADE"))
    sample_index: Mapped[int] = mapped_column(Integer, default=0)
    status: Mapped[str] = mapped_column(String(20))
    raw_output: Mapped[Optional[str]] = mapped_column(Text)
    score: Mapped[Optional[float]] = mapped_column(Float)
    expected_score: Mapped[Optional[float]] = mapped_column(Float)
    # the judge's probability for every score of the scale (judgecal.judge.distribution); NULL: none read
    distribution: Mapped[Optional[dict[str, Any]]] = mapped_column(JSON(none_as_null=True))
    error: Mapped[Optional[str]] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    latency_s: Mapped[Optional[float]] = mapped_column(Float)
    prompt_tokens: Mapped[Optional[int]] = mapped_column(Integer)
    completion_tokens: Mapped[Optional[int]] = mapped_column(Integer)
    claimed_by: Mapped[Optional[str]] = mapped_column(String(200))
    claimed_at: Mapped[Optional[dt.datetime]] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[Optional[dt.datetime]] = mapped_column(DateTime(timezone=True))
    # the ratings list's content order (judgecal.db.contentkey), filled by the database's own
    # trigger (migration 0008) whoever writes the row: never set it here
    content_key: Mapped[Optional[str]] = mapped_column(Text().with_variant(Text(collation="C"), "postgresql"))


class PairwiseJudgment(Base):
    """One pairwise judge verdict on (response_a, response_b) shown in ``position`` order
    ('ab': a first, 'ba': b first), collected by ``judgecal rate --pairwise`` or imported from a
    real judge (AlpacaEval annotations, generic verdict files). ``verdict`` is canonical: 'a', 'b'
    or 'tie' whatever the order shown. ``preference`` is the soft verdict: the probability in
    [0, 1] that response_a is preferred (1 = a, 0 = b, ties 0.5; AlpacaEval's ``preference``
    p in [1, 2] with the model as a is stored as p - 1). ``baseline_side`` says which response
    is the baseline's in a win-rate comparison ('a' | 'b'; NULL: no baseline relation, e.g. an
    expert-labelled or verbosity pair). ``source`` names the imported file (NULL when collected).
    Same statuses as :class:`Rating`."""

    __tablename__ = "pairwise_judgment"
    __table_args__ = (
        UniqueConstraint("response_a_id", "response_b_id", "judge_id", "sample_index", "position"),
        CheckConstraint("position IN ('ab','ba','na')", name="position"),
        CheckConstraint("verdict IS NULL OR verdict IN ('a','b','tie')", name="verdict"),
        CheckConstraint("status IN ('pending','running','ok','unparsed','failed')", name="status"),
        CheckConstraint("preference IS NULL OR (preference >= 0 AND preference <= 1)", name="preference"),
        CheckConstraint("baseline_side IS NULL OR baseline_side IN ('a','b')", name="baseline_side"),
        Index("ix_pairwise_judgment_judge_status", "judge_id", "status"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    response_a_id: Mapped[int] = mapped_column(ForeignKey("response.id", ondelete="CASCADE"), index=True)
    response_b_id: Mapped[int] = mapped_column(ForeignKey("response.id", ondelete="CASCADE"))
    judge_id: Mapped[int] = mapped_column(ForeignKey("judge.id", ondelete="CASCADE"))
    sample_index: Mapped[int] = mapped_column(Integer, default=0)
    position: Mapped[str] = mapped_column(String(2))
    status: Mapped[str] = mapped_column(String(20))
    raw_output: Mapped[Optional[str]] = mapped_column(Text)
    verdict: Mapped[Optional[str]] = mapped_column(String(3))
    preference: Mapped[Optional[float]] = mapped_column(Float)
    # P(a), P(b), P(tie) as the judge gave them (judgecal.judge.distribution); NULL: none read
    distribution: Mapped[Optional[dict[str, Any]]] = mapped_column(JSON(none_as_null=True))
    baseline_side: Mapped[Optional[str]] = mapped_column(String(1))
    source: Mapped[Optional[str]] = mapped_column(String(500))
    error: Mapped[Optional[str]] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    latency_s: Mapped[Optional[float]] = mapped_column(Float)
    prompt_tokens: Mapped[Optional[int]] = mapped_column(Integer)
    completion_tokens: Mapped[Optional[int]] = mapped_column(Integer)
    claimed_by: Mapped[Optional[str]] = mapped_column(String(200))
    claimed_at: Mapped[Optional[dt.datetime]] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[Optional[dt.datetime]] = mapped_column(DateTime(timezone=True))


class ExpertLabel(Base):
    """An expert (human) label: pointwise (``response_id``, ``score`` on
    [``scale_min``, ``scale_max``]) or pairwise (``response_a_id``, ``response_b_id``,
    ``preference`` 'a' | 'b' | 'tie'). ``label_key`` (SHA-256 of kind, responses, annotator and
    source) makes imports idempotent."""

    __tablename__ = "expert_label"
    __table_args__ = (
        CheckConstraint("kind IN ('pointwise','pairwise')", name="kind"),
        CheckConstraint("preference IS NULL OR preference IN ('a','b','tie')", name="preference"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    label_key: Mapped[str] = mapped_column(String(64), unique=True)
    kind: Mapped[str] = mapped_column(String(10))
    response_id: Mapped[Optional[int]] = mapped_column(ForeignKey("response.id", ondelete="CASCADE"), index=True)
    score: Mapped[Optional[float]] = mapped_column(Float)
    scale_min: Mapped[Optional[float]] = mapped_column(Float)
    scale_max: Mapped[Optional[float]] = mapped_column(Float)
    response_a_id: Mapped[Optional[int]] = mapped_column(ForeignKey("response.id", ondelete="CASCADE"), index=True)
    response_b_id: Mapped[Optional[int]] = mapped_column(ForeignKey("response.id", ondelete="CASCADE"))
    preference: Mapped[Optional[str]] = mapped_column(String(3))
    annotator: Mapped[str] = mapped_column(String(200), default="expert")
    source: Mapped[str] = mapped_column(String(500))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class VerbosityPair(Base):
    """A concise and a verbose response to the same item (same content, different length)."""

    __tablename__ = "verbosity_pair"
    __table_args__ = (UniqueConstraint("concise_response_id", "verbose_response_id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    item_id: Mapped[int] = mapped_column(ForeignKey("item.id", ondelete="CASCADE"), index=True)
    concise_response_id: Mapped[int] = mapped_column(ForeignKey("response.id", ondelete="CASCADE"))
    verbose_response_id: Mapped[int] = mapped_column(ForeignKey("response.id", ondelete="CASCADE"))
    source: Mapped[Optional[str]] = mapped_column(String(500))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ImportedFile(Base):
    """The SHA-256 of a file's content as an import read it (migration 0005), so that the same
    content imported again under another name or through a symbolic link is recognised and
    counted instead of stored twice (judgecal.db.filebook). One row per content per
    ``importer`` (``alpaca_eval``, ``llmbar``, ``autoj``, ``judgebench``, ``pandalm``,
    ``jsonl:<kind>``, ``csv:<kind>``) and ``family_option`` (the ``--task-family`` given, ``''``
    for none: the same file imported on purpose into another family is another import);
    ``path`` is the absolute path (symbolic links not resolved) it was first imported from,
    ``n_bytes`` its size. Written in the import's own transaction."""

    __tablename__ = "imported_file"
    __table_args__ = (UniqueConstraint("importer", "family_option", "sha256"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    importer: Mapped[str] = mapped_column(String(40))
    family_option: Mapped[str] = mapped_column(String(200), default="")
    sha256: Mapped[str] = mapped_column(String(64))
    path: Mapped[str] = mapped_column(Text)
    n_bytes: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Calibration(Base):
    """A fitted length calibration: a versioned row, never updated or overwritten.

    ``method`` names the penalty (``polylog`` for the seed formula); ``params`` holds gamma,
    p, the Bradley-Terry scale and their bootstrap CIs; ``metrics`` holds in-sample and
    cross-validated metrics of raw, every baseline and the fit; ``data`` describes what it used."""

    __tablename__ = "calibration"
    __table_args__ = (Index("ix_calibration_family_judge", "task_family_id", "judge_id", "id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    task_family_id: Mapped[int] = mapped_column(ForeignKey("task_family.id", ondelete="CASCADE"))
    judge_id: Mapped[int] = mapped_column(ForeignKey("judge.id", ondelete="CASCADE"))
    method: Mapped[str] = mapped_column(String(50), default="polylog")
    objective: Mapped[str] = mapped_column(String(20))  # pairwise | pointwise
    length_unit: Mapped[str] = mapped_column(String(20))  # tokens | words | chars | bytes
    tokenizer: Mapped[Optional[str]] = mapped_column(String(500))
    l_ref: Mapped[float] = mapped_column(Float)
    gamma: Mapped[float] = mapped_column(Float)
    p: Mapped[float] = mapped_column(Float)
    p_min: Mapped[float] = mapped_column(Float)
    p_max: Mapped[float] = mapped_column(Float)
    scale_min: Mapped[float] = mapped_column(Float)
    scale_max: Mapped[float] = mapped_column(Float)
    n: Mapped[int] = mapped_column(Integer)
    converged: Mapped[bool] = mapped_column(Boolean)
    loss: Mapped[float] = mapped_column(Float)
    folds: Mapped[int] = mapped_column(Integer)
    n_bootstrap: Mapped[int] = mapped_column(Integer)
    seed: Mapped[Optional[int]] = mapped_column(Integer)
    density_exemption: Mapped[bool] = mapped_column(Boolean, default=False)
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    data: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    judgecal_version: Mapped[str] = mapped_column(String(50))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class McRun(Base):
    """A log-likelihood multiple-choice scoring run: model, task, dataset SHA-256, settings
    (device, dtype, batch size, null context, prompt format...) and metrics with standard
    errors, e.g. ``{"acc": {"value": .5, "stderr": .03}, ...}``."""

    __tablename__ = "mc_run"
    id: Mapped[int] = mapped_column(primary_key=True)
    model: Mapped[str] = mapped_column(String(500), index=True)
    task: Mapped[str] = mapped_column(String(500))
    task_path: Mapped[Optional[str]] = mapped_column(Text)
    dataset_sha256: Mapped[str] = mapped_column(String(64))
    backend: Mapped[str] = mapped_column(String(50))
    n_items: Mapped[int] = mapped_column(Integer)
    settings: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    diagnostics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class McItemResult(Base):
    """Per-item result of an :class:`McRun`. ``choices`` is a list, one entry per choice, of
    ``{"ll": nats, "ll_null": nats or null, "n_tokens", "n_chars", "n_bytes", "is_greedy"}``
    (lm-eval tasks add ``request``: the ``[context, continuation]`` scored, and
    ``null_request`` for acc_mutual_info's unconditional one); ``pred_*`` the predicted choice
    index under each metric. lm-eval tasks: ``task`` (the leaf task), ``doc_id`` (lm-eval's
    document id in it), ``golds`` (every gold index when there are several)."""

    __tablename__ = "mc_item_result"
    __table_args__ = (UniqueConstraint("run_id", "item_index"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("mc_run.id", ondelete="CASCADE"))
    item_index: Mapped[int] = mapped_column(Integer)
    gold: Mapped[int] = mapped_column(Integer)
    choices: Mapped[list[Any]] = mapped_column(JSON)
    pred_acc: Mapped[int] = mapped_column(Integer)
    pred_acc_norm: Mapped[int] = mapped_column(Integer)
    pred_acc_bytes: Mapped[int] = mapped_column(Integer)
    pred_acc_per_token: Mapped[int] = mapped_column(Integer)
    pred_acc_pmi: Mapped[Optional[int]] = mapped_column(Integer)
    task: Mapped[Optional[str]] = mapped_column(String(500))
    doc_id: Mapped[Optional[int]] = mapped_column(Integer)
    golds: Mapped[Optional[list[Any]]] = mapped_column(JSON)


class DerivedResult(Base):
    """A view function's result computed ahead (migration 0006; judgecal.db.derived): ``kind``
    names the function, ``key`` is the SHA-256 of its kind, parameters and judgecal's code,
    ``generation`` the content generation of the database it was computed on
    (:func:`judgecal.db.derived.generation`), ``value`` the result as tagged JSON text. Read
    back only at that generation: a result never outlives a change of the data. Written by
    ``judgecal db refresh``; never part of what a user imported."""

    __tablename__ = "derived_result"
    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(50))
    key: Mapped[str] = mapped_column(String(64), unique=True)
    generation: Mapped[str] = mapped_column(String(100))
    value: Mapped[str] = mapped_column(Text)
    judgecal_version: Mapped[str] = mapped_column(String(50))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ContentState(Base):
    """One row (id 1): the content generation of a SQLite database, moved by the triggers of
    migration 0006 on every insert, update and delete of a content table."""

    __tablename__ = "content_state"
    id: Mapped[int] = mapped_column(primary_key=True)
    generation: Mapped[int] = mapped_column(BigInteger)


class ContentChange(Base):
    """One row per statement that wrote to a content table of a PostgreSQL database (the
    statement triggers of migration 0006): their number is the content generation there (rows
    appended, never updated, so that writers never wait on one another for it)."""

    __tablename__ = "content_change"
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer(), "sqlite"), primary_key=True)
