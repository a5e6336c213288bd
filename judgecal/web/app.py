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

import datetime as dt
import hashlib
import hmac
from functools import wraps
from pathlib import Path
from urllib.parse import quote, unquote_plus, urlencode

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from judgecal.errors import ChoiceError, DatabaseError, JudgecalError, NotFoundError, ReadOnlyError
from judgecal.secrets import scrub
from judgecal.web.cache import Page, PageCache
from judgecal.web.pages.audit import AuditPage
from judgecal.web.pages.bt import BtPage
from judgecal.web.pages.calibration import CalibrationPage
from judgecal.web.pages.judge import JudgePage
from judgecal.web.pages.leaderboard import LeaderboardPage
from judgecal.web.pages.mc import McPage
from judgecal.web.pages.overview import OverviewPage
from judgecal.web.pages.publish import PublishPage
from judgecal.web.pages.ratings import RatingsPage
from judgecal.web.pages.winrates import WinratesPage
from judgecal.web.params import MAX_BOOTSTRAP, MAX_ID, BadRequest, Params  # noqa: F401 (importable from here)
from judgecal.web.render import _environment, fmt, json_text, link, pct  # noqa: F401 (importable from here)

HERE = Path(__file__).resolve().parent
COOKIE = "judgecal_token"
CSP = ("default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; base-uri 'none'; "
       "frame-ancestors 'none'")
SECURITY_HEADERS = [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"), (b"x-frame-options", b"DENY"),
                    (b"cache-control", b"no-store")]


class App(OverviewPage, LeaderboardPage, WinratesPage, BtPage, PublishPage, CalibrationPage, AuditPage, JudgePage,
          RatingsPage, McPage):
    """The pages (each a method of a :mod:`judgecal.web.pages` mixin) and what they share:
    rendering, error pages, the page and index caches. ``url``: the read-only database URL;
    ``shown``: the URL as pages show it (password masked)."""

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

    def error(self, status: int, message: str, *, as_json: bool = False) -> Response:
        """The error page: one line, never a traceback; with ``as_json`` (a ``format=json``
        request) the same line as ``{"error": ..., "status": ...}`` with the same status code."""
        titles = {400: "Bad request", 401: "Token required", 403: "Refused", 404: "Not found",
                  405: "Method not allowed", 500: "Error", 503: "Database unavailable"}
        if as_json:  # the words of the HTML page (URL parameters, not the CLI's options)
            from judgecal.web.wording import for_web

            line = for_web(scrub(message.splitlines()[0] if message else titles.get(status, "error")))
            return Response(json_text({"error": line, "status": status}) + "\n", status_code=status,
                            media_type="application/json")
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
                return _computed(self.error(400, str(exc), as_json=q.get("format") == "json"))
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
            as_json = request.query_params.get("format") == "json"  # an error answers in the format asked for
            try:
                return fn(request)
            except BadRequest as exc:
                return self.error(400, str(exc), as_json=as_json)
            except NotFoundError as exc:
                return self.error(404, str(exc), as_json=as_json)
            except ChoiceError as exc:  # the data leaves a choice open: a page of links, never a dead end
                return self.choice_page(request, exc)
            except ReadOnlyError as exc:  # the page would write (token lengths): the command to run
                return self.error(403, str(exc), as_json=as_json)
            except DatabaseError as exc:
                return self.error(503, str(exc), as_json=as_json)
            except JudgecalError as exc:
                return self.error(400, str(exc), as_json=as_json)
            except Exception as exc:  # noqa: BLE001 - never a traceback for users
                return self.error(*_unexpected(exc), as_json=as_json)
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

    def choice_page(self, request: Request, exc: ChoiceError) -> Response:
        """The page of a :class:`~judgecal.errors.ChoiceError` raised by a view (several judges
        share a name; several judges or families have verdicts against a baseline): each option
        links to this page with its parameters and every other parameter given; ``format=json``
        gives ``{"choose", "carried", "options": [{"label", "url"}]}`` as every choice page."""
        chosen = {k for o in exc.options for k in o["params"]}
        carried: dict[str, list[str]] = {}
        for k, v in request.query_params.multi_items():
            if k not in chosen | {"format", "token", "fresh"} and v.strip():
                carried.setdefault(k, []).append(v.strip())
        as_json = request.query_params.get("format") == "json"
        links = [(o["label"], link(request.url.path, **{**carried, **o["params"], **({"format": "json"} if as_json else {})}))
                 for o in exc.options]
        heading = str(exc).split(": ", 1)[0] if len(str(exc)) > 200 else str(exc)
        heading = f"Choose one: {heading}"
        if as_json:  # the same words as the page: URL parameters, not the CLI's options
            from judgecal.web.wording import for_web

            return self.json({"choose": for_web(str(exc)), "carried": carried,
                              "options": [{"label": text, "url": href} for text, href in links]})
        title = {"/winrates": "Win rates", "/leaderboard": "Score leaderboard", "/publish": "Publish",
                 "/bt": "Bradley-Terry"}.get(
            request.url.path, "Choose")
        return self.render("choose.html.j2", title=title, nav=request.url.path.strip("/").split("/")[0], heading=heading,
                           options=links, carried=sorted((k, ", ".join(v)) for k, v in carried.items()),
                           empty="Nothing to choose from.")

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


def _unexpected(exc: Exception) -> tuple[int, str]:
    """(status, one line) of an error no page expected: a write refused by the read-only
    database (403), another database error (503), anything else (500)."""
    import sqlite3

    from sqlalchemy.exc import SQLAlchemyError

    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    first = text[0] if text else exc.__class__.__name__
    # a driver's own error too (a write through the raw DB-API connection: sqlite3, psycopg)
    if isinstance(exc, (SQLAlchemyError, sqlite3.Error)) or type(exc).__module__.startswith("psycopg"):
        if "readonly" in first or "read-only" in first:
            return 403, ("this page needs to write to the database (for example token lengths not stored yet: "
                         "run `judgecal lengths --tokenizer NAME`), and the web view is read-only: " + first)
        return 503, f"database error: {first}"
    return 500, f"unexpected {exc.__class__.__name__}: {first}"


# ---------------------------------------------------------------- token, headers
def _token_digest(token: str) -> str:
    return hashlib.sha256(("judgecal-serve:" + token).encode()).hexdigest()


def _without_token(scope) -> str:
    """The request's path and query string without its ``token`` parameter(s), every other
    parameter kept as sent (order, repeats, encoding): where a request that brought the token in
    its address is sent on, once the cookie is set."""
    query = scope.get("query_string", b"").decode("latin-1")
    kept = [part for part in query.split("&") if part and unquote_plus(part.split("=", 1)[0]) != "token"]
    raw = scope.get("raw_path")
    path = raw.decode("latin-1") if raw else quote(scope.get("root_path", "") + scope["path"])
    path = "/" + path.lstrip("/")  # never '//host': a path, not another site
    return path + ("?" + "&".join(kept) if kept else "")


class Guard:
    """ASGI middleware: security headers on every response; with a token, every request must
    carry it (``?token=``, ``Authorization: Bearer TOKEN``, or the cookie set after a request
    with a good ``?token=``), else 401. A request with a good ``?token=`` gets the cookie and a
    303 redirect to its own address without the token, so that the token does not stay in the
    address bar, the history or a link copied from it."""

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
            if set_cookie:  # the token leaves the address bar (and the history, and a link copied from it)
                response = Response(status_code=303, headers={"location": _without_token(scope),
                                                              "x-judgecal-cache": "miss"})
                response.headers.append("set-cookie", f"{COOKIE}={self.digest}; Path=/; HttpOnly; SameSite=Strict")
                for k, v in SECURITY_HEADERS:
                    response.headers[k.decode()] = v.decode()
                return await response(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() not in dict(SECURITY_HEADERS)]
                headers += SECURITY_HEADERS
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

    keys = [page_key(p, ()) for p in ("/", "/leaderboard", "/winrates", "/publish", "/judge", "/calibration", "/audit",
                                      "/ratings", "/mc")]
    keys += [page_key("/leaderboard", [("judge", j["ref"])]) for j in choices(url)["judges"] if j["ratings"]]
    keys += [page_key("/winrates", [("baseline", b["model"]), ("family", b["task_family"]), ("judge", b["judge_ref"])])
             for b in baselines(url)]
    newest = calibrations(url)[:calibration_cap]
    reports = [page_key("/calibration", [("calibration", str(f["id"]))]) for f in newest]
    reports += list(dict.fromkeys(page_key("/calibration", [("family", f["task_family"]), ("judge", f["judge_ref"])])
                                  for f in newest))
    # the publish board and the judge's page of each, as the overview links them
    reports += list(dict.fromkeys(page_key("/publish", [("family", f["task_family"]), ("judge", f["judge_ref"])])
                                  for f in newest))
    reports += list(dict.fromkeys(page_key("/judge", [("judge", f["judge_ref"])]) for f in newest))
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
    from judgecal.db.derived import code_fingerprint

    code_fingerprint()  # the stored results' code key (judgecal.db.derived), once per process, not in a request

    async def not_found(request: Request, exc: HTTPException):
        as_json = request.query_params.get("format") == "json"  # a script asked for JSON: the error is JSON too
        if exc.status_code == 405:
            response = _computed(pages.error(405, f"{request.method} is not allowed: this web view is read-only "
                                                  f"(GET and HEAD only)", as_json=as_json))
            response.headers["allow"] = "GET, HEAD"
            return response
        return _computed(pages.error(exc.status_code, "no such page (see the overview at /)" if exc.status_code == 404
                                     else str(exc.detail), as_json=as_json))

    warmer = None
    if warm and cache_mb:
        from judgecal.db.engine import data_version, get_engine
        from judgecal.web.warm import Warmer

        handlers = {"/": pages.overview, "/leaderboard": pages.leaderboard, "/winrates": pages.winrates,
                    "/bt": pages.bt, "/calibration": pages.calibration, "/audit": pages.audit, "/ratings": pages.ratings,
                    "/publish": pages.publish, "/judge": pages.judge,
                    "/mc": pages.mc, "/mc/compare": pages.mc_compare}
        warmer = pages.warmer = Warmer(cache, lambda: data_version(get_engine(ro)),
                                       lambda key: pages.compute_key(handlers[key[0]], key), lambda: _seeds(ro))

    get = ["GET", "HEAD"]
    routes = [
        Route("/", pages.page(pages.overview), methods=get),
        Route("/leaderboard", pages.page(pages.leaderboard), methods=get),
        Route("/winrates", pages.page(pages.winrates), methods=get),
        Route("/bt", pages.page(pages.bt), methods=get),
        Route("/calibration", pages.page(pages.calibration), methods=get),
        Route("/audit", pages.page(pages.audit), methods=get),
        Route("/publish", pages.page(pages.publish), methods=get),
        Route("/judge", pages.page(pages.judge), methods=get),
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
