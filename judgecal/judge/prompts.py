"""Judge prompt templates: loading, validation, rendering to chat messages, identity.

A template is a Markdown file: YAML front matter between two ``---`` lines, then a Jinja2
body with one ``{% block <role> %}`` per chat message. Front matter fields:

- ``name`` (str), ``mode`` (``pointwise`` | ``pairwise``),
- ``scale_min`` / ``scale_max`` (numbers, required for pointwise, min < max),
- ``verdict`` (``"[[rating]]"`` for pointwise, ``"[[A]]/[[B]]/[[C]]"`` for pairwise: the only
  formats :mod:`judgecal.judge.parse` reads),
- ``roles`` (list of ``system`` / ``user`` / ``assistant``; each needs a block of that name;
  ``role:block`` names another block, so few-shot turns can repeat a role, e.g.
  ``[system, "user:shot1_q", "assistant:shot1_a", user]``),
- optional ``variables`` and ``source``.

The prompt's identity is the SHA-256 of the exact bytes of the file (front matter included):
a template once used is never edited; a change is a new file. Rendering uses
``jinja2.StrictUndefined``, so a variable the template needs but the caller lacks is an error.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import jinja2
import yaml

from judgecal import config
from judgecal.errors import InputError

VERDICTS = {"pointwise": "[[rating]]", "pairwise": "[[A]]/[[B]]/[[C]]"}
ROLES = ("system", "user", "assistant")
_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False, autoescape=False)


@dataclass(frozen=True)
class Prompt:
    """A loaded judge prompt. ``sha256``: hex SHA-256 of the file's bytes; ``path``: its file."""

    name: str
    mode: str
    roles: tuple[str, ...]
    verdict: str
    scale_min: Optional[float]
    scale_max: Optional[float]
    text: str
    sha256: str
    path: str
    meta: dict[str, Any] = field(default_factory=dict)

    def render(self, **variables: Any) -> list[dict[str, str]]:
        """Chat messages ``[{"role": ..., "content": ...}, ...]`` in ``roles`` order.

        Variables: ``question``, ``response``, ``reference``, ``response_a``, ``response_b``
        (pass what the template uses; None values count as missing). Raises InputError naming
        the file when the template needs a variable that was not given."""
        given = {k: v for k, v in variables.items() if v is not None}
        template = _compiled(self.text, self.path)
        ctx = template.new_context(given)
        messages = []
        for spec in self.roles:
            role, block = _role_block(spec)
            try:
                content = "".join(template.blocks[block](ctx))
            except jinja2.UndefinedError as exc:
                raise InputError(f"prompt needs a value that was not given ({exc.message})", source=self.path) from None
            messages.append({"role": role, "content": content.strip()})
        return messages


def _role_block(spec: str) -> tuple[str, str]:
    """``"user"`` -> (user, user); ``"user:shot1_q"`` -> (user, shot1_q)."""
    role, _, block = spec.partition(":")
    return role, block or role


_CACHE: dict[tuple[str, str], jinja2.Template] = {}


def _compiled(text: str, path: str) -> jinja2.Template:
    key = (path, text)
    if key not in _CACHE:
        _, body = _split(text, path)
        try:
            _CACHE[key] = _ENV.from_string(body)
        except jinja2.TemplateSyntaxError as exc:
            raise InputError(f"Jinja2 syntax error: {exc.message}", source=path, line=(exc.lineno or 0) + _front_lines(text)) from None
    return _CACHE[key]


def _front_lines(text: str) -> int:
    return text.split("\n", 1)[1].split("\n---", 1)[0].count("\n") + 3


def _split(text: str, path: str) -> tuple[str, str]:
    if not text.startswith("---"):
        raise InputError("missing YAML front matter (the file must start with a '---' line)", source=path, line=1)
    parts = text.split("\n---", 1)
    if len(parts) != 2:
        raise InputError("front matter is not closed by a '---' line", source=path)
    front = parts[0][3:]
    body = parts[1].split("\n", 1)[1] if "\n" in parts[1] else ""
    return front, body


def resolve(name_or_path: str | Path) -> Path:
    """The template file for a name in :func:`judgecal.config.prompts_dir` (``pointwise_v1``
    or ``pointwise_v1.md``) or a path to a file. Raises InputError when neither exists."""
    raw = str(name_or_path)
    path = Path(raw).expanduser()
    if path.is_file():
        return path
    base = config.prompts_dir()
    for candidate in (base / raw, base / f"{raw}.md"):
        if candidate.is_file() and "/" not in raw:
            return candidate
    known = ", ".join(sorted(p.stem for p in base.glob("*.md"))) or "none"
    raise InputError(f"no prompt file or built-in prompt named {raw!r} (built-in: {known})", source=raw)


def load_prompt(name_or_path: str | Path) -> Prompt:
    """Load and validate a template (see the module doc). Raises InputError naming the file
    and the field for bad front matter, a missing block or a Jinja2 syntax error."""
    path = resolve(name_or_path)
    src = str(path)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start})", source=src) from None
    front, _ = _split(text, src)
    try:
        meta = yaml.safe_load(front) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"front matter is not valid YAML: {getattr(exc, 'problem', exc)}", source=src,
                         line=(mark.line + 2) if mark else None) from None
    if not isinstance(meta, dict):
        raise InputError("front matter must be a YAML mapping", source=src)

    def need(key: str) -> Any:
        if key not in meta or meta[key] in (None, ""):
            raise InputError(f"front matter field {key!r} is missing", source=src)
        return meta[key]

    name = str(need("name"))
    mode = need("mode")
    if mode not in VERDICTS:
        raise InputError(f"front matter field 'mode' must be pointwise or pairwise, not {mode!r}", source=src)
    verdict = need("verdict")
    if verdict != VERDICTS[mode]:
        raise InputError(f"front matter field 'verdict' must be {VERDICTS[mode]!r} for mode {mode}, not {verdict!r}", source=src)
    roles = need("roles")
    if not isinstance(roles, list) or not roles or any(not isinstance(r, str) or _role_block(r)[0] not in ROLES for r in roles):
        raise InputError(f"front matter field 'roles' must be a list of {', '.join(ROLES)}, not {roles!r}", source=src)
    scale_min = scale_max = None
    if mode == "pointwise":
        try:
            scale_min, scale_max = float(need("scale_min")), float(need("scale_max"))
        except (TypeError, ValueError):
            raise InputError("front matter fields 'scale_min'/'scale_max' must be numbers", source=src) from None
        if not scale_min < scale_max:
            raise InputError(f"front matter field 'scale_max' ({scale_max:g}) must exceed 'scale_min' ({scale_min:g})", source=src)
    template = _compiled(text, src)
    for spec in roles:
        block = _role_block(spec)[1]
        if block not in template.blocks:
            raise InputError(f"front matter field 'roles' names {spec!r} but the body has no {{% block {block} %}}", source=src)
    return Prompt(
        name=name, mode=mode, roles=tuple(roles), verdict=verdict, scale_min=scale_min, scale_max=scale_max,
        text=text, sha256=hashlib.sha256(data).hexdigest(), path=src, meta=meta,
    )
