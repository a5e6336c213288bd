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

Templates come from many people into one shared database, so they are untrusted code:

- they are compiled and rendered in Jinja2's own sandbox
  (``jinja2.sandbox.ImmutableSandboxedEnvironment``: no access to ``_``-prefixed attributes,
  function internals or mutation of the values passed in) with NO globals (no ``range``,
  ``cycler``, ``namespace``, ``lipsum``...), so nothing reaches the process, its
  environment variables or the API key;
- at load time the template is checked and refused with one line naming the file when it
  uses a variable other than the documented ones (:data:`VARIABLES`, plus names it sets
  itself), touches an attribute or key starting with ``_``, or includes/imports/extends a
  file that is not a constant name of a file in the template's own folder (Jinja2's
  ``FileSystemLoader`` rules: no absolute paths, no ``..``; a symlink leading out of the
  folder is refused too). Included files are checked by the same rules and their bytes are
  part of the prompt's SHA-256;
- a template that still fails while rendering (an error in an expression, a sandbox
  refusal, an oversized repetition) raises :class:`~judgecal.errors.InputError`: in
  ``judgecal rate`` that row fails with the reason, and the run goes on.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import jinja2
import jinja2.meta
import jinja2.nodes
import jinja2.sandbox
import yaml

from judgecal import config
from judgecal.errors import InputError

VERDICTS = {"pointwise": "[[rating]]", "pairwise": "[[A]]/[[B]]/[[C]]"}
ROLES = ("system", "user", "assistant")
VARIABLES = ("question", "response", "reference", "response_a", "response_b")
MAX_REPEAT_CHARS = 1_000_000  # `text * n` may build at most this many characters


class _Sandbox(jinja2.sandbox.ImmutableSandboxedEnvironment):
    """Jinja2's immutable sandbox, without globals, with ``*`` and ``**`` bounded (a template
    cannot exhaust memory with ``question * 10**9``)."""

    intercepted_binops = frozenset(["*", "**"])

    def call_binop(self, context, operator, left, right):
        if operator == "**" and isinstance(right, (int, float)) and abs(right) > 100:
            raise jinja2.sandbox.SecurityError("the power operator is limited to exponents up to 100")
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > MAX_REPEAT_CHARS:
                    raise jinja2.sandbox.SecurityError(f"a repetition may build at most {MAX_REPEAT_CHARS} items")
        return super().call_binop(context, operator, left, right)


_ENVS: dict[str, jinja2.Environment] = {}


def _env(folder: str) -> jinja2.Environment:
    """The sandboxed environment of templates in ``folder`` (includes resolve there only)."""
    if folder not in _ENVS:
        env = _Sandbox(undefined=jinja2.StrictUndefined, keep_trailing_newline=False, autoescape=False,
                       loader=jinja2.FileSystemLoader(folder, followlinks=False))
        env.globals.clear()
        _ENVS[folder] = env
    return _ENVS[folder]


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
        the file when the template needs a variable that was not given, for an unknown
        variable name, and for any error the template raises while rendering."""
        given = {k: v for k, v in variables.items() if v is not None}
        unknown = sorted(set(given) - set(VARIABLES))
        if unknown:
            raise InputError(f"unknown template variable(s) {', '.join(unknown)} (documented: {', '.join(VARIABLES)})",
                             source=self.path)
        template = _compiled(self.text, self.path)
        ctx = template.new_context(given)
        messages = []
        for spec in self.roles:
            role, block = _role_block(spec)
            try:
                content = "".join(template.blocks[block](ctx))
            except jinja2.UndefinedError as exc:
                raise InputError(f"prompt needs a value that was not given ({exc.message})", source=self.path) from None
            except jinja2.sandbox.SecurityError as exc:
                raise InputError(f"the template did something the sandbox forbids: {_one_line(exc)}", source=self.path) from None
            except RecursionError:
                raise InputError("the template recurses too deeply while rendering", source=self.path) from None
            except Exception as exc:  # noqa: BLE001 - any error in a user's template is that render's failure
                raise InputError(f"cannot render block {block!r}: {type(exc).__name__}: {_one_line(exc)}",
                                 source=self.path) from None
            messages.append({"role": role, "content": content.strip()})
        return messages


def _role_block(spec: str) -> tuple[str, str]:
    """``"user"`` -> (user, user); ``"user:shot1_q"`` -> (user, shot1_q)."""
    role, _, block = spec.partition(":")
    return role, block or role


_CACHE: dict[tuple[str, str], jinja2.Template] = {}


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return (text[:300] + "...") if len(text) > 300 else text or type(exc).__name__


def _folder(path: str) -> str:
    return str(Path(path).resolve().parent)


def _compiled(text: str, path: str) -> jinja2.Template:
    key = (path, text)
    if key not in _CACHE:
        _, body = _split(text, path)
        env = _env(_folder(path))
        offset = _front_lines(text)
        try:
            ast = env.parse(body)
        except jinja2.TemplateSyntaxError as exc:
            raise InputError(f"Jinja2 syntax error: {exc.message}", source=path, line=(exc.lineno or 0) + offset) from None
        _check(ast, path, offset, env, set())
        try:
            _CACHE[key] = env.from_string(body)
        except jinja2.TemplateSyntaxError as exc:
            raise InputError(f"Jinja2 error: {exc.message}", source=path, line=(exc.lineno or 0) + offset) from None
    return _CACHE[key]


def _check(ast: jinja2.nodes.Template, path: str, offset: int, env: jinja2.Environment, seen: set[str]) -> list[str]:
    """Refuse (InputError naming the file and line) what a prompt template may not do (module
    doc); returns the included files' paths (checked recursively, each once)."""
    def refuse(node: jinja2.nodes.Node, reason: str) -> InputError:
        line = getattr(node, "lineno", None)
        return InputError(f"template refused: {reason}", source=path, line=(line + offset) if line else None)

    try:
        extra = sorted(jinja2.meta.find_undeclared_variables(ast) - set(VARIABLES))
    except jinja2.TemplateSyntaxError as exc:  # an unknown filter or test
        raise InputError(f"Jinja2 error: {exc.message}", source=path, line=(exc.lineno + offset) if exc.lineno else None) from None
    if extra:
        names = [n for n in ast.find_all(jinja2.nodes.Name) if n.name in extra]
        raise refuse(names[0] if names else ast, f"uses {', '.join(repr(e) for e in extra)}; a prompt may use only "
                     f"{', '.join(VARIABLES)} and names it sets itself")
    for node in ast.find_all((jinja2.nodes.Getattr, jinja2.nodes.Getitem, jinja2.nodes.Filter)):
        if isinstance(node, jinja2.nodes.Getattr):
            name = node.attr
        elif isinstance(node, jinja2.nodes.Getitem):
            name = node.arg.value if isinstance(node.arg, jinja2.nodes.Const) else None
        else:
            if node.name not in env.filters:
                raise refuse(node, f"unknown filter {node.name!r}")
            if node.name != "attr":
                continue
            arg = node.args[0] if node.args else None
            if not isinstance(arg, jinja2.nodes.Const):
                raise refuse(node, "the 'attr' filter needs a constant attribute name")
            name = arg.value
        if isinstance(name, str) and name.startswith("_"):
            raise refuse(node, f"access to {name!r} (names starting with '_' are internals)")
    included: list[str] = []
    for node in ast.find_all((jinja2.nodes.Include, jinja2.nodes.Import, jinja2.nodes.FromImport, jinja2.nodes.Extends)):
        kind = type(node).__name__.lower()
        target = node.template
        if not isinstance(target, jinja2.nodes.Const) or not isinstance(target.value, str):
            raise refuse(node, f"{kind} of a computed name (only a constant file name in the prompt's folder)")
        try:
            source, filename, _ = env.loader.get_source(env, target.value)  # type: ignore[union-attr]
        except jinja2.TemplateNotFound:
            raise refuse(node, f"{kind} of {target.value!r}: no such file in the prompt's folder "
                         f"{env.loader.searchpath[0]} (no absolute paths, no '..')") from None  # type: ignore[union-attr]
        real, folder = Path(filename).resolve(), Path(env.loader.searchpath[0]).resolve()  # type: ignore[union-attr]
        if folder not in real.parents:
            raise refuse(node, f"{kind} of {target.value!r} leads outside the prompt's folder ({real})")
        if str(real) in seen:
            continue
        seen.add(str(real))
        included.append(str(real))
        try:
            sub = env.parse(source)
        except jinja2.TemplateSyntaxError as exc:
            raise InputError(f"Jinja2 syntax error: {exc.message}", source=str(real), line=exc.lineno) from None
        included += _check(sub, str(real), 0, env, seen)
    return included


def _identity(data: bytes, text: str, path: str) -> str:
    """SHA-256 of the file's bytes; a template that includes other files also hashes, in
    order, each included file's name and bytes (so editing an included file is a new prompt)."""
    _, body = _split(text, path)
    env = _env(_folder(path))
    included = _check(env.parse(body), path, _front_lines(text), env, set())
    h = hashlib.sha256(data)
    for inc in included:
        h.update(b"\0" + Path(inc).name.encode("utf-8") + b"\0" + Path(inc).read_bytes())
    return h.hexdigest()


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
    and the field for bad front matter, a missing block, a Jinja2 syntax error, or anything
    the sandbox rules refuse (one line naming the file and, where known, the line)."""
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
        text=text, sha256=_identity(data, text, src), path=src, meta=meta,
    )
