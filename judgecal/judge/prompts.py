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

- they are compiled and rendered in :class:`judgecal.judge.sandbox.BoundedSandbox`
  (Jinja2's ``ImmutableSandboxedEnvironment`` with NO globals, only a fixed set of methods,
  only plain values printable, and every render bounded in size, steps and time: see that
  module), so nothing reaches the process, its environment variables or the API key, and
  no template can hang or exhaust memory;
- at load time the template is checked and refused with one line naming the file and line
  when it uses a variable other than the documented ones (:data:`VARIABLES`, plus names it
  sets itself), touches an attribute or key starting with ``_`` (also as an attribute name
  given to a filter, or inside a constant format string), reads a method without calling
  it or names one that is not available, uses ``self``, an unknown filter or test or a
  recursive loop, includes/imports/extends a file that is not a constant name of a file in
  the template's own folder (Jinja2's ``FileSystemLoader`` rules: no absolute paths, no
  ``..``; a symlink leading out of the folder is refused too), or provably goes over a
  limit whatever the variables hold (:func:`judgecal.judge.sandbox.static_limits`).
  Included files are checked by the same rules and their bytes are part of the prompt's
  SHA-256;
- a template that still fails while rendering (an error in an expression, a sandbox
  refusal, a limit gone over, its time limit) raises :class:`~judgecal.errors.InputError`:
  in ``judgecal rate`` that row fails with the reason, and the run goes on.
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
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
from judgecal.judge import sandbox
from judgecal.judge.sandbox import MAX_TEXT, RENDER_TIME_LIMIT_S, LimitError, RenderAborted
from judgecal.yamlkeys import UniqueKeyLoader

VERDICTS = {"pointwise": "[[rating]]", "pairwise": "[[A]]/[[B]]/[[C]]"}
ROLES = ("system", "user", "assistant")
VARIABLES = ("question", "response", "reference", "response_a", "response_b")
MAX_PROMPT_FILE_BYTES = 1024 * 1024  # a template file (and each file it includes): 1 MiB


_ENVS: dict[str, sandbox.BoundedSandbox] = {}


def _env(folder: str) -> sandbox.BoundedSandbox:
    """The bounded sandbox of templates in ``folder`` (includes resolve there only)."""
    if folder not in _ENVS:
        _ENVS[folder] = sandbox.BoundedSandbox(keep_trailing_newline=False,
                                               loader=jinja2.FileSystemLoader(folder, followlinks=False))
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

    def render(self, *, time_limit_s: Optional[float] = RENDER_TIME_LIMIT_S,
               abort: Optional[threading.Event] = None, **variables: Any) -> list[dict[str, str]]:
        """Chat messages ``[{"role": ..., "content": ...}, ...]`` in ``roles`` order.

        Variables: ``question``, ``response``, ``reference``, ``response_a``, ``response_b``
        (pass what the template uses; None values count as missing). The render is bounded
        (:mod:`judgecal.judge.sandbox`): at most ``time_limit_s`` seconds (None: no time
        limit), the sandbox's size and step limits, and at most
        :data:`~judgecal.judge.sandbox.MAX_TEXT` characters for all messages together.
        Raises InputError naming the file when the template needs a variable that was not
        given, for an unknown variable name, for a limit gone over, and for any error the
        template raises while rendering; RenderAborted (not the template's fault) when
        ``abort`` is set during the render."""
        given = {k: v for k, v in variables.items() if v is not None}
        unknown = sorted(set(given) - set(VARIABLES))
        if unknown:
            raise InputError(f"unknown template variable(s) {', '.join(unknown)} (documented: {', '.join(VARIABLES)})",
                             source=self.path)
        template = _compiled(self.text, self.path)
        messages = []
        total = 0
        with sandbox.limits(time_limit_s, abort):
            ctx = template.new_context(given)
            for spec in self.roles:
                role, block = _role_block(spec)
                parts: list[str] = []
                try:
                    for chunk in template.blocks[block](ctx):
                        total += len(chunk)
                        if total > MAX_TEXT:
                            raise LimitError(f"the rendered prompt has more than {MAX_TEXT:,} characters")
                        parts.append(chunk)
                except RenderAborted:
                    raise
                except jinja2.UndefinedError as exc:
                    raise InputError(f"prompt needs a value that was not given ({exc.message})", source=self.path) from None
                except LimitError as exc:
                    raise InputError(f"the template went over a limit: {_one_line(exc)}", source=self.path) from None
                except jinja2.sandbox.SecurityError as exc:
                    raise InputError(f"the template did something the sandbox forbids: {_one_line(exc)}",
                                     source=self.path) from None
                except RecursionError:
                    raise InputError("the template recurses too deeply while rendering", source=self.path) from None
                except MemoryError:
                    raise InputError("the template needs more memory than there is", source=self.path) from None
                except Exception as exc:  # noqa: BLE001 - any error in a user's template is that render's failure
                    raise InputError(f"cannot render block {block!r}: {type(exc).__name__}: {_one_line(exc)}",
                                     source=self.path) from None
                messages.append({"role": role, "content": "".join(parts).strip()})
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
            ast = env.parse_raw(body)
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
        _check_nodes(ast, refuse, env)  # names it in one line
        raise InputError(f"Jinja2 error: {exc.message}", source=path, line=(exc.lineno + offset) if exc.lineno else None) from None
    if extra:
        names = [n for n in ast.find_all(jinja2.nodes.Name) if n.name in extra]
        raise refuse(names[0] if names else ast, f"uses {', '.join(repr(e) for e in extra)}; a prompt may use only "
                     f"{', '.join(VARIABLES)} and names it sets itself")
    _check_nodes(ast, refuse, env)
    included: list[str] = []
    for node in ast.find_all((jinja2.nodes.Include, jinja2.nodes.Import, jinja2.nodes.FromImport, jinja2.nodes.Extends)):
        kind = type(node).__name__.lower()
        target = node.template
        if not isinstance(target, jinja2.nodes.Const) or not isinstance(target.value, str):
            raise refuse(node, f"{kind} of a computed name (only a constant file name in the prompt's folder)")
        try:
            candidate = Path(env.loader.searchpath[0], target.value)  # type: ignore[union-attr]
            if candidate.is_file() and candidate.stat().st_size > MAX_PROMPT_FILE_BYTES:
                raise refuse(node, f"{kind} of {target.value!r}: the file has {candidate.stat().st_size:,} bytes; a "
                             f"prompt template may have at most {MAX_PROMPT_FILE_BYTES:,}")
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
            sub = env.parse_raw(source)
        except jinja2.TemplateSyntaxError as exc:
            raise InputError(f"Jinja2 syntax error: {exc.message}", source=str(real), line=exc.lineno) from None
        included += _check(sub, str(real), 0, env, seen)
    over = sandbox.static_limits(ast, env, VARIABLES)
    if over is not None:
        raise refuse(over[0], f"{over[1]} (whatever the variables hold)")
    return included


_ALLOWED_METHODS = sandbox.STR_METHODS | sandbox.SEQ_METHODS | sandbox.DICT_METHODS | sandbox.LOOP_METHODS
_SPECIAL = {"loop": "use loop.index, loop.first... or call loop.cycle(...)", "super": "call it: super()",
            "caller": "call it: caller()"}


def _is_method_read(node: jinja2.nodes.Getattr) -> bool:
    """Whether ``x.name`` surely reads a method: ``x`` is text (a documented variable or a
    constant string) and ``name`` one of its methods, or ``x`` is ``loop`` and ``name``
    ``cycle`` / ``changed`` (a dict made by the template may have keys of any name)."""
    obj = node.node
    if isinstance(obj, jinja2.nodes.Name) and obj.name == "loop":
        return node.attr in sandbox.LOOP_METHODS
    text = (isinstance(obj, jinja2.nodes.Name) and obj.name in VARIABLES) or (
        isinstance(obj, jinja2.nodes.Const) and isinstance(obj.value, str))
    return text and node.attr in sandbox.STR_METHODS


def _check_nodes(ast: jinja2.nodes.Template, refuse: Any, env: jinja2.Environment) -> None:
    """The per-node rules of :func:`_check`: internals (``_`` names, also as attribute names
    given to filters and inside format strings), methods that are not available or read
    without being called, the template object ``self``, unknown filters and tests, recursive
    loops, and constant widths over :data:`~judgecal.judge.sandbox.MAX_TEXT` in ``%`` and
    ``str.format`` strings."""
    N = jinja2.nodes
    parent: dict[int, jinja2.nodes.Node] = {}
    for node in [ast, *ast.find_all(N.Node)]:
        for child in node.iter_child_nodes():
            parent[id(child)] = node

    def used_as(node: jinja2.nodes.Node, kinds: tuple, field: str = "node") -> bool:
        up = parent.get(id(node))
        return isinstance(up, kinds) and getattr(up, field, None) is node

    def internal(name: Any, node: jinja2.nodes.Node, what: str) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise refuse(node, f"access to {name!r}{what} (names starting with '_' are internals)")

    def attribute_arg(arg: Optional[jinja2.nodes.Node], node: jinja2.nodes.Filter) -> None:
        if arg is None:
            return
        if not isinstance(arg, N.Const):
            raise refuse(node, f"the {node.name!r} filter needs a constant attribute name")
        for part in str(arg.value).split("."):
            internal(part, node, f" in the {node.name!r} filter")
            if part in sandbox.METHOD_NAMES and part not in _ALLOWED_METHODS:
                raise refuse(node, f"method {part!r} (in the {node.name!r} filter) is not available in prompt templates")

    def named(arg: Optional[jinja2.nodes.Node], node: jinja2.nodes.Filter, table: dict, kind: str) -> Optional[str]:
        if arg is None:
            return None
        if not isinstance(arg, N.Const) or not isinstance(arg.value, str):
            raise refuse(node, f"the {node.name!r} filter needs a constant {kind} name")
        if arg.value not in table:
            raise refuse(node, f"unknown {kind} {arg.value!r} (in the {node.name!r} filter)")
        return arg.value

    def filter_args(name: str, args: list, kwargs: dict, node: jinja2.nodes.Filter) -> None:
        if name not in env.filters:
            extra = " (not available in prompt templates)" if name in sandbox.REMOVED_FILTERS else ""
            raise refuse(node, f"unknown filter {name!r}{extra}")
        if name == "map" and "attribute" not in kwargs and args:
            inner = named(args[0], node, env.filters, "filter")
            filter_args(inner, args[1:], kwargs, node)  # type: ignore[arg-type]
            return
        if name in ("select", "reject"):
            named(args[0] if args else None, node, env.tests, "test")
        if name in ("selectattr", "rejectattr"):
            named(args[1] if len(args) > 1 else None, node, env.tests, "test")
        if name in sandbox.ATTRIBUTE_ARGS:
            pos, kw = sandbox.ATTRIBUTE_ARGS[name]
            attribute_arg(kwargs.get(kw) if kw else None, node)
            if pos is not None and len(args) > pos:
                attribute_arg(args[pos], node)
        if name == "format" and isinstance(node.node, N.Const) and isinstance(node.node.value, str):
            printf(node.node.value, node)

    def printf(fmt: str, node: jinja2.nodes.Node) -> None:
        for m in sandbox._PRINTF.finditer(fmt):
            sizes = [sandbox._num(x) for x in m.group(3, 4) if x and x != "*"]
            if sum(sizes) > MAX_TEXT:
                raise refuse(node, f"the %-format {m.group(0)[:30]!r} asks for {sum(sizes):,.0f} characters; "
                             f"a template may build at most {MAX_TEXT:,}")

    def str_format(fmt: str, node: jinja2.nodes.Node) -> None:
        try:
            fields = list(sandbox.format_fields(fmt))
        except ValueError as exc:
            raise refuse(node, f"malformed format string {fmt[:40]!r}: {exc}") from None
        for field, spec in fields:
            for part in sandbox.field_parts(field):
                internal(part, node, " in a format string")
                if part in sandbox.METHOD_NAMES:
                    raise refuse(node, f"the format field {{{field}}} reads the method {part!r}, which a format "
                                 "string cannot call")
            size = sandbox.format_spec_size(spec)
            if size > MAX_TEXT:
                raise refuse(node, f"the format spec {spec[:30]!r} asks for {size:,.0f} characters; a template "
                             f"may build at most {MAX_TEXT:,}")

    for node in ast.find_all(N.Node):
        if isinstance(node, N.Name):
            if node.name == "self":
                raise refuse(node, "'self' (the template object) is not available in prompt templates")
            if node.name in _SPECIAL and node.ctx == "load" and not used_as(node, (N.Getattr, N.Getitem, N.Call)):
                raise refuse(node, f"{node.name!r} alone is not a value a template can print or pass "
                             f"({_SPECIAL[node.name]})")
        elif isinstance(node, N.Getattr):
            internal(node.attr, node, "")
            if node.attr in sandbox.METHOD_NAMES:
                if node.attr not in _ALLOWED_METHODS:
                    raise refuse(node, f"method {node.attr!r} is not available in prompt templates (a dict key of "
                                 f"that name: ['{node.attr}'])")
                if not used_as(node, (N.Call,)) and _is_method_read(node):
                    raise refuse(node, f"'.{node.attr}' is a method: a template may call it ('.{node.attr}(...)'), "
                                 "not print or pass it")
                if (node.attr in ("format", "format_map") and isinstance(node.node, N.Const)
                        and isinstance(node.node.value, str)):
                    str_format(node.node.value, node)
        elif isinstance(node, N.Getitem):
            if isinstance(node.arg, N.Const):
                internal(node.arg.value, node, "")
        elif isinstance(node, N.Filter):
            filter_args(node.name, list(node.args), {k.key: k.value for k in node.kwargs}, node)
        elif isinstance(node, N.Test):
            if node.name not in env.tests:
                raise refuse(node, f"unknown test {node.name!r}")
        elif isinstance(node, N.BinExpr):
            if node.operator == "%" and isinstance(node.left, N.Const) and isinstance(node.left.value, str):
                printf(node.left.value, node)
        elif isinstance(node, N.For):
            if node.recursive:
                raise refuse(node, "recursive loops are not available in prompt templates")


def _identity(data: bytes, text: str, path: str) -> str:
    """SHA-256 of the file's bytes; a template that includes other files also hashes, in
    order, each included file's name and bytes (so editing an included file is a new prompt)."""
    _, body = _split(text, path)
    env = _env(_folder(path))
    included = _check(env.parse_raw(body), path, _front_lines(text), env, set())
    h = hashlib.sha256(data)
    for inc in included:
        h.update(b"\0" + Path(inc).name.encode("utf-8") + b"\0" + Path(inc).read_bytes())
    return h.hexdigest()


_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def _scalars(front: str, keys: tuple[str, ...]) -> dict[str, str]:
    """The text in which the front matter writes each of ``keys`` (its YAML scalar as written)."""
    node = yaml.compose(front, Loader=UniqueKeyLoader)
    out = {}
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value in keys and isinstance(v, yaml.ScalarNode):
                out[k.value] = v.value
    return out


#: the front matter fields judgecal reads (module doc); any other is refused
FRONT_MATTER_FIELDS = ("name", "mode", "scale_min", "scale_max", "verdict", "roles", "variables", "source")


def _top_blocks(text: str, path: str) -> list[str]:
    """The names of the body's blocks that are not inside another block (the chat messages)."""
    _, body = _split(text, path)
    names: list[str] = []

    def walk(node: jinja2.nodes.Node) -> None:
        for child in node.iter_child_nodes():
            if isinstance(child, jinja2.nodes.Block):
                names.append(child.name)
            else:
                walk(child)
    walk(jinja2.Environment().parse(body))
    return names


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
    size = path.stat().st_size
    if size > MAX_PROMPT_FILE_BYTES:
        raise InputError(f"the prompt file has {size:,} bytes; a prompt template may have at most "
                         f"{MAX_PROMPT_FILE_BYTES:,}", source=src)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start})", source=src) from None
    front, _ = _split(text, src)
    try:
        meta = yaml.load(front, Loader=UniqueKeyLoader) or {}  # a key given twice: refused, never last-wins
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"front matter is not valid YAML: {getattr(exc, 'problem', exc)}", source=src,
                         line=(mark.line + 2) if mark else None) from None
    if not isinstance(meta, dict):
        raise InputError("front matter must be a YAML mapping", source=src)

    unknown = sorted(str(k) for k in meta if k not in FRONT_MATTER_FIELDS)
    if unknown:
        raise InputError(f"front matter field {unknown[0]!r} is not one judgecal reads (the fields: "
                         f"{', '.join(FRONT_MATTER_FIELDS)}): a misspelt field would be ignored", source=src)

    def need(key: str) -> Any:
        if key not in meta or meta[key] in (None, ""):
            raise InputError(f"front matter field {key!r} is missing", source=src)
        return meta[key]

    name = need("name")
    if not isinstance(name, str) or name != name.strip():  # YAML 1.1 reads 012 as 10 and yes as True
        raise InputError(f"front matter field 'name' must be text without spaces around it (quote it: name: "
                         f"\"{name}\"), got {name!r}", source=src)
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
        raw = _scalars(front, ("scale_min", "scale_max"))
        try:
            if any(isinstance(meta.get(k), bool) for k in ("scale_min", "scale_max")):
                raise TypeError("a boolean is not a scale end")
            scale_min, scale_max = float(need("scale_min")), float(need("scale_max"))
        except (TypeError, ValueError):
            raise InputError("front matter fields 'scale_min'/'scale_max' must be numbers", source=src) from None
        for key, value in (("scale_min", scale_min), ("scale_max", scale_max)):
            # written as JSON writes a number (YAML 1.1 reads 012 as 10, 1:30 as 90, 0xA and 1_0 as 10), finite and of
            # reasonable size (the importers' bound: a judge's scale must export and import back)
            if not _NUMBER.fullmatch(raw.get(key, "")) or not math.isfinite(value) or abs(value) > 1e15:
                raise InputError(f"front matter field {key!r} is {raw.get(key)!r}: write a finite number as JSON does "
                                 "(e.g. 1, 10, 0.5), of at most 1e15", source=src)
        if not scale_min < scale_max:
            raise InputError(f"front matter field 'scale_max' ({scale_max:g}) must exceed 'scale_min' ({scale_min:g})", source=src)
    template = _compiled(text, src)
    for spec in roles:
        block = _role_block(spec)[1]
        if block not in template.blocks:
            raise InputError(f"front matter field 'roles' names {spec!r} but the body has no {{% block {block} %}}", source=src)
    sent = {_role_block(spec)[1] for spec in roles}
    unsent = [b for b in _top_blocks(text, src) if b not in sent]
    if unsent:
        raise InputError(f"the body's {{% block {unsent[0]} %}} is not in 'roles': it would never be sent (list it "
                         "in roles, or remove it)", source=src)
    return Prompt(
        name=name, mode=mode, roles=tuple(roles), verdict=verdict, scale_min=scale_min, scale_max=scale_max,
        text=text, sha256=_identity(data, text, src), path=src, meta=meta,
    )
