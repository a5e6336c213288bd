"""``judgecal db refresh``: compute ahead what the pages cannot compute in 300 ms and store it in
the database (:mod:`judgecal.db.derived`), so that ``judgecal serve`` (read-only, warmed or not)
and the CLI read it back while the data has not changed.

The pages computed are those ``judgecal serve --warm`` computes first (the entry pages, each
judge's score board, each stored baseline's win rates, the calibrations' reports, publish and
judge pages, the audits: :func:`judgecal.web.app._seeds`, uncapped), plus every judge's page and
Bradley-Terry board (the overview's link), each baseline's win
rates with ``joint=1``, its publish board and its Bradley-Terry board, each calibration's report and every audit (of
each task family and judge); every stored function they call (:func:`judgecal.db.derived.stored`:
the report's pairwise-judge summary and plots, a judge's profile, a win-rate board, an audit's
pair index) records its result, and the results are written in one
transaction at the generation they were computed at."""

from __future__ import annotations

import time

from judgecal.errors import DatabaseError


def refresh_keys(ro_url: str) -> list[tuple]:
    """The page keys (:func:`judgecal.web.app.page_key`) whose stored results ``db refresh`` computes."""
    from judgecal.views.browse import baselines, calibrations, choices
    from judgecal.web.app import _seeds, page_key

    keys = list(_seeds(ro_url, cap=10**6, audit_cap=10**6, calibration_cap=10**6))
    judges = choices(ro_url)["judges"]
    keys += [page_key("/judge", [("judge", j["ref"])]) for j in judges]
    # the Bradley-Terry board each judge with verdicts links to from the overview (a choice where its
    # verdicts span several families: computed at once), and the one each win-rate board links to
    keys += [page_key("/bt", [("judge", j["ref"])]) for j in judges if j.get("verdicts")]
    for b in baselines(ro_url):
        keys.append(page_key("/bt", [("baseline", b["model"]), ("family", b["task_family"]), ("judge", b["judge_ref"])]))
        keys.append(page_key("/winrates", [("baseline", b["model"])]))
        keys.append(page_key("/winrates", [("baseline", b["model"]), ("joint", "1")]))
        keys.append(page_key("/publish", [("baseline", b["model"])]))
        keys.append(page_key("/publish", [("baseline", b["model"]), ("family", b["task_family"]),
                                          ("judge", b["judge_ref"])]))
    for f in calibrations(ro_url):
        keys.append(page_key("/calibration", [("calibration", str(f["id"]))]))
    return list(dict.fromkeys(keys))


def refresh(url: str | None = None, *, step=None) -> dict:
    """Compute and store the derived results of :func:`refresh_keys`' pages for the database at
    ``url``. Returns {"stored": n, "pages": n, "seconds": s, "generation": g}; "stored" is 0 and
    "changed" True when the data changed while they were computed (run it again). Raises
    DatabaseError when the database has no trusted generation (behind migration 0006, or its
    triggers removed: ``judgecal db upgrade``)."""
    from judgecal import config
    from judgecal.db import derived
    from judgecal.db.engine import get_engine, mask_url, pin_engine, read_only_url, unpin_engine
    from judgecal.web.app import App

    step = step or (lambda message: None)
    url = url or config.default_database_url()
    engine = get_engine(url)
    t0 = time.perf_counter()
    try:
        with engine.connect() as conn:
            gen = derived.generation(conn)
        if gen is None:
            raise DatabaseError(f"{mask_url(url)}: no content generation (the triggers of migration 0006 are "
                                "missing): run `judgecal db upgrade`")
        ro = read_only_url(url)
        pin_engine(ro)
        try:
            pages = App(ro, mask_url(url))
            handlers = {"/": pages.overview, "/leaderboard": pages.leaderboard, "/winrates": pages.winrates,
                        "/calibration": pages.calibration, "/publish": pages.publish, "/judge": pages.judge,
                        "/audit": pages.audit, "/ratings": pages.ratings, "/mc": pages.mc, "/bt": pages.bt}
            keys = [k for k in refresh_keys(ro) if k[0] in handlers]
            with derived.recording() as records:
                for i, key in enumerate(keys, 1):
                    step(f"computing {i}/{len(keys)}: {key[0]} {dict(key[1])}")
                    pages.compute_key(handlers[key[0]], key)
        finally:
            unpin_engine(ro)
        n = derived.write(engine, gen, records)
        with engine.connect() as conn:
            now = derived.generation(conn)
    finally:
        engine.dispose()
    return {"stored": n, "pages": len(keys), "seconds": round(time.perf_counter() - t0, 1), "generation": now,
            "changed": n == 0 and bool(records)}


def refresh_after_write(url: str | None, before: dict | None, *, skip: bool, how_to_skip: str, step=None) -> str | None:
    """The automatic refresh that ends a command which wrote (docs/serve.md, "Results computed
    ahead"): ``before`` is :func:`judgecal.db.derived.store_state` read before the command ran.
    Nothing happens (None returned) where the database held no stored results then (never
    refreshed: the team has not opted in) or where the command did not move the content
    generation (it wrote nothing). Else the results are refreshed (:func:`refresh`), or not
    where ``skip``, and the one line that says what was done is returned: pages and seconds,
    skipped (naming ``how_to_skip``, the option or variable that skipped it), or why it failed.
    Never raises (a failure is the returned line: the command's write is committed either way);
    a Ctrl-C stops the refresh and is the returned line too. ``step``: as :func:`refresh`'s."""
    from judgecal.db import derived
    from judgecal.secrets import scrub

    if before is None or not before["rows"]:
        return None
    after = derived.store_state(url)
    if after is None or after["current"] == before["current"]:
        return None
    later = "pages compute their figures on request until `judgecal db refresh`"
    if skip:
        return f"stored results not refreshed ({how_to_skip}): they are stale; {later}"
    try:
        out = refresh(url, step=step)
    except KeyboardInterrupt:
        return f"refresh of the stored results interrupted: the write is committed; {later}"
    except Exception as exc:  # noqa: BLE001 - the write succeeded: the failed refresh is reported, not raised
        first = (str(getattr(exc, "orig", None) or exc).strip().splitlines() or [exc.__class__.__name__])[0]
        return f"the write is committed, but refreshing the stored results failed ({scrub(first)}); {later}"
    if out["changed"]:
        return (f"the write is committed; the stored results were not refreshed: the database changed while they "
                f"were computed ({out['pages']} pages, {out['seconds']} s); {later}")
    return (f"refreshed the stored results: {out['pages']} pages, {out['stored']} results in {out['seconds']} s "
            f"(content generation {out['generation']}; {how_to_skip} skips this)")
