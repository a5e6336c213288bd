"""Issue 21 item 4: the score board reads its answers' lengths and guard keys with the ratings
(db/boarddata.rated_responses, unit_lengths, db/guarddata.rated_template_keys) instead of looking
every answer up again by id (db/guarddata.answer_keys, db/boarddata.lengths), and draws each
model's bootstrap resamples once for its raw and calibrated scores (calibrate/ranking.mean_cis).
Every piece equals the old path, and so does the whole board, on both dialects."""

from __future__ import annotations

import hashlib
import json
import random
import re

import numpy as np
import pytest

from judgecal.calibrate.guards import template_key
from judgecal.calibrate.ranking import mean_ci, mean_cis

_D = re.compile(r"\d+")


_FINAL = re.compile(r"\d(?:[\d.,]*\d)?(?=[^\w]*\Z)")


def _template_key_str(text):
    """The str-only definition (before the ASCII fast path): digits folded, except in an answer
    of fewer than 8 words and in the number that ends an answer (issue 35)."""
    low = (text or "").lower()
    if len(low.split()) < 8:
        return hashlib.sha256(" ".join(low.split()).encode("utf-8")).hexdigest()
    m = _FINAL.search(low)
    head = low if m is None else low[:m.start()]
    norm = " ".join(_D.sub("0", head).split()) + ("" if m is None else "\x1e" + " ".join(low[m.start():].split()))
    return hashlib.sha256(norm.encode("utf-8")).hexdigest()


def test_template_key_ascii_path_is_the_str_definition():
    rnd = random.Random(21)
    texts = [None, "", " ", "0", "00 000", "Request 12: A  b\t7\x1c\x1d\x1e\x1fend", "x\x0b\x0cy\r\n9", "ÉTÉ 12 Σ",
             "İstanbul 3", "a\u00a0b\u2003c 1\u0663"]  # non-ASCII: the str path (Unicode digits and spaces)
    texts += ["".join(chr(rnd.randrange(128)) for _ in range(rnd.randint(0, 40))) for _ in range(5000)]
    texts += ["".join(rnd.choice("0123456789 aZ\x1f") for _ in range(rnd.randint(0, 40))) for _ in range(5000)]
    texts += ["".join(rnd.choice("0123456789 .,aZ!)\x1f") for _ in range(rnd.randint(10, 60))) for _ in range(5000)]
    texts += [chr(c) for c in range(256)]
    assert [template_key(t) for t in texts] == [_template_key_str(t) for t in texts]


def _mean_ci_reference(values, n_bootstrap, seed):
    """The percentile bootstrap of one column as mean_ci computed it before mean_cis existed
    (blocks of about 1,000,000 draws, resampling values), written out independently."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return float("nan"), None
    if v.size < 2 or n_bootstrap <= 0:
        return float(v.mean()), None
    rng = np.random.default_rng(seed)
    block = max(1, 1_000_000 // v.size)
    means = np.concatenate([v[rng.integers(0, v.size, (min(block, n_bootstrap - s), v.size))].mean(axis=1)
                            for s in range(0, n_bootstrap, block)])
    alpha = (1 - 0.95) / 2  # as computed from level=0.95 (0.025000000000000022: the quantiles' last digit)
    return float(v.mean()), [float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))]


@pytest.mark.parametrize("n", [0, 1, 2, 7, 333, 1500])
@pytest.mark.parametrize("n_bootstrap", [0, 1, 20, 1001])
def test_mean_cis_equal_mean_ci_of_each_column(n, n_bootstrap):
    rng = np.random.default_rng(n)
    cols = [rng.normal(size=n), rng.integers(0, 10, n).astype(float), list(rng.normal(size=n))]
    want = [_mean_ci_reference(c, n_bootstrap, 3) for c in cols]
    # nan means (n = 0): compare as text
    assert repr(mean_cis(cols, n_bootstrap, seed=3)) == repr(want)
    assert repr([mean_ci(c, n_bootstrap, seed=3) for c in cols]) == repr(want)
    assert mean_cis([], 10) == []
    if n:
        with pytest.raises(ValueError, match="different lengths"):
            mean_cis([cols[0], cols[1][:-1]], n_bootstrap)


def _records(data_dir):
    """The guard tests' LLMBar Natural ratings and degenerate models, plus answers that exercise
    the keys: a template answer with numbers, non-ASCII answers, one text given to several items."""
    from tests.test_guards import _records as guard_records

    rat, _ = guard_records(data_dir)
    base = dict(rat[0])
    for k in ("prompt", "model", "response", "score"):
        base.pop(k)
    prompts = sorted({r["prompt"] for r in rat})[:12]
    extra = []
    for i, p in enumerate(prompts):
        extra.append(dict(base, prompt=p, model="template-model", response=f"Here is answer {i}:  THE  BEST {i * 7}", score=7.0))
        extra.append(dict(base, prompt=p, model="unicode-model", response=f"Réponse n° {i} — ÉTÉ\u00a0Σ {'٣' * i}",
                          score=float(i % 10)))
    extra += [dict(base, prompt=p, model="repeat-model", response="The same answer, 42 times.", score=6.0)
              for p in prompts[:4]]  # one text (one template key computed) for four items
    return rat + extra


@pytest.fixture()
def board_db(db_url, data_dir, run_cli, tmp_path):
    src = tmp_path / "ratings.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in _records(data_dir)))
    for args in (["import", "llmbar", str(data_dir / "llmbar" / "Natural")],
                 ["import", "jsonl", str(src), "--kind", "ratings"]):
        r = run_cli("--database-url", db_url, *args)
        assert r.exit_code == 0, r
    return db_url


def test_board_inputs_equal_the_lookups_by_id(board_db):
    from sqlalchemy import select

    from judgecal.db import boarddata
    from judgecal.db import models as m
    from judgecal.db.engine import get_engine, session_scope
    from judgecal.db.guarddata import answer_keys, rated_template_keys

    engine = get_engine(board_db)
    with session_scope(engine) as s:
        fams = list(s.scalars(select(m.TaskFamily.id)))
        judges = list(s.scalars(select(m.Judge.id)))
        # token lengths of some answers under a named tokenizer (the board reads them by a join now)
        rids = sorted(s.scalars(select(m.Response.id)))
        s.add_all([m.TokenLength(response_id=r, tokenizer="words", n_tokens=(r * 7) % 50) for r in rids[::3]])
        s.flush()
        checked = 0
        for jid in judges:
            rows = boarddata.rated_responses(s, fams, jid)
            scored = [r["response_id"] for r in rows if r["score"] is not None]
            old = answer_keys(s, scored)
            new = rated_template_keys(s, fams, jid)
            assert {r: new[r] for r in scored} == {r: k[2] for r, k in old.items()}
            assert {r["response_id"]: (r["model"], r["item_id"], r["n_words"]) for r in rows if r["score"] is not None} \
                == {r: (k[0], k[1], k[3]) for r, k in old.items()}
            for fid in fams:
                frows = [r for r in rows if r["family_id"] == fid and r["score"] is not None]
                ids = [r["response_id"] for r in frows]
                for unit, tok in (("words", None), ("chars", None), ("bytes", None), ("tokens", "words"),
                                  ("tokens", "nothing-stored")):
                    assert boarddata.unit_lengths(s, frows, fid, jid, unit, tok) == boarddata.lengths(s, ids, unit, tok)
                checked += len(frows)
        assert checked > 200
    engine.dispose()


def test_the_board_equals_the_board_read_by_id(board_db, run_cli, monkeypatch):
    """The whole board (JSON) through the new reads equals the one through the old lookups by id and
    one bootstrap per column, with a fit of its own family applied (guards and calibration at work)."""
    from judgecal.calibrate import ranking
    from judgecal.db import boarddata, guarddata
    from judgecal.views import leaderboard

    fit = run_cli("--database-url", board_db, "fit", "--task-family", "llmbar/Natural", "--judge", "GPT-4",
                  "--length-unit", "words", "--bootstrap", "0", "--no-nested", "--format", "json")
    assert fit.exit_code == 0, fit
    args = ("--database-url", board_db, "leaderboard", "--judge", "GPT-4", "--bootstrap", "200", "--format", "json")
    new = run_cli(*args)
    assert new.exit_code == 0, new

    def old_keys(s, fam_ids, judge_id):
        rows = boarddata.rated_responses(s, fam_ids, judge_id)
        return {r: k[2] for r, k in guarddata.answer_keys(s, [x["response_id"] for x in rows if x["score"] is not None]).items()}

    monkeypatch.setattr(leaderboard, "rated_template_keys", old_keys)
    monkeypatch.setattr(boarddata, "unit_lengths", lambda s, rows, fid, jid, unit, tok:
                        boarddata.lengths(s, [r["response_id"] for r in rows], unit, tok))
    monkeypatch.setattr(leaderboard, "mean_cis", lambda cols, n, seed: [ranking.mean_ci(c, n, seed) for c in cols])
    old = run_cli(*args)
    assert old.exit_code == 0, old
    board = json.loads(new.stdout)
    assert {"template-model", "unicode-model", "repeat-model", "empty-model", "constant-model"} <= {r["model"] for r in board["rows"]}
    assert any(r["degenerate_answers"] for r in board["rows"])
    assert new.stdout == old.stdout


def test_baseline_verdicts_stand_in_and_mean_equal_the_lookup_by_id(db_url, run_cli, tmp_path):
    """Win rates (db/verdicts.baseline_verdicts): groups of 1, 2, 3 and 4 verdicts per (model, item),
    in both orders, with other answers of the model among them and one unparsed verdict: the
    answer that stands for each group is its first verdict's in content order (as the content keys
    read by id, db/verdicts.content_keys, order them) and the preference the exact mean."""
    import math

    from sqlalchemy import select

    from judgecal.db import models as m
    from judgecal.db.engine import get_engine, session_scope
    from judgecal.db.verdicts import baseline_verdicts, content_keys

    rows = []
    for i in range(9):
        for mm in ("m1", "m2"):
            for k in range(1 + (i + len(mm) * 3 + (mm == "m2")) % 4):
                text = f"{mm} answer {i} v{(k * 5 + i) % 3}" + " more" * (k + i % 2)
                base = f"baseline answer {i} " + "y" * (i % 5)
                a_side = (i + k) % 2 == 0  # the model's answer shown first or second
                rec = {"task_family": "fam", "prompt": f"P{i}", "judge": "J", "sample_index": k,
                       "position": "ab" if k % 2 == 0 else "ba",
                       "model_a": mm if a_side else "base", "response_a": text if a_side else base,
                       "model_b": "base" if a_side else mm, "response_b": base if a_side else text,
                       "preference": ((i * 7 + k * 3) % 10) / 9.0}
                if (i, mm, k) == (4, "m1", 1):
                    rec.pop("preference")
                rows.append(json.dumps(rec))
    (tmp_path / "v.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    assert run_cli("--database-url", db_url, "import", "jsonl", tmp_path / "v.jsonl", "--kind", "verdicts").exit_code == 0
    engine = get_engine(db_url)
    with session_scope(engine) as s:
        fid = s.scalar(select(m.TaskFamily.id))
        jid = s.scalar(select(m.Judge.id))
        out = baseline_verdicts(s, fid, jid, "base")
        PJ, R = m.PairwiseJudgment, m.Response
        verdicts = s.execute(select(PJ.id, PJ.response_a_id, PJ.response_b_id, PJ.status, PJ.preference)
                             .where(PJ.judge_id == jid)).all()
        resp = {r.id: r for r in s.scalars(select(R))}
        key = content_keys(s, [v[0] for v in verdicts])
        groups: dict = {}
        for vid, a, b, status, pref in verdicts:
            if status != "ok" or pref is None:
                continue
            mine, p = (b, 1.0 - pref) if resp[a].model == "base" else (a, pref)
            groups.setdefault((resp[mine].model, resp[mine].item_id), []).append((key[vid], mine, p))
        want = {g: (min(v)[1], math.fsum(x[2] for x in v) / len(v), len(v)) for g, v in groups.items()}
        got = {(resp[int(r)].model, resp[int(r)].item_id): (int(r), float(p), int(n))
               for r, p, n in zip(out.response_id, out.pref, out.n_verdicts)}
    engine.dispose()
    assert {n for _, _, n in want.values()} == {1, 2, 3, 4}
    assert got == want and out.left_out == {"verdict unparsed": 1}
