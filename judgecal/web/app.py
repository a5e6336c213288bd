"""The web app of ``judgecal serve`` (docs/serve.md): routes and templates only.

Each page parses its query string (an unknown parameter, a malformed value or a value out of
range is a 400 page with one line), calls the view function the CLI calls for the same thing
(:func:`judgecal.views.leaderboard.build_leaderboard`, :func:`judgecal.views.winrates.build_winrate_board`,
:func:`judgecal.views.reporting.make_report`, :mod:`judgecal.views.mc`, :mod:`judgecal.views.browse`,
:mod:`judgecal.views.audit`) and renders the result with a Jinja2 template (autoescaping on:
every name, answer and judge output is text). ``?format=json`` on the leaderboard, win-rate,
calibration and mc pages returns what the CLI's ``--format json`` prints.

Safe to leave running: the database is opened read-only by the database itself
(:func:`judgecal.db.engine.read_only_url`), only GET and HEAD are routed, every response forbids
scripts (Content-Security-Policy ``script-src 'none'``; the pages have none), and with a token
every request must carry it (``?token=``, ``Authorization: Bearer``, or the cookie set after the
first request with a good token)."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import json
import math
from functools import wraps
from pathlib import Path
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from judgecal import __version__
from judgecal.errors import DatabaseError, JudgecalError, NotFoundError
from judgecal.secrets import scrub
from judgecal.web.cache import Page, PageCache

HERE = Path(__file__).resolve().parent
COOKIE = "judgecal_token"
CSP = ("default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; base-uri 'none'; "
       "frame-ancestors 'none'")
SECURITY_HEADERS = [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"), (b"x-frame-options", b"DENY"),
                    (b"cache-control", b"no-store")]
MAX_BOOTSTRAP = 100000


class BadRequest(Exception):
    """A query parameter that cannot be used (a 400 page with this one-line message)."""


# ---------------------------------------------------------------- query parameters
class Params:
    """A page's query parameters: each read once, typed and checked; names the page does not
    read are refused (:meth:`check_unknown`)."""

    def __init__(self, request: Request, allowed: tuple[str, ...]):
        self.q = request.query_params
        self.allowed = set(allowed) | {"token", "fresh"}
        self.check_unknown()
        self.flag("fresh")  # every page takes it (judgecal.web.warm): checked like any other value

    def check_unknown(self) -> None:
        unknown = sorted(set(self.q.keys()) - self.allowed)
        if unknown:
            takes = ", ".join(sorted(self.allowed - {"token", "fresh"})) or "no parameters"
            raise BadRequest(f"unknown query parameter {unknown[0]!r} (this page takes: {takes})")

    def text(self, name: str, default: str | None = None, max_len: int = 500) -> str | None:
        """The parameter's value (spaces around it dropped), ``default`` when absent or blank.
        ``model`` and ``judge`` name something stored as given: matched exactly (spaces kept),
        control characters an import accepted allowed (a NUL is not)."""
        vals = self.q.getlist(name)
        if len(vals) > 1:
            raise BadRequest(f"{name} is given {len(vals)} times: give it once")
        stored_name = name in ("model", "judge")  # names stored as given: matched exactly
        v = (vals[0] if stored_name else vals[0].strip()) if vals else ""
        if not v.strip():
            return default
        if stored_name:
            if len(v) > max_len or "\x00" in v:
                raise BadRequest(f"{name} is {len(v)} characters long: at most {max_len}" if len(v) > max_len
                                 else f"{name} holds a control character (NUL)")
            return v
        return self._check(name, v, max_len)

    def texts(self, name: str, max_n: int = 20, max_len: int = 500) -> list[str]:
        vals = [v.strip() for v in self.q.getlist(name) if v.strip()]
        if len(vals) > max_n:
            raise BadRequest(f"{name} is given {len(vals)} times: at most {max_n}")
        return list(dict.fromkeys(self._check(name, v, max_len) for v in vals))

    @staticmethod
    def _check(name: str, v: str, max_len: int) -> str:
        if len(v) > max_len:
            raise BadRequest(f"{name} is {len(v)} characters long: at most {max_len}")
        if any(ord(c) < 32 for c in v):
            raise BadRequest(f"{name} holds a control character")
        return v

    def integer(self, name: str, default: int | None = None, lo: int | None = None, hi: int | None = None) -> int | None:
        v = self.text(name, max_len=20)
        if v is None:
            return default
        try:
            n = int(v)
        except ValueError:
            raise BadRequest(f"{name} must be an integer, got {v!r}") from None
        if (lo is not None and n < lo) or (hi is not None and n > hi):
            raise BadRequest(f"{name} must be {_range(lo, hi)}, got {n}")
        return n

    def number(self, name: str, default: float | None = None, lo: float | None = None, hi: float | None = None,
               lo_open: bool = False) -> float | None:
        v = self.text(name, max_len=40)
        if v is None:
            return default
        try:
            x = float(v)
        except ValueError:
            raise BadRequest(f"{name} must be a number, got {v!r}") from None
        if not math.isfinite(x) or (lo is not None and (x < lo or (lo_open and x == lo))) or (hi is not None and x > hi):
            raise BadRequest(f"{name} must be a finite number{' ' + _range(lo, hi) if lo is not None or hi is not None else ''}"
                             f", got {v!r}")
        return x

    def choice(self, name: str, options, default: str | None = None) -> str | None:
        v = self.text(name)
        if v is None:
            return default
        if v not in options:
            raise BadRequest(f"{name} must be one of {', '.join(options)}, got {v!r}")
        return v

    def date(self, name: str) -> dt.date | None:
        v = self.text(name, max_len=10)
        if v is None:
            return None
        try:
            return dt.date.fromisoformat(v)
        except ValueError:
            raise BadRequest(f"{name} must be a date as YYYY-MM-DD, got {v!r}") from None

    def flag(self, name: str) -> bool:
        v = self.text(name, max_len=5)
        if v is None:
            return False
        if v.lower() in ("1", "true", "yes", "on"):
            return True
        if v.lower() in ("0", "false", "no", "off"):
            return False
        raise BadRequest(f"{name} must be 1 or 0, got {v!r}")

    def fmt(self) -> str:
        return self.choice("format", ("html", "json"), "html")

    def carried(self, *exclude: str) -> dict[str, list[str]]:
        """Every parameter given (read and checked before), but ``exclude`` and the token, as
        :func:`link` takes them: a chooser page carries them into each choice's link, so that a
        ``seed`` or ``bootstrap`` given before the judge is chosen is honoured, never dropped."""
        skip = set(exclude) | {"token", "fresh"}
        out: dict[str, list[str]] = {}
        for k, v in self.q.multi_items():
            if k not in skip and v.strip():
                out.setdefault(k, []).append(v.strip())
        return out

    def resamples(self, default: int) -> int:
        """The ``bootstrap`` parameter: 0 (no CIs) or 20 to :data:`MAX_BOOTSTRAP`, as the CLI's
        ``--bootstrap`` (1 to 19 resamples cannot place a 95% interval)."""
        n = self.integer("bootstrap", default, 0, MAX_BOOTSTRAP)
        if 0 < n < 20:
            raise BadRequest(f"bootstrap={n} resamples cannot give a 95% interval: give 0 (no CIs) or at least 20")
        return n

    def seed(self, default: int = 0) -> int:
        """The ``seed`` parameter in the CLI's range, 0..2**31-1 (numpy refuses a negative seed)."""
        return self.integer("seed", default, 0, 2**31 - 1)


#: the largest id of an integer column on both dialects (PostgreSQL's int4; the CLI's bound too)
MAX_ID = 2**31 - 1


def _calibration_id(value: str, what: str) -> int:
    """A calibration id given in a query string: digits 0-9 only, at most :data:`MAX_ID`
    (a larger one is no stored id: SQLite cannot bind it, PostgreSQL refuses it). BadRequest else."""
    if not (value.isascii() and value.isdigit()):
        raise BadRequest(f"calibration must be {what}, got {value!r}")
    if int(value) > MAX_ID:
        raise BadRequest(f"calibration must be {what}: ids are at most {MAX_ID}, got {value}")
    return int(value)


def _range(lo, hi) -> str:
    if lo is not None and hi is not None:
        return f"between {lo} and {hi}"
    return f"at least {lo}" if lo is not None else f"at most {hi}"


# ---------------------------------------------------------------- rendering
def _environment():
    from jinja2 import Environment, PackageLoader, StrictUndefined

    from jinja2 import ChoiceLoader

    # the board partials (partials/*.html.j2) are the report's: the static report renders the same markup
    env = Environment(loader=ChoiceLoader([PackageLoader("judgecal.web", "templates"),
                                           PackageLoader("judgecal.report", "templates")]),
                      autoescape=True, undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.globals.update(link=link, version=__version__, fmt=fmt, pct=pct)
    return env


def link(path: str, **params) -> str:
    """``path?query`` from the parameters that are set (lists repeat the name)."""
    items = []
    for k, v in params.items():
        if v is None or v == "" or v is False or v == []:
            continue
        if isinstance(v, (list, tuple)):
            items += [(k, str(x)) for x in v]
        else:
            items.append((k, "1" if v is True else str(v)))
    return path + ("?" + urlencode(items) if items else "")


def fmt(x, digits: int = 3) -> str:
    """A figure for a table cell: '-' for None or non-finite, else ``digits`` decimals (integers
    as they are)."""
    if x is None or isinstance(x, bool):
        return "-" if x is None else str(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        return f"{x:.{digits}f}" if math.isfinite(x) else "-"
    return str(x)


def pct(x) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{100 * x:.1f}%"


def json_text(data) -> str:
    """Strict JSON as ``judgecal ... --format json`` prints it (NaN and infinities as null)."""
    def safe(v):
        if isinstance(v, float):
            return v if math.isfinite(v) else None
        if isinstance(v, dict):
            return {k: safe(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [safe(x) for x in v]
        return v

    return json.dumps(safe(data), indent=2, default=str, ensure_ascii=False, allow_nan=False)


class App:
    """The pages. ``url``: the read-only database URL; ``shown``: the URL as pages show it
    (password masked)."""

    def __init__(self, url: str, shown: str, cache: PageCache | None = None):
        self.url, self.shown = url, shown
        self.env = _environment()
        self.cache = cache if cache is not None else PageCache(max_entries=0)
        # the audits' pair indexes (judgecal.views.audit.AuditIndex) and the ratings list's index
        # (judgecal.db.browse.RatingIndex): every filter and page is cut from them, kept until the
        # database changes, in INDEX_SHARE times the pages' budget (the index of a 300,000-pair
        # audit is about 17 MB, of a million ratings about 40 MB)
        self._rating_index_seen: tuple = (None, 0)  # (data version, bytes) of a ratings index that could not be kept
        self.indexes = PageCache(max_entries=64 if self.cache.max_entries else 0,
                                 max_bytes=INDEX_SHARE * self.cache.max_bytes, max_share=1,
                                 size=lambda index: index.nbytes, keep=lambda index: True)
        self.warmer = None  # judgecal.web.warm.Warmer when pages are computed ahead (create_app(warm=True))

    def render(self, template: str, status_code: int = 200, **ctx) -> HTMLResponse:
        html = self.env.get_template(template).render(database=self.shown, **ctx)
        return HTMLResponse(html, status_code=status_code)

    def error(self, status: int, message: str) -> HTMLResponse:
        titles = {400: "Bad request", 401: "Token required", 403: "Refused", 404: "Not found",
                  405: "Method not allowed", 500: "Error", 503: "Database unavailable"}
        return self.render("error.html.j2", status_code=status, title=titles.get(status, "Error"), status=status, nav="",
                           message=scrub(message.splitlines()[0] if message else titles.get(status, "error")))

    # every page: errors become a page with one line, never a traceback; pages are cached
    # until the database changes (judgecal.web.cache)
    def page(self, fn):
        respond = self._respond(fn)

        @wraps(fn)
        def endpoint(request: Request):
            from judgecal.db.engine import data_version, get_engine

            try:
                version = data_version(get_engine(self.url))
            except Exception:  # noqa: BLE001 - the page itself says what is wrong with the database
                return _computed(respond(request))
            key = page_key(request.url.path, request.query_params.multi_items())
            q = request.query_params
            try:  # checked before the cache: the key leaves it out, so a cached page must not hide a bad value
                fresh = Params(request, tuple(q.keys())).flag("fresh")
            except BadRequest as exc:
                return _computed(self.error(400, str(exc)))
            waits = q.get("format") == "json" or fresh
            if self.warmer is not None and not waits and not self.cache.fresh(key, version):
                held = self.cache.peek(key)
                if held is not None and held[1].status == 200 and (held[1].media_type or "").startswith("text/html"):
                    self.warmer.ask(key)  # computed again in the background; this request is not kept waiting
                    return _response(_stale(held[1]), "stale")
            page, hit = self.cache.get_or_compute(key, version, lambda: to_page(respond(request)))
            return _response(page, "hit" if hit else "miss")
        return endpoint

    def compute_key(self, fn, key: tuple) -> Page:
        """The page of a cache key (:func:`page_key`), computed by the page function ``fn`` as a
        request for it would be (judgecal.web.warm computes pages ahead with it)."""
        path, items = key
        scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(), "root_path": "",
                 "query_string": urlencode(list(items)).encode(), "headers": [], "scheme": "http",
                 "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 0)}
        return to_page(self._respond(fn)(Request(scope)))

    def _respond(self, fn):
        def endpoint(request: Request):
            try:
                return fn(request)
            except BadRequest as exc:
                return self.error(400, str(exc))
            except NotFoundError as exc:
                return self.error(404, str(exc))
            except DatabaseError as exc:
                return self.error(503, str(exc))
            except JudgecalError as exc:
                return self.error(400, str(exc))
            except Exception as exc:  # noqa: BLE001 - never a traceback for users
                return self.error(*_unexpected(exc))
        return endpoint

    def json(self, data) -> Response:
        return Response(json_text(data) + "\n", media_type="application/json")

    def choose(self, p: Params, *, title: str, nav: str, heading: str, options: list[tuple[str, str, dict]],
               path: str, fmt_: str, chosen: tuple[str, ...], empty: str | None = None) -> Response:
        """A page that asks for what is missing (a judge, a baseline...): each option links to
        ``path`` with its own parameters and every other parameter given (:meth:`Params.carried`:
        ``seed=5`` before a judge is chosen is kept, not ignored); ``format=json`` gives the
        options as JSON."""
        carried = p.carried(*chosen, "format")
        links = [(text, link(path, **{**carried, **params, **({"format": "json"} if fmt_ == "json" else {})}))
                 for text, params in options]
        if fmt_ == "json":
            return self.json({"choose": heading, "carried": carried,
                              "options": [{"label": text, "url": href} for text, href in links]})
        given = any(k in p.q for k in chosen)
        return self.render("choose.html.j2", title=title, nav=nav, heading=heading, options=links,
                           carried=sorted((k, ", ".join(v)) for k, v in carried.items()),
                           empty=empty or ("No choice matches what was given." if given
                                           else "Nothing to choose from in this database yet."))

    # ------------------------------------------------------------ pages
    def overview(self, request: Request):
        Params(request, ())
        from judgecal.views.browse import overview

        return self.render("overview.html.j2", title="Overview", nav="overview", o=overview(self.url))

    def leaderboard(self, request: Request):
        from judgecal.report.board import COLUMNS
        from judgecal.report.boards_html import score_board_view
        from judgecal.views.leaderboard import DEFAULTS, build_leaderboard

        p = Params(request, ("family", "judge", "calibration", "calibration_from", "bootstrap", "seed", "min_ratings",
                             "max_unparsed", "mc_reference", "sort", "format"))
        families = p.texts("family")
        judge = p.text("judge")
        calibration = p.text("calibration", "latest", max_len=20)
        if calibration != "latest":
            _calibration_id(calibration, "a calibration id or 'latest'")
        cal_from = p.text("calibration_from")
        n_boot = p.resamples(DEFAULTS["n_bootstrap"])
        seed = p.seed(DEFAULTS["seed"])
        min_ratings = p.integer("min_ratings", DEFAULTS["min_ratings"], 0)
        max_unparsed = p.number("max_unparsed", DEFAULTS["max_unparsed"], 0.0, 1.0)
        mc_ref = p.integer("mc_reference", None, 1, 2**31 - 1)
        keys = [k for _, k in COLUMNS if k not in ("flags", "flag_codes")]
        sort = p.choice("sort", keys + [f"-{k}" for k in keys], None)
        fmt_ = p.fmt()
        if judge is None and calibration == "latest":
            from judgecal.views.browse import choices

            offered = choices(self.url)
            rated = [j for j in offered["judges"] if j["ratings"]]
            unknown = [f for f in families if f not in offered["families"]]
            if unknown:
                raise NotFoundError(f"no task family named {unknown[0]!r} (see the overview)")
            if families:  # the families given narrow the choice to the judges that rated there
                from judgecal.views.browse import family_judges

                there = {j["ref"] for fam, js in family_judges(self.url).items() if fam in families for j in js
                         if j["kind"] == "pointwise"}
                rated = [j for j in rated if j["ref"] in there]
            if len(rated) > 1 or (families and not rated):
                return self.choose(p, title="Score leaderboard", nav="leaderboard", path="/leaderboard", fmt_=fmt_,
                                   heading="Score leaderboard: choose a judge" + (
                                       f" (judges with ratings in {', '.join(families)})" if families else ""),
                                   chosen=("judge",), options=[(j["label"], {"judge": j["ref"]}) for j in rated],
                                   empty="No judge has ratings in the families given.")
            if families and len(rated) == 1:  # the one judge that rated the families given
                judge = rated[0]["ref"]
        board = build_leaderboard(families, judge, calibration, self.url, min_ratings=min_ratings,
                                  max_unparsed=max_unparsed, n_bootstrap=n_boot, seed=seed, mc_reference=mc_ref,
                                  calibration_from=cal_from)
        if fmt_ == "json":
            return self.json(board)
        here = dict(family=families, judge=judge, calibration=None if calibration == "latest" else calibration,
                    calibration_from=cal_from, bootstrap=None if n_boot == DEFAULTS["n_bootstrap"] else n_boot,
                    seed=None if seed == DEFAULTS["seed"] else seed, mc_reference=mc_ref)
        view = score_board_view(board, _sorted(board["rows"], sort),
                                lambda key: link("/leaderboard", **here, sort=_toggle(sort, key)) if key in keys else None)
        return self.render("leaderboard.html.j2", title="Score leaderboard", nav="leaderboard", board=board,
                           view=view, sort=sort, here=here, json_link=link("/leaderboard", **here, format="json"),
                           n_bootstrap=n_boot)

    def winrates(self, request: Request):
        from judgecal.db.verdicts import LENGTH_UNITS
        from judgecal.report.boards_html import winrate_board_view
        from judgecal.views.winrates import REGULARISERS, SORT_COLUMNS, build_winrate_board

        p = Params(request, ("baseline", "family", "judge", "bootstrap", "seed", "length_unit", "tokenizer",
                             "short_floor", "lc_regulariser", "joint", "sort", "format"))
        baseline = p.text("baseline")
        family = p.text("family")
        judge = p.text("judge")
        n_boot = p.resamples(1000)
        seed = p.seed()
        unit = p.choice("length_unit", LENGTH_UNITS, "chars")
        tokenizer = p.text("tokenizer")
        floor = p.number("short_floor", 0.25, 0.0, 1.0, lo_open=True)
        reg = p.choice("lc_regulariser", REGULARISERS, "auto")
        joint = p.flag("joint")
        sort = p.choice("sort", SORT_COLUMNS, "length_controlled_winrate")
        fmt_ = p.fmt()
        if baseline is None:
            from judgecal.views.browse import baselines

            found = [b for b in baselines(self.url)
                     if (family is None or b["task_family"] == family) and (judge is None or judge in (b["judge_ref"], b["judge"]))]
            return self.choose(p, title="Win rates", nav="winrates", path="/winrates", fmt_=fmt_,
                               heading="Win rates: choose a baseline", chosen=("baseline", "family", "judge"),
                               options=[(f"{b['model']} ({b['task_family']}, judge {b['judge']}, {b['verdicts']} verdicts)",
                                         {"baseline": b["model"], "family": b["task_family"], "judge": b["judge_ref"]})
                                        for b in found])
        board = build_winrate_board(baseline, [family] if family else [], judge, self.url, length_unit=unit,
                                    tokenizer=tokenizer, n_bootstrap=n_boot, seed=seed, short_floor=floor,
                                    lc_regulariser=reg, joint=joint, sort_by=sort)
        if fmt_ == "json":
            return self.json(board)
        here = dict(baseline=baseline, family=family, judge=judge, bootstrap=None if n_boot == 1000 else n_boot,
                    seed=seed or None, length_unit=None if unit == "chars" else unit, tokenizer=tokenizer,
                    short_floor=None if floor == 0.25 else floor, lc_regulariser=None if reg == "auto" else reg,
                    joint=joint)
        sortable = {"win_rate": "win_rate", "length_controlled_winrate": "length_controlled_winrate",
                    "calibrated_win_rate": "calibrated_win_rate", "avg_length": "avg_length", "model": "model",
                    "n_items": "n_total"}
        view = winrate_board_view(board, lambda key: link("/winrates", **here, sort=sortable[key]) if key in sortable
                                  else None)
        return self.render("winrates.html.j2", title="Win rates", nav="winrates", board=board, view=view, sort=sort,
                           json_link=link("/winrates", **here, sort=sort, format="json"))

    def calibration(self, request: Request):
        p = Params(request, ("family", "judge", "calibration", "bootstrap", "seed", "plots", "format"))
        family, judge = p.text("family"), p.text("judge")
        cal = p.text("calibration", max_len=20)
        if cal is not None:
            _calibration_id(cal, "a calibration id")
        n_boot = p.resamples(1000)
        seed = p.seed()
        plots = p.text("plots") is None or p.flag("plots")
        fmt_ = p.fmt()
        if cal is None and (family is None or judge is None):  # the list, narrowed by the one given
            from judgecal.views.browse import calibrations

            if family is not None:
                from judgecal.views.browse import choices

                if family not in choices(self.url)["families"]:
                    raise NotFoundError(f"no task family named {family!r} (see the overview)")
            fits = [f for f in calibrations(self.url)
                    if (family is None or f["task_family"] == family)
                    and (judge is None or judge in (f["judge"], f["judge_ref"]))]
            carried = p.carried("format", "family", "judge")  # bootstrap, seed, plots: kept in every calibration's link
            if fmt_ == "json":
                return self.json({"calibrations": fits, "carried": carried})
            return self.render("calibrations.html.j2", title="Calibrations", nav="calibration", fits=fits,
                               carried=carried, carried_text=sorted((k, ", ".join(v)) for k, v in carried.items()),
                               narrowed=family is not None or judge is not None)
        from judgecal.report.build import entry_facts, entry_title, flag_lines, method_table
        from judgecal.report.pairwise import COLUMNS as PW_COLUMNS, COMPARISON_COLUMNS, comparison_rows, rows as pw_rows
        from judgecal.views.reporting import make_report

        rep, entries, _ = make_report([family] if family else [], judge, [cal] if cal else ["latest"], self.url,
                                      None, (), plots=False, n_bootstrap=n_boot, seed=seed)
        if fmt_ == "json":
            return self.json(rep)
        source = {(e["task_family"], e["judge"], e.get("calibration_id")): e for e in entries}
        shown = []
        for e in rep["entries"]:
            ev = (source.get((e["task_family"], e["judge"], e.get("calibration_id"))) or {}).get("evaluation") or {}
            scatter = hist = None
            if plots:
                from judgecal.report.plots import plot_score_distributions, plot_score_vs_length

                scatter = _png(plot_score_vs_length(ev, title=entry_title(e), length_unit=e.get("length_unit")))
                hist = _png(plot_score_distributions(ev, title=entry_title(e)))
            cols, rows = method_table(e)
            shown.append({"e": e, "title": entry_title(e), "facts": entry_facts(e), "cols": cols, "rows": rows,
                          "flags": flag_lines(e), "scatter": scatter, "hist": hist})
        return self.render("calibration.html.j2", title="Calibration", nav="calibration", entries=shown, report=rep,
                           family=family, judge=judge, pw_cols=PW_COLUMNS, pw_rows=pw_rows(rep.get("pairwise_judges") or []),
                           cmp_cols=COMPARISON_COLUMNS, cmp_rows=comparison_rows(rep.get("pairwise_judges") or []),
                           json_link=link("/calibration", family=family, judge=judge, calibration=cal,
                                          bootstrap=None if n_boot == 1000 else n_boot, seed=seed or None,
                                          format="json"))

    def audit(self, request: Request):
        from judgecal.views.audit import FILTER_TEXT, FILTERS, PER_PAGE, judge_audit

        p = Params(request, ("family", "judge", "filter", "page", "per_page", "calibration", "format"))
        family, judge = p.text("family"), p.text("judge")
        fmt_ = p.fmt()
        flt = p.choice("filter", FILTERS, "all")
        page = p.integer("page", 1, 1, 10**9)
        from judgecal.db.browse import MAX_PAGE

        per_page = p.integer("per_page", PER_PAGE, 1, MAX_PAGE)
        cal = p.text("calibration", "latest", max_len=20)
        if cal not in ("latest", "none"):
            _calibration_id(cal, "an id, 'latest' or 'none'")
        if family is None or judge is None:
            from judgecal.views.browse import family_judges

            return self.choose(p, title="Judge audit", nav="audit", path="/audit", fmt_=fmt_,
                               heading="Judge audit: choose a task family and a judge", chosen=("family", "judge"),
                               options=[(f"{fam} · {j['label']} ({j['kind']})", {"family": fam, "judge": j["ref"]})
                                        for fam, js in family_judges(self.url).items() for j in js
                                        if (family is None or fam == family) and (judge is None or judge in (j["ref"], j["label"]))])
        a = judge_audit(family, judge, self.url, filter=flt, page=page, per_page=per_page, calibration=cal,
                        index=self._audit_index(family, judge, cal))
        if fmt_ == "json":
            return self.json(a)
        here = dict(family=family, judge=judge, calibration=None if cal == "latest" else cal,
                    per_page=None if per_page == PER_PAGE else per_page)
        return self.render("audit.html.j2", title=f"Audit: {family} · {a['judge']}", nav="audit", a=a, here=here,
                           json_link=link("/audit", **here, filter=None if flt == "all" else flt,
                                          page=None if page == 1 else page, format="json"),
                           filters=[(f, FILTER_TEXT[f], link("/audit", **here, filter=None if f == "all" else f))
                                    for f in FILTERS],
                           prev=link("/audit", **here, filter=None if flt == "all" else flt, page=page - 1)
                           if page > 1 else None,
                           next=link("/audit", **here, filter=None if flt == "all" else flt, page=page + 1)
                           if page < a["pages"] else None)

    def _index(self, key: tuple, compute, version=None):
        """An index (an audit's pairs, the ratings), from the index cache while the database has
        not changed (``version``: the data version, read here when not given)."""
        from judgecal.db.engine import data_version, get_engine

        if version is None:
            version = data_version(get_engine(self.url))
        index, _ = self.indexes.get_or_compute(key, version, compute)
        return index

    def _rating_index(self):
        """The ratings list's index where it is (or can be) kept; else None: each page is then one
        query (the index pays off only once kept: it reads every rating)."""
        from judgecal.db.engine import data_version, get_engine
        from judgecal.views.browse import rating_index, rating_index_bytes_at_most

        key = ("ratings",)
        if not self.indexes.max_entries:
            return None
        version = data_version(get_engine(self.url))
        if not self.indexes.fresh(key, version):
            seen_version, seen = self._rating_index_seen
            need = max(rating_index_bytes_at_most(self.url), seen if seen_version == version else 0)
            if not self.indexes.fits(need):
                return None
        index = self._index(key, lambda: rating_index(self.url), version)
        if not self.indexes.fits(index.nbytes):  # bigger than its estimate (long model names): not kept
            self._rating_index_seen = (version, index.nbytes)  # not computed again for this data
        return index

    def _audit_index(self, family: str, judge: str, cal: str):
        from judgecal.views.audit import audit_index

        return self._index(("audit", family, judge, cal), lambda: audit_index(family, judge, self.url, calibration=cal))

    def ratings(self, request: Request):
        from judgecal.db.browse import MAX_PAGE
        from judgecal.db.models import RATING_STATUSES
        from judgecal.views.browse import RATINGS_PER_PAGE, choices, ratings

        p = Params(request, ("family", "judge", "model", "status", "score_min", "score_max", "since", "until", "page",
                             "per_page"))
        f = dict(family=p.text("family"), judge=p.text("judge"), model=p.text("model"),
                 status=p.choice("status", RATING_STATUSES, None), score_min=p.number("score_min"),
                 score_max=p.number("score_max"), since=p.date("since"), until=p.date("until"))
        page = p.integer("page", 1, 1, 10**9)
        per_page = p.integer("per_page", RATINGS_PER_PAGE, 1, MAX_PAGE)
        r = ratings(self.url, **f, page=page, per_page=per_page, index=self._rating_index())
        here = {**f, "per_page": None if per_page == RATINGS_PER_PAGE else per_page}
        return self.render("ratings.html.j2", title="Ratings", nav="ratings", r=r, f=f, c=choices(self.url),
                           prev=link("/ratings", **here, page=page - 1) if page > 1 else None,
                           next=link("/ratings", **here, page=page + 1) if page < r["pages"] else None)

    def mc(self, request: Request):
        from judgecal.report.mc_tables import run_setup
        from judgecal.views import mc

        p = Params(request, ("model", "format"))
        model = p.text("model")
        fmt_ = p.fmt()
        runs = mc.list_runs(self.url, model=model)
        if fmt_ == "json":
            return self.json(runs)
        for r in runs:
            r.setdefault("setup", run_setup(r.get("settings") or {}))
        return self.render("mc.html.j2", title="Multiple-choice runs", nav="mc", runs=runs, model=model)

    def mc_compare(self, request: Request):
        from judgecal.views import mc

        p = Params(request, ("a", "b", "format"))
        a, b = p.integer("a", None, 1, 2**31 - 1), p.integer("b", None, 1, 2**31 - 1)
        fmt_ = p.fmt()
        if a is None or b is None:
            raise BadRequest("give both runs: /mc/compare?a=RUN_ID&b=RUN_ID (see /mc)")
        cmp = mc.compare(a, b, self.url)
        if fmt_ == "json":
            return self.json(cmp)
        return self.render("mc_compare.html.j2", title=f"Compare runs {a} and {b}", nav="mc", cmp=cmp, a=a, b=b)


def page_key(path: str, items) -> tuple:
    """The page cache's key of a request: its path and its query items, sorted, without the
    token and ``fresh`` (which change who may read and how long to wait, not the page)."""
    return path, tuple(sorted((k, v) for k, v in items if k not in ("token", "fresh")))


def to_page(r: Response) -> Page:
    import time

    return Page(r.status_code, bytes(r.body), r.media_type,
                tuple((k, v) for k, v in r.headers.items() if k.lower() != "content-length"), time.time())


def _computed(response: Response) -> Response:
    """A response computed for its request and not kept (an error before the cache is read)."""
    response.headers["x-judgecal-cache"] = "miss"
    return response


def _response(page: Page, how: str) -> Response:
    response = Response(page.body, status_code=page.status, media_type=page.media_type,
                        headers={k: v for k, v in page.headers if k.lower() != "content-type"})
    response.headers["x-judgecal-cache"] = how
    return response


_MAIN = b"<main>\n"


def _stale(page: Page) -> Page:
    """``page`` with a banner at the top of its main part: computed at a given time, the
    database changed since, the page is being computed again (judgecal.web.warm)."""
    at = dt.datetime.fromtimestamp(page.computed_at, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    banner = (f'<p class="stale" role="status"><b>Not the current data.</b> These figures were computed at {at}; '
              "the database has changed since, and this page is being computed again: reload in a moment, or add "
              "<code>fresh=1</code> to the address to wait for it.</p>\n").encode()
    body = page.body.replace(_MAIN, _MAIN + banner, 1) if _MAIN in page.body else banner + page.body
    return Page(page.status, body, page.media_type, page.headers, page.computed_at)


def _png(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _toggle(sort: str | None, key: str) -> str:
    """The sort a column header links to: by ``key``, reversed when already sorted by it."""
    return f"-{key}" if sort == key else key


def _sorted(rows: list[dict], sort: str | None) -> list[dict]:
    """Rows ordered by one column (``-key``: descending), rows without a value last; the board's
    own order otherwise."""
    if not sort:
        return rows
    key, desc = sort.lstrip("-"), sort.startswith("-")
    have = [r for r in rows if r.get(key) is not None]
    none = [r for r in rows if r.get(key) is None]
    val = (lambda r: tuple(r[key])) if any(isinstance(r.get(key), list) for r in have) else (lambda r: r[key])
    return sorted(have, key=val, reverse=desc) + none


def _unexpected(exc: Exception) -> tuple[int, str]:
    """(status, one line) of an error no page expected: a write refused by the read-only
    database (403), another database error (503), anything else (500)."""
    from sqlalchemy.exc import SQLAlchemyError

    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    first = text[0] if text else exc.__class__.__name__
    if isinstance(exc, SQLAlchemyError):
        if "readonly" in first or "read-only" in first:
            return 403, ("this page needs to write to the database (for example token lengths not stored yet: "
                         "run `judgecal lengths --tokenizer NAME`), and the web view is read-only: " + first)
        return 503, f"database error: {first}"
    return 500, f"unexpected {exc.__class__.__name__}: {first}"


# ---------------------------------------------------------------- token, headers
def _token_digest(token: str) -> str:
    return hashlib.sha256(("judgecal-serve:" + token).encode()).hexdigest()


class Guard:
    """ASGI middleware: security headers on every response; with a token, every request must
    carry it (``?token=``, ``Authorization: Bearer TOKEN``, or the cookie set after a request
    with a good ``?token=``), else 401."""

    def __init__(self, app, token: str | None, pages: App):
        self.app, self.token, self.pages = app, token, pages
        self.digest = _token_digest(token) if token else None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        set_cookie = False
        if self.token is not None:
            request = Request(scope)
            given = request.query_params.get("token")
            auth = request.headers.get("authorization", "")
            ok = False
            if given is not None:
                ok = hmac.compare_digest(given.encode(), self.token.encode())
                set_cookie = ok
            elif auth.lower().startswith("bearer "):
                ok = hmac.compare_digest(auth[7:].strip().encode(), self.token.encode())
            elif request.cookies.get(COOKIE):
                ok = hmac.compare_digest(request.cookies[COOKIE].encode(), self.digest.encode())
            if not ok:
                response = self.pages.error(401, "this judgecal serve needs its token: open the address with "
                                                 "?token=TOKEN (or send Authorization: Bearer TOKEN)")
                response.headers["www-authenticate"] = "Bearer"
                response.headers["x-judgecal-cache"] = "miss"
                for k, v in SECURITY_HEADERS:
                    response.headers[k.decode()] = v.decode()
                return await response(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() not in dict(SECURITY_HEADERS)]
                headers += SECURITY_HEADERS
                if set_cookie:
                    headers.append((b"set-cookie", f"{COOKIE}={self.digest}; Path=/; HttpOnly; SameSite=Strict".encode()))
                message = {**message, "headers": headers}
            await send(message)

        return await self.app(scope, receive, send_with_headers)


#: the page cache's default bound (``judgecal serve --cache-mb``)
DEFAULT_CACHE_MB = 64
#: the audits' and the ratings list's indexes may hold this many times the pages' budget
INDEX_SHARE = 4


def _seeds(url: str, cap: int = 40, audit_cap: int = 40, calibration_cap: int = 20) -> list[tuple]:
    """The entry pages' cache keys (judgecal.web.warm): the lists and the first choice of each
    chooser (each judge's score board, each baseline's win rates), at most ``cap``; the reports
    of the ``calibration_cap`` newest calibrations, as the overview and the lists link them (by
    id, and by family and judge); then the audit of each task family and judge (which keeps its
    pair index, so every filter and page of it is quick), at most ``audit_cap``."""
    from judgecal.views.browse import baselines, calibrations, choices, family_judges

    keys = [page_key(p, ()) for p in ("/", "/leaderboard", "/winrates", "/calibration", "/audit", "/ratings", "/mc")]
    keys += [page_key("/leaderboard", [("judge", j["ref"])]) for j in choices(url)["judges"] if j["ratings"]]
    keys += [page_key("/winrates", [("baseline", b["model"]), ("family", b["task_family"]), ("judge", b["judge_ref"])])
             for b in baselines(url)]
    newest = calibrations(url)[:calibration_cap]
    reports = [page_key("/calibration", [("calibration", str(f["id"]))]) for f in newest]
    reports += list(dict.fromkeys(page_key("/calibration", [("family", f["task_family"]), ("judge", f["judge_ref"])])
                                  for f in newest))
    audits = [page_key("/audit", [("family", fam), ("judge", j["ref"])])
              for fam, js in family_judges(url).items() for j in js]
    return keys[:cap] + reports + audits[:audit_cap]


def create_app(url: str | None = None, *, token: str | None = None, cache_mb: int = DEFAULT_CACHE_MB,
               warm: bool = False) -> Starlette:
    """The web app over the database at ``url`` (default: judgecal's default database), opened
    read-only (:func:`judgecal.db.engine.read_only_url`). ``token``: required on every request
    when given. ``cache_mb``: MiB of computed pages kept until the database changes
    (:mod:`judgecal.web.cache`; 0: every request computes its page). The database is checked
    once here: unreachable, not a judgecal database or behind its migrations is a
    :class:`judgecal.errors.DatabaseError` (one line). The app holds one engine for its
    lifetime (:func:`judgecal.db.engine.pin_engine`), released when the app is collected.
    ``warm``: compute the entry pages and the pages read ahead of the reader, again after each
    change of the database, and serve a page's previous copy with a banner while it is computed
    again (:mod:`judgecal.web.warm`; needs the cache; ``judgecal serve`` turns it on). The
    warmer is ``app.state.warmer`` (None without it); it starts with the app's lifespan."""
    import weakref

    from sqlalchemy.exc import SQLAlchemyError

    from judgecal import config
    from judgecal.db.engine import mask_url, pin_engine, read_only_url, unpin_engine

    if cache_mb < 0:
        raise ValueError("cache_mb must be >= 0")
    original = url or config.default_database_url()
    ro = read_only_url(original)
    try:
        pin_engine(ro)
    except SQLAlchemyError as exc:  # an empty file: get_engine's first-use migration cannot write
        raise DatabaseError(f"cannot serve {mask_url(original)}: not a judgecal database (create it with "
                            f"`judgecal db upgrade`): {str(getattr(exc, 'orig', exc)).splitlines()[0]}") from None
    except DatabaseError as exc:  # name the database as it was given, not its read-only form
        raise type(exc)(str(exc).replace(mask_url(ro), mask_url(original))) from None
    cache = PageCache(max_entries=256 if cache_mb else 0, max_bytes=cache_mb * 2**20)
    pages = App(ro, mask_url(original), cache)
    # the pages' view modules, imported now rather than by the first request (scipy, matplotlib: seconds)
    import judgecal.report.plots  # noqa: F401
    import judgecal.views.audit  # noqa: F401
    import judgecal.views.browse  # noqa: F401
    import judgecal.views.leaderboard  # noqa: F401
    import judgecal.views.mc  # noqa: F401
    import judgecal.views.reporting  # noqa: F401
    import judgecal.views.winrates  # noqa: F401

    async def not_found(request: Request, exc: HTTPException):
        if exc.status_code == 405:
            response = _computed(pages.error(405, f"{request.method} is not allowed: this web view is read-only "
                                                  f"(GET and HEAD only)"))
            response.headers["allow"] = "GET, HEAD"
            return response
        return _computed(pages.error(exc.status_code, "no such page (see the overview at /)" if exc.status_code == 404
                                     else str(exc.detail)))

    warmer = None
    if warm and cache_mb:
        from judgecal.db.engine import data_version, get_engine
        from judgecal.web.warm import Warmer

        handlers = {"/": pages.overview, "/leaderboard": pages.leaderboard, "/winrates": pages.winrates,
                    "/calibration": pages.calibration, "/audit": pages.audit, "/ratings": pages.ratings,
                    "/mc": pages.mc, "/mc/compare": pages.mc_compare}
        warmer = pages.warmer = Warmer(cache, lambda: data_version(get_engine(ro)),
                                       lambda key: pages.compute_key(handlers[key[0]], key), lambda: _seeds(ro))

    get = ["GET", "HEAD"]
    routes = [
        Route("/", pages.page(pages.overview), methods=get),
        Route("/leaderboard", pages.page(pages.leaderboard), methods=get),
        Route("/winrates", pages.page(pages.winrates), methods=get),
        Route("/calibration", pages.page(pages.calibration), methods=get),
        Route("/audit", pages.page(pages.audit), methods=get),
        Route("/ratings", pages.page(pages.ratings), methods=get),
        Route("/mc", pages.page(pages.mc), methods=get),
        Route("/mc/compare", pages.page(pages.mc_compare), methods=get),
        Mount("/static", app=StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    lifespan = None
    if warmer is not None:
        from contextlib import asynccontextmanager

        @asynccontextmanager
        async def lifespan(_app):
            warmer.start()
            try:
                yield
            finally:
                warmer.stop(timeout=5)

    app = Starlette(routes=routes, exception_handlers={HTTPException: not_found},
                    middleware=[Middleware(Guard, token=token, pages=pages)], lifespan=lifespan)
    app.state.warmer = warmer
    app.state.database_url = ro
    app.state.database_shown = pages.shown
    app.state.page_cache = cache
    app.state.indexes = pages.indexes
    weakref.finalize(app, unpin_engine, ro)
    return app
