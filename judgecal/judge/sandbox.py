"""The bounded Jinja2 sandbox that renders judge prompt templates (docs/rating.md, "Templates
are untrusted: the sandbox").

Templates come from many people into one shared database, so they are untrusted code that
runs inside ``judgecal rate``'s event loop. Jinja2's own sandbox
(:class:`jinja2.sandbox.ImmutableSandboxedEnvironment`) keeps them away from Python internals;
this module adds what it lacks, so that a render is bounded in memory and time:

- every value a template builds (a string, a list, a number's digits) holds at most
  :data:`MAX_TEXT` characters, checked BEFORE the operation that would build it (``*``,
  ``+``, ``~``, ``%``, ``**``, ``str.format``, ``ljust``/``rjust``/``center``/``zfill``/
  ``expandtabs``/``replace``/``join``, and the filters ``center``, ``indent``, ``join``,
  ``replace``, ``format``, ``batch``, ``slice``, ``wordwrap``); lists made of references
  count every reference (``['x' * 1000000] * 1000`` weighs a thousand million);
- integers hold at most :data:`MAX_INT_BITS` bits (repeated squaring, chained ``**``);
- one render may run at most :data:`MAX_STEPS` steps (a loop iteration, a filter or method
  call is one step, a macro call :data:`MACRO_STEPS`) and build at most :data:`MAX_BUILT` characters in all its operations, and may take at most
  its time limit (:data:`RENDER_TIME_LIMIT_S` by default);
- the rendered prompt (all its messages together) has at most :data:`MAX_TEXT` characters;
- only plain values (text, numbers, booleans, None, lists, tuples and dicts of them) can
  be printed or turned into text: a method, a generator, a loop or the template object
  itself is refused instead of leaking a Python repr with a memory address;
- only a fixed set of methods can be reached (:data:`STR_METHODS`, ``count``/``index`` of
  lists, ``get``/``items``/``keys``/``values`` of dicts, ``loop.cycle``/``loop.changed``):
  not ``encode``, ``translate``, ``to_bytes``...; the filters ``random`` (not
  reproducible) and ``urlize`` are removed; recursive loops are refused;
- a render can be stopped from outside (:class:`Budget` ``abort``: ``judgecal rate`` sets it
  on SIGINT/SIGTERM), which raises :class:`RenderAborted` at the template's next step.

Going over a limit raises :class:`LimitError` (a :class:`jinja2.sandbox.SecurityError`).
:func:`static_limits` finds, when the template is loaded, what provably goes over a limit
whatever the variables hold (constant expressions, constant widths, loops over constant
text), so such a template is refused before any call.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import re
import string
import threading
import time
import types
from typing import Any, Callable, Iterator, Optional

import jinja2
import jinja2.filters
import jinja2.nodes as nodes
import jinja2.sandbox
import jinja2.utils
import jinja2.visitor
from jinja2.runtime import LoopContext, Macro, Undefined

MAX_TEXT = 2_000_000  # characters (or items) of any value a template builds, and of the rendered prompt
MAX_BUILT = 20_000_000  # characters all the operations of one render may build together
MAX_STEPS = 1_000_000  # loop iterations plus calls (filters, methods; a macro counts MACRO_STEPS) in one render
MACRO_STEPS = 10  # steps a macro call counts (a call costs about ten loop iterations)
MAX_INT_BITS = 10_000  # bits of any integer a template computes (about 3000 decimal digits)
RENDER_TIME_LIMIT_S = 10.0  # default time limit of one render, seconds
MAX_WRAP_COPIES = 200_000_000  # characters textwrap may copy in one wordwrap (it is quadratic in a long run)

STR_METHODS = frozenset(
    "capitalize casefold center count endswith expandtabs find format format_map index isalnum isalpha isascii "
    "isdecimal isdigit isidentifier islower isnumeric isprintable isspace istitle isupper join ljust lower lstrip "
    "partition removeprefix removesuffix replace rfind rindex rjust rpartition rsplit rstrip split splitlines "
    "startswith strip swapcase title upper zfill".split())
SEQ_METHODS = frozenset({"count", "index"})
DICT_METHODS = frozenset({"get", "items", "keys", "values"})
LOOP_METHODS = frozenset({"cycle", "changed"})
# every method name of the types a template sees: reading one without calling it is refused
# at load time, and the ones not allowed above are refused even when called
METHOD_NAMES = frozenset(
    name for typ in (str, list, tuple, dict, int, float, bytes) for name in dir(typ)
    if not name.startswith("_") and callable(getattr(typ, name))) | LOOP_METHODS
REMOVED_FILTERS = ("random", "urlize")
# filters that take an attribute name: (position of the argument, keyword)
ATTRIBUTE_ARGS = {"attr": (0, None), "selectattr": (0, "attribute"), "rejectattr": (0, "attribute"),
                  "sort": (2, "attribute"), "unique": (1, "attribute"), "min": (1, "attribute"),
                  "max": (1, "attribute"), "sum": (0, "attribute"), "groupby": (0, "attribute"),
                  "join": (1, "attribute"), "map": (None, "attribute")}
# filters that take (and may consume lazily) any iterable or value: the others turn their
# value into text, so it must be a plain value
_ANY_VALUE_FILTERS = frozenset({
    "list", "join", "map", "select", "reject", "selectattr", "rejectattr", "sum", "first", "last", "length",
    "count", "min", "max", "sort", "unique", "groupby", "batch", "slice", "reverse", "dictsort", "items",
    "default", "d", "attr", "tojson", "int", "float", "abs", "round"})


class LimitError(jinja2.sandbox.SecurityError):
    """A template went over one of the documented limits (module doc)."""


class RenderAborted(Exception):
    """The render was stopped from outside (:attr:`Budget.abort` was set): not the template's
    fault; ``judgecal rate`` hands the row back to 'pending'."""


class Budget:
    """What one render may still spend: steps (loop iterations, calls), characters built,
    time (``time_limit_s``, None: no limit) and an ``abort`` event checked at every step.
    Also caches the weights of the containers it has measured (they cannot change: the
    sandbox forbids mutation)."""

    def __init__(self, time_limit_s: Optional[float] = None, abort: Optional[threading.Event] = None):
        self.steps = 0
        self.built = 0
        self.time_limit_s = time_limit_s
        self.deadline = time.monotonic() + time_limit_s if time_limit_s else math.inf
        self.abort = abort
        self.weights: dict[int, tuple[Any, int]] = {}

    def tick(self, steps: int = 0, chars: int = 0) -> None:
        """Spend ``steps`` and ``chars``; raises LimitError past a limit or the deadline,
        RenderAborted when ``abort`` is set."""
        self.steps += steps
        self.built += chars
        if self.abort is not None and self.abort.is_set():
            raise RenderAborted("the render was stopped")
        if self.steps > MAX_STEPS:
            raise LimitError(f"the template runs more than {MAX_STEPS:,} steps (loop iterations and calls) in one render")
        if self.built > MAX_BUILT:
            raise LimitError(f"the template builds more than {MAX_BUILT:,} characters in one render")
        if time.monotonic() > self.deadline:
            raise LimitError(f"the template took longer than {self.time_limit_s:g} s to render")


_CURRENT: contextvars.ContextVar[Optional[Budget]] = contextvars.ContextVar("judgecal_render_budget", default=None)


def budget() -> Budget:
    """The budget of the render in progress (a fresh one outside a render: compile-time
    constant folding and the load-time checks)."""
    b = _CURRENT.get()
    return b if b is not None else Budget()


@contextlib.contextmanager
def limits(time_limit_s: Optional[float] = RENDER_TIME_LIMIT_S, abort: Optional[threading.Event] = None) -> Iterator[Budget]:
    """Run a render under a fresh :class:`Budget` (see :meth:`Budget.tick`)."""
    token = _CURRENT.set(Budget(time_limit_s, abort))
    try:
        yield _CURRENT.get()  # type: ignore[misc]
    finally:
        _CURRENT.reset(token)


def _fmt(n: float) -> str:
    return f"{n:,.0f}" if isinstance(n, (int, float)) and math.isfinite(n) else str(n)


def _too_big(size: float, what: str) -> LimitError:
    return LimitError(f"{what} would hold {_fmt(size)} characters; a template may build at most {MAX_TEXT:,}")


def weight(obj: Any, limit: int = MAX_TEXT) -> int:
    """The size of ``obj`` as text, in characters, counting every reference (a list holding
    the same long string twice weighs twice): a string its length, an integer its digits,
    a container the weights of its items plus one each plus two. Stops counting past
    ``limit`` (returns ``limit + 1``). Lazy values (generators) weigh 16."""
    if isinstance(obj, str):
        return len(obj)
    if isinstance(obj, bool) or obj is None:
        return 5
    if isinstance(obj, int):
        return obj.bit_length() * 31 // 100 + 2
    if isinstance(obj, float):
        return 24
    if not isinstance(obj, (list, tuple, dict, set, frozenset)):
        return 16
    cache = budget().weights
    hit = cache.get(id(obj))
    if hit is not None and hit[0] is obj:
        return hit[1]
    total = 2
    items = obj.items() if isinstance(obj, dict) else obj
    for item in items:
        total += 1 + (weight(item[0], limit) + weight(item[1], limit) if isinstance(obj, dict) else weight(item, limit))
        if total > limit:
            return limit + 1
    cache[id(obj)] = (obj, total)
    return total


def check_size(obj: Any, what: str = "a value") -> int:
    """Raise LimitError when ``obj`` weighs more than :data:`MAX_TEXT`; returns its weight."""
    w = weight(obj)
    if w > MAX_TEXT:
        raise LimitError(f"{what} holds more than {MAX_TEXT:,} characters (counting every reference)")
    return w


def _charge(result: Any, what: str = "a result") -> Any:
    b = budget()
    b.tick(0, check_size(result, what) if isinstance(result, (str, list, tuple, dict)) else 0)
    if isinstance(result, int) and not isinstance(result, bool) and result.bit_length() > MAX_INT_BITS:
        raise LimitError(f"an integer of {result.bit_length():,} bits; a template may compute at most {MAX_INT_BITS:,}")
    return result


_PLAIN = (str, int, float, bool, type(None))


def require_plain(value: Any, what: str = "a value") -> Any:
    """Raise SecurityError unless ``value`` is text, a number, a boolean, None, or a list,
    tuple or dict of such values (what a template may print or turn into text)."""
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, (list, tuple, dict)):
        cache = budget().weights
        key = ("plain", id(value))
        hit = cache.get(key)  # type: ignore[call-overload]
        if hit is not None and hit[0] is value:
            return value
        for item in (value.items() if isinstance(value, dict) else value):
            for part in (item if isinstance(value, dict) else (item,)):
                require_plain(part, what)
        cache[key] = (value, 0)  # type: ignore[index]
        return value
    if isinstance(value, Undefined):
        value._fail_with_undefined_error()  # the undefined value's own error (which name is missing)
    kind = _kind(value)
    raise jinja2.sandbox.SecurityError(f"{what} is {kind}; a template may print or turn into text only text, "
                                       "numbers, booleans, lists and dicts")


def _kind(value: Any) -> str:
    if isinstance(value, Undefined):
        return "undefined"
    if isinstance(value, (types.GeneratorType, map, filter, Iterator)):
        return "a lazy sequence (add |list or |join)"
    if isinstance(value, LoopContext):
        return "the loop object (use loop.index, loop.first...)"
    if isinstance(value, Macro):
        return "a macro (call it)"
    if callable(value):
        return "a method or function (call it)"
    return f"a {type(value).__name__} object"


def _text(value: Any, what: str = "a value") -> str:
    require_plain(value, what)
    check_size(value, what)
    return str(value)


# ------------------------------------------------------------------ size estimates
def _int_arg(n: Any, what: str) -> None:
    """A width / count argument: at most MAX_TEXT."""
    if isinstance(n, (int, float)) and not isinstance(n, bool) and n > MAX_TEXT:
        raise LimitError(f"{what} {_fmt(n)} is over the limit of {MAX_TEXT:,} characters")


def _est_replace(s: str, old: Any, new: Any, count: Any = -1) -> None:
    if not (isinstance(s, str) and isinstance(old, str) and isinstance(new, str)):
        return
    n = len(s) + 1 if old == "" else s.count(old)
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        n = min(n, count)
    size = len(s) + n * (len(new) - len(old))
    if size > MAX_TEXT:
        raise _too_big(size, "replace()")


def _pre_pad(name: str) -> Callable[..., None]:
    def check(s: Any, width: Any = 0, *rest: Any, **kw: Any) -> None:
        _int_arg(width, f"{name}() width")
    return check


def _pre_expandtabs(s: Any, tabsize: Any = 8) -> None:
    _int_arg(tabsize, "expandtabs() tab size")
    if isinstance(s, str) and isinstance(tabsize, int):
        size = len(s) + s.count("\t") * max(tabsize, 0)
        if size > MAX_TEXT:
            raise _too_big(size, "expandtabs()")


def _pre_str_replace(s: Any, old: Any = "", new: Any = "", count: Any = -1) -> None:
    _est_replace(s, old, new, count)


_STR_PRECHECK: dict[str, Callable[..., None]] = {
    "center": _pre_pad("center"), "ljust": _pre_pad("ljust"), "rjust": _pre_pad("rjust"), "zfill": _pre_pad("zfill"),
    "expandtabs": _pre_expandtabs, "replace": _pre_str_replace,
}

_PRINTF = re.compile(r"%(?:\(([^)]*)\))?([#0 +\-]*)(\*|\d+)?(?:\.(\*|\d*))?[hlL]?(.?)", re.S)


def _num(text: str) -> float:
    try:
        return int(text)
    except ValueError:  # more digits than Python converts
        return math.inf


def printf_size(fmt: str, args: Any) -> float:
    """An upper bound of ``len(fmt % args)`` (each conversion: its width, precision and the
    weight of its value), raising SecurityError when a value is not plain."""
    mapping = args if isinstance(args, dict) else None
    seq = args if isinstance(args, tuple) else (args,)
    size: float = len(fmt)
    i = 0

    def take() -> Any:
        nonlocal i
        value = seq[i] if i < len(seq) else 0
        i += 1
        return value

    for m in _PRINTF.finditer(fmt):
        key, _, width, prec, conv = m.groups()
        if conv == "%":
            continue
        w = take() if width == "*" else _num(width) if width else 0
        p = take() if prec == "*" else _num(prec) if prec else 0
        if mapping is not None and key is not None:
            value = mapping.get(key, "")
        elif mapping is not None:
            value = mapping
        else:
            value = take()
        require_plain(value, "a %-format value")
        w = abs(w) if isinstance(w, (int, float)) else 0
        p = abs(p) if isinstance(p, (int, float)) else 0
        size += max(w, weight(value)) + p + 24
    return size


def _check_printf(fmt: Any, args: Any) -> None:
    if isinstance(fmt, str):
        size = printf_size(fmt, args)
        if size > MAX_TEXT:
            raise _too_big(size, "the %-formatted text")


_SPEC = re.compile(r"(?:.?[<>=^])?[-+ ]?z?#?0?(\d*)[,_]?(?:\.(\d*))?[a-zA-Z%]?\Z", re.S)


def format_spec_size(spec: str) -> float:
    """The width plus precision a ``str.format`` spec asks for (0 when it parses as none)."""
    m = _SPEC.match(spec)
    if not m:
        return 0
    return (_num(m.group(1)) if m.group(1) else 0) + (_num(m.group(2)) if m.group(2) else 0)


class _BoundedFormatter(jinja2.sandbox.SandboxedFormatter):
    """``str.format`` in the sandbox: fields read through the sandbox, values must be plain,
    widths and precisions at most MAX_TEXT, every field charged to the render's budget."""

    def convert_field(self, value: Any, conversion: Optional[str]) -> Any:
        require_plain(value, "a format field")
        return super().convert_field(value, conversion)

    def format_field(self, value: Any, format_spec: str) -> Any:
        require_plain(value, "a format field")
        size = format_spec_size(format_spec)
        if size > MAX_TEXT:
            raise LimitError(f"the format spec {format_spec[:30]!r} asks for {_fmt(size)} characters; "
                             f"a template may build at most {MAX_TEXT:,}")
        check_size(value, "a format field")
        out = super().format_field(value, format_spec)
        budget().tick(0, len(out))
        return out


# ------------------------------------------------------------------ filters
def _plain_value(name: str) -> Callable[..., None]:
    def check(value: Any, *args: Any, **kwargs: Any) -> None:
        require_plain(value, f"the value of the {name!r} filter")
    return check


def _pre_center(value: Any, width: Any = 80) -> None:
    _int_arg(width, "center width")


def _pre_indent(s: Any, width: Any = 4, first: bool = False, blank: bool = False) -> None:
    w = len(width) if isinstance(width, str) else width
    _int_arg(w, "indent width")
    if isinstance(w, int) and isinstance(s, str):
        size = len(s) + (s.count("\n") + 1) * max(w, 0)
        if size > MAX_TEXT:
            raise _too_big(size, "indent")


def _pre_replace(s: Any, old: Any = "", new: Any = "", count: Any = None) -> None:
    _est_replace(str(s) if isinstance(s, str) else s, old, new, -1 if count is None else count)


def _pre_format(value: Any, *args: Any, **kwargs: Any) -> None:
    _check_printf(value, kwargs or args)


def _pre_batch(value: Any, linecount: Any = 1, fill_with: Any = None) -> None:
    _int_arg(linecount, "batch size")


def _pre_slice(value: Any, slices: Any = 1, fill_with: Any = None) -> None:
    _int_arg(slices, "number of slices")


_RUN = re.compile(r"\S+|\s+")


def _pre_wordwrap(s: Any, width: Any = 79, break_long_words: bool = True, wrapstring: Any = None,
                  break_on_hyphens: bool = True) -> None:
    if isinstance(s, str) and isinstance(width, int) and width > 0:
        sep = len(wrapstring) if isinstance(wrapstring, str) else 1
        lines = len(s.split()) + s.count("-") + s.count("\n") + len(s) // width + 1
        size = len(s) + lines * sep
        if size > MAX_TEXT:
            raise _too_big(size, "wordwrap")
        # textwrap cuts a run longer than the width one line at a time, copying the rest of
        # the run each time: about (run / width) * run characters copied, in pure Python
        longest = max((m.end() - m.start() for m in _RUN.finditer(s)), default=0)
        cost = (longest // width + 1) * longest
        if cost > MAX_WRAP_COPIES:
            raise LimitError(f"wordwrap at width {width} of a run of {longest:,} characters without (or of) spaces "
                             f"would copy {cost:,} characters; at most {MAX_WRAP_COPIES:,}")


_FILTER_PRECHECK: dict[str, Callable[..., None]] = {
    "center": _pre_center, "indent": _pre_indent, "replace": _pre_replace, "format": _pre_format,
    "batch": _pre_batch, "slice": _pre_slice, "wordwrap": _pre_wordwrap,
}


def _do_join(eval_ctx: Any, value: Any, d: str = "", attribute: Any = None) -> str:
    """The ``join`` filter, bounded: the items are listed first, each must be plain, and the
    joined size is checked before joining."""
    env = eval_ctx.environment
    items = list(value)
    budget().tick(len(items))
    if attribute is not None:
        getter = jinja2.filters.make_attrgetter(env, attribute)
        items = [getter(x) for x in items]
    sep = _text(d, "the join separator")
    texts = [_text(x, "a joined item") for x in items]
    size = sum(map(len, texts)) + max(len(texts) - 1, 0) * len(sep)
    if size > MAX_TEXT:
        raise _too_big(size, "join")
    return sep.join(texts)


_do_join.jinja_pass_arg = jinja2.utils._PassArg.eval_context  # type: ignore[attr-defined]


def _do_sum(env: Any, iterable: Any, attribute: Any = None, start: Any = 0) -> Any:
    """The ``sum`` filter, bounded: lists and tuples are concatenated in one pass, after a size
    check (Python's ``sum`` of lists copies the running total at every item: 300 000 one-item
    lists take minutes, in C, beyond any time limit); numbers are summed as usual."""
    items = list(iterable)
    budget().tick(len(items))
    if attribute is not None:
        getter = jinja2.filters.make_attrgetter(env, attribute)
        items = [getter(x) for x in items]
    if isinstance(start, (list, tuple)):
        for x in items:
            if type(x) is not type(start):
                raise TypeError(f'can only concatenate {type(start).__name__} (not "{type(x).__name__}") '
                                f"to {type(start).__name__}")
        size = weight(start) + sum(weight(x) for x in items)
        if size > MAX_TEXT:
            raise _too_big(size, "the sum")
        out = list(start)
        for x in items:
            out.extend(x)
        return out if isinstance(start, list) else tuple(out)
    return sum(items, start)


_do_sum.jinja_pass_arg = jinja2.utils._PassArg.environment  # type: ignore[attr-defined]


def _guard_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` with the limits: arguments weigh at most MAX_TEXT, text filters get plain
    values, the filter's own size estimate (if any) before, the result charged after."""
    pass_arg = jinja2.utils._PassArg.from_obj(func)
    pre = _FILTER_PRECHECK.get(name)
    plain = None if name in _ANY_VALUE_FILTERS else _plain_value(name)

    def guarded(*args: Any, **kwargs: Any) -> Any:
        rest = args[1:] if pass_arg is not None else args
        budget().tick(1)
        for a in (*rest, *kwargs.values()):
            check_size(a, f"an argument of the {name!r} filter")
        if plain is not None and rest:
            plain(*rest)
        if pre is not None and rest:
            pre(*rest, **kwargs)
        return _charge(func(*args, **kwargs), f"the result of the {name!r} filter")

    guarded.__name__ = getattr(func, "__name__", name)
    guarded.__doc__ = func.__doc__
    if pass_arg is not None:
        guarded.jinja_pass_arg = pass_arg  # type: ignore[attr-defined]
    return guarded


# ------------------------------------------------------------------ AST transform
class _Guards(jinja2.visitor.NodeTransformer):
    """Wrap every ``for`` iterable in ``environment._iter_guard(iterable, body_chars)`` and
    every ``~`` in ``environment._concat(...)`` (``body_chars``: the literal text of the loop
    body and of the files it includes, charged per iteration)."""

    def __init__(self, env: jinja2.Environment):
        self.env = env

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        chars = sum(len(d.data) for b in node.body for d in b.find_all(nodes.TemplateData))
        chars += sum(len(d.data) for d in node.body if isinstance(d, nodes.TemplateData))
        for inc in (i for b in node.body for i in ([b] if isinstance(b, nodes.Include) else b.find_all(nodes.Include))):
            try:
                if isinstance(inc.template, nodes.Const):
                    chars += len(self.env.loader.get_source(self.env, inc.template.value)[0])  # type: ignore[union-attr]
            except Exception:  # noqa: BLE001 - refused at load time
                pass
        node.iter = nodes.Call(nodes.EnvironmentAttribute("_iter_guard"), [node.iter, nodes.Const(chars)], [], None, None,
                               lineno=node.iter.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return nodes.Call(nodes.EnvironmentAttribute("_concat"), list(node.nodes), [], None, None, lineno=node.lineno)


# ------------------------------------------------------------------ the environment
def _finalize(value: Any) -> Any:
    require_plain(value, "a printed value")
    budget().tick(0, check_size(value, "a printed value"))
    return value


class BoundedSandbox(jinja2.sandbox.ImmutableSandboxedEnvironment):
    """Jinja2's immutable sandbox with no globals and the limits of the module doc. Undefined
    values are strict; an unsafe attribute is an error at once (not an undefined value)."""

    intercepted_binops = frozenset(["+", "-", "*", "/", "//", "%", "**"])

    def __init__(self, **kwargs: Any):
        super().__init__(undefined=jinja2.StrictUndefined, finalize=_finalize, optimized=False, autoescape=False,
                         **kwargs)
        self.globals.clear()
        for name in REMOVED_FILTERS:
            self.filters.pop(name, None)
        self.filters["join"] = _do_join
        self.filters["sum"] = _do_sum
        self.filters = {name: _guard_filter(name, f) for name, f in self.filters.items()}

    # -- parsing: the guards are part of the compiled code
    def _parse(self, source: str, name: Optional[str], filename: Optional[str]) -> nodes.Template:
        return _Guards(self).visit(super()._parse(source, name, filename))

    def parse_raw(self, source: str) -> nodes.Template:
        """The template's AST as written (no guards): what the load-time checks read."""
        return super()._parse(source, None, None)

    # -- guards called from compiled code
    def _iter_guard(self, iterable: Any, body_chars: int = 0) -> Any:
        b = budget()
        if isinstance(iterable, (str, list, tuple, dict)):
            b.tick(len(iterable), len(iterable) * body_chars)
            return iterable
        return self._counted(iterable, body_chars)

    @staticmethod
    def _counted(iterable: Any, body_chars: int) -> Iterator[Any]:
        b = budget()
        for item in iterable:
            b.tick(1, body_chars)
            yield item

    def _concat(self, *parts: Any) -> str:
        texts = [_text(p, "a ~ operand") for p in parts]
        size = sum(map(len, texts))
        if size > MAX_TEXT:
            raise _too_big(size, "the ~ concatenation")
        budget().tick(0, size)
        return "".join(texts)

    # -- sandbox hooks
    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        if not super().is_safe_attribute(obj, attr, value):
            return False
        if callable(value) and not isinstance(value, Macro):
            if isinstance(obj, str):
                allowed = STR_METHODS
            elif isinstance(obj, (list, tuple)):
                allowed = SEQ_METHODS
            elif isinstance(obj, dict):
                allowed = DICT_METHODS
            elif isinstance(obj, LoopContext):
                allowed = LOOP_METHODS
            else:
                allowed = frozenset()
            if attr not in allowed:
                raise jinja2.sandbox.SecurityError(f"{type(obj).__name__}.{attr} is not available in prompt templates")
        return True

    def unsafe_undefined(self, obj: Any, attribute: str) -> Undefined:
        raise jinja2.sandbox.SecurityError(f"access to attribute {attribute!r} of a {type(obj).__name__!r} object "
                                           "is not allowed")

    def wrap_str_format(self, value: Any) -> Optional[Callable[..., str]]:
        if not isinstance(value, (types.MethodType, types.BuiltinMethodType)) or value.__name__ not in ("format", "format_map"):
            return None
        f_self = value.__self__
        if not isinstance(f_self, str):
            return None
        is_map = value.__name__ == "format_map"
        formatter = _BoundedFormatter(self)

        def wrapper(*args: Any, **kwargs: Any) -> str:
            if is_map:
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one argument")
                args, kwargs = (), args[0]
            out = str(formatter.vformat(f_self, args, kwargs))
            if len(out) > MAX_TEXT:
                raise _too_big(len(out), "str.format")
            return out

        wrapper.__name__ = value.__name__
        return wrapper

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        budget().tick(0)
        check_binop(operator, left, right)
        return _charge(super().call_binop(context, operator, left, right), f"the result of {operator!r}")

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        scope = {k: kwargs.pop(k) for k in ("_block_vars", "_loop_vars") if k in kwargs}  # jinja2's own
        if getattr(__obj, "__self__", None) is __self:  # _iter_guard, _concat: they charge themselves
            return __obj(*args, **kwargs)
        budget().tick(MACRO_STEPS if isinstance(__obj, Macro) else 1)
        if isinstance(__obj, LoopContext):
            raise jinja2.sandbox.SecurityError("recursive loops are not available in prompt templates")
        if not __self.is_safe_callable(__obj):
            raise jinja2.sandbox.SecurityError(f"{__obj!r} is not safely callable")
        args = _precheck_method(__obj, args, kwargs)
        return _charge(__context.call(__obj, *args, **kwargs, **scope), "the result of a call")


def _precheck_method(obj: Any, args: tuple, kwargs: dict) -> tuple:
    """Size checks of a str method before it runs; ``join`` gets its items listed (and
    checked) first. Returns the arguments to call with."""
    owner = getattr(obj, "__self__", None)
    if not isinstance(owner, str) or not isinstance(obj, types.BuiltinMethodType):
        return args
    name = obj.__name__
    if name == "join" and args:
        items = list(args[0])
        budget().tick(len(items))
        for x in items:
            require_plain(x, "a joined item")
        size = sum(weight(x) for x in items) + max(len(items) - 1, 0) * len(owner)
        if size > MAX_TEXT:
            raise _too_big(size, "join()")
        return (items, *args[1:])
    pre = _STR_PRECHECK.get(name)
    if pre is not None:
        pre(owner, *args, **kwargs)
    return args


def check_binop(operator: str, left: Any, right: Any) -> None:
    """Refuse (LimitError) an operator whose result would go over a limit, before it runs;
    SecurityError when ``%`` would format a value that is not plain."""
    def is_int(x: Any) -> bool:
        return isinstance(x, int) and not isinstance(x, bool)

    if operator == "*":
        for seq, n in ((left, right), (right, left)):
            if isinstance(seq, (str, list, tuple)) and is_int(n) and n > 1:
                size = (len(seq) if isinstance(seq, str) else weight(seq, MAX_TEXT)) * n
                if size > MAX_TEXT:
                    raise LimitError(f"a repetition would hold {_fmt(size)} characters; a template may build at most "
                                     f"{MAX_TEXT:,}")
        if is_int(left) and is_int(right) and left.bit_length() + right.bit_length() > MAX_INT_BITS + 1:
            raise LimitError(f"a product of {left.bit_length() + right.bit_length():,} bits; a template may compute "
                             f"integers of at most {MAX_INT_BITS:,} bits")
    elif operator == "**":
        if is_int(left) and is_int(right) and right > 0 and abs(left) > 1:
            bits = (abs(left).bit_length() - 1) * right + 1
            if bits > MAX_INT_BITS:
                raise LimitError(f"a power of at least {_fmt(bits)} bits; a template may compute integers of at most "
                                 f"{MAX_INT_BITS:,} bits")
    elif operator == "+":
        if isinstance(left, (str, list, tuple)) and isinstance(right, (str, list, tuple)):
            size = weight(left) + weight(right)
            if size > MAX_TEXT:
                raise _too_big(size, "a + result")
    elif operator == "%":
        _check_printf(left, right)


# ------------------------------------------------------------------ load-time limits
class _Impossible(Exception):
    """Not known when the template is loaded."""


_UNKNOWN = object()


def static_limits(ast: nodes.Template, env: BoundedSandbox, variables: tuple[str, ...]) -> Optional[tuple[nodes.Node, str]]:
    """What provably goes over a limit whatever the variables hold: (node, reason), or None.

    Evaluates, with the render-time guards, every expression whose value is known when the
    template is loaded (constants, names set to constants, lists of them; the variables are
    unknown), checks constant widths of the padding methods and filters whatever the text,
    and counts the iterations of nested loops over known values."""
    token = _CURRENT.set(Budget(time_limit_s=RENDER_TIME_LIMIT_S))
    try:
        _Static(env, variables).body(ast.body, {}, 1)
    except _Refused as exc:
        return exc.node, exc.reason
    finally:
        _CURRENT.reset(token)
    return None


class _Refused(Exception):
    def __init__(self, node: nodes.Node, reason: str):
        super().__init__(reason)
        self.node, self.reason = node, reason


class _Static:
    def __init__(self, env: BoundedSandbox, variables: tuple[str, ...]):
        self.env, self.variables = env, variables
        self.steps = 0

    # -- statements
    def body(self, stmts: list[nodes.Node], scope: dict[str, Any], mult: Optional[int]) -> None:
        for node in stmts:
            self.stmt(node, scope, mult)

    def stmt(self, node: nodes.Node, scope: dict[str, Any], mult: Optional[int]) -> None:
        if isinstance(node, nodes.Assign):
            value = self.value(node.node, scope)
            for name in _target_names(node.target):
                scope.pop(name, None)
            if isinstance(node.target, nodes.Name) and value is not _UNKNOWN:
                scope[node.target.name] = value
        elif isinstance(node, nodes.For):
            it = self.value(node.iter, scope)
            n = len(it) if isinstance(it, (str, list, tuple, dict)) else None
            inner_mult = mult * n if (mult is not None and n is not None) else None
            if inner_mult is not None:
                self.steps += inner_mult
                if self.steps > MAX_STEPS:
                    raise _Refused(node, f"the loops run {_fmt(self.steps)} iterations; a render may run at most "
                                         f"{MAX_STEPS:,}")
            targets = _target_names(node.target)
            inner = {k: v for k, v in scope.items() if k not in targets}
            self.body(node.body, inner, inner_mult)
            self.body(node.else_, dict(scope), mult)
            if node.test is not None:
                self.value(node.test, inner)
        elif isinstance(node, nodes.If):
            self.value(node.test, scope)
            assigned: set[str] = set()
            for branch in [node.body, *[e.body for e in node.elif_], node.else_]:
                self.body(branch, dict(scope), mult)
                assigned |= {name for s in branch for name in _assigned(s)}
            for e in node.elif_:
                self.value(e.test, scope)
            for name in assigned:
                scope.pop(name, None)
        elif isinstance(node, (nodes.Macro, nodes.CallBlock)):
            self.body(node.body, {}, None)
            if isinstance(node, nodes.CallBlock):
                self.value(node.call, scope)
        elif isinstance(node, nodes.Output):
            for child in node.nodes:
                self.value(child, scope)
        elif isinstance(node, (nodes.Block, nodes.Scope, nodes.ScopedEvalContextModifier, nodes.FilterBlock,
                               nodes.AssignBlock, nodes.With)):
            inner = dict(scope)
            if isinstance(node, nodes.With):
                for target, value in zip(node.targets, node.values):
                    v = self.value(value, scope)
                    if isinstance(target, nodes.Name) and v is not _UNKNOWN:
                        inner[target.name] = v
            if isinstance(node, nodes.FilterBlock):
                self.value(node.filter, scope)
            self.body(node.body, inner, mult)
            if isinstance(node, nodes.AssignBlock):
                for name in _target_names(node.target):
                    scope.pop(name, None)
        else:
            for child in node.iter_child_nodes():
                if isinstance(child, nodes.Expr):
                    self.value(child, scope)

    # -- expressions
    def value(self, node: nodes.Node, scope: dict[str, Any]) -> Any:
        """The node's value, or _UNKNOWN; raises _Refused when evaluating it provably goes
        over a limit."""
        try:
            return self.eval(node, scope)
        except _Impossible:
            return _UNKNOWN
        except LimitError as exc:
            raise _Refused(node, str(exc)) from None
        except _Refused:
            raise
        except Exception:  # noqa: BLE001 - any other error is the render's (it may depend on values)
            return _UNKNOWN

    def eval(self, node: nodes.Node, scope: dict[str, Any]) -> Any:
        env = self.env
        if isinstance(node, nodes.Const):
            return node.value
        if isinstance(node, nodes.TemplateData):
            return node.data
        if isinstance(node, nodes.Name):
            if node.name in scope:
                return scope[node.name]
            raise _Impossible()
        if isinstance(node, (nodes.List, nodes.Tuple)):
            items = [self.eval(x, scope) for x in node.items]
            return items if isinstance(node, nodes.List) else tuple(items)
        if isinstance(node, nodes.Dict):
            return {self.eval(p.key, scope): self.eval(p.value, scope) for p in node.items}
        if isinstance(node, nodes.BinExpr):
            left, right = self.value(node.left, scope), self.value(node.right, scope)
            if left is _UNKNOWN or right is _UNKNOWN:
                raise _Impossible()
            return env.call_binop(None, node.operator, left, right)
        if isinstance(node, nodes.Neg):
            return -self.eval(node.node, scope)
        if isinstance(node, nodes.Concat):
            parts = [self.value(x, scope) for x in node.nodes]
            if any(p is _UNKNOWN for p in parts):
                raise _Impossible()
            return env._concat(*parts)
        if isinstance(node, nodes.Filter):
            return self.filter(node, scope)
        if isinstance(node, nodes.Call) and isinstance(node.node, nodes.Getattr):
            return self.method(node, scope)
        for child in node.iter_child_nodes():
            if isinstance(child, nodes.Expr):
                self.value(child, scope)
        raise _Impossible()

    def args(self, node: nodes.Filter | nodes.Call, scope: dict[str, Any]) -> tuple[list, dict, bool]:
        args = [self.value(a, scope) for a in node.args]
        kwargs = {k.key: self.value(k.value, scope) for k in node.kwargs}
        for extra in (node.dyn_args, node.dyn_kwargs):
            if extra is not None:
                self.value(extra, scope)
        known = node.dyn_args is None and node.dyn_kwargs is None and _UNKNOWN not in args and \
            _UNKNOWN not in kwargs.values()
        return args, kwargs, known

    def filter(self, node: nodes.Filter, scope: dict[str, Any]) -> Any:
        value = self.value(node.node, scope) if node.node is not None else _UNKNOWN
        args, kwargs, known = self.args(node, scope)
        if not known:
            raise _Impossible()
        if value is _UNKNOWN:
            pre = _FILTER_PRECHECK.get(node.name)
            if pre is not None and node.name not in ("format", "replace"):
                pre("", *args, **kwargs)  # widths and counts that are over the limit whatever the text
            raise _Impossible()
        func = self.env.filters[node.name]
        pass_arg = jinja2.utils._PassArg.from_obj(func)
        if pass_arg is jinja2.utils._PassArg.context:
            raise _Impossible()
        lead = {jinja2.utils._PassArg.eval_context: [nodes.EvalContext(self.env)],
                jinja2.utils._PassArg.environment: [self.env]}.get(pass_arg, [])  # type: ignore[call-overload]
        return func(*lead, value, *args, **kwargs)

    def method(self, node: nodes.Call, scope: dict[str, Any]) -> Any:
        getattr_node = node.node
        assert isinstance(getattr_node, nodes.Getattr)
        obj = self.value(getattr_node.node, scope)
        args, kwargs, known = self.args(node, scope)
        name = getattr_node.attr
        if not known:
            raise _Impossible()
        if obj is _UNKNOWN:
            pre = _STR_PRECHECK.get(name)
            if pre is not None and name != "replace":
                pre("", *args, **kwargs)
            raise _Impossible()
        if not isinstance(obj, str) or name not in STR_METHODS:
            raise _Impossible()
        method = self.env.getattr(obj, name)
        budget().tick(1)
        args = list(_precheck_method(getattr(obj, name), tuple(args), kwargs)) if name not in ("format", "format_map") else args
        return _charge(method(*args, **kwargs))


def _target_names(target: nodes.Node) -> set[str]:
    """The names an assignment or loop target binds (``a`` or ``a, b``)."""
    return {target.name} if isinstance(target, nodes.Name) else {n.name for n in target.find_all(nodes.Name)}


def _assigned(node: nodes.Node) -> set[str]:
    """Names a statement sets in its own scope (not inside loops, macros or blocks)."""
    if isinstance(node, (nodes.Assign, nodes.AssignBlock)):
        return _target_names(node.target)
    if isinstance(node, nodes.If):
        return {name for branch in [node.body, *[e.body for e in node.elif_], node.else_] for s in branch
                for name in _assigned(s)}
    return set()


def format_fields(fmt: str) -> Iterator[tuple[str, str]]:
    """(field name, format spec) of every replacement field of a ``str.format`` string,
    nested specs included; raises ValueError for a malformed string."""
    for _, field, spec, _ in string.Formatter().parse(fmt):
        if field is None:
            continue
        yield field, spec or ""
        if spec and "{" in spec:
            yield from format_fields(spec)


def field_parts(field: str) -> list[str]:
    """The attribute and index names of a format field (``0.a[b]`` -> ``['a', 'b']``)."""
    return [p for p in re.split(r"[.\[\]]", field)[1:] if p]
