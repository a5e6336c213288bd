"""Every export kind is written in content order (issue 32: "order by content, never by row
ids"): the same data imported in two different orders, into SQLite and into PostgreSQL, gives
byte-identical files for responses, ratings, labels, pairs and verdicts. Names are chosen so
that a locale collation would order them differently from code points ("B" < "a" < "É")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judgecal.views import importing
from judgecal.views.export import export

MODELS = ("a-model", "B-model", "Émodel", "base")
FAMILIES = ("fam", "Fam", "éfam")


def _records() -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {"ratings": [], "labels": [], "pairs": [], "verdicts": []}
    for fam in FAMILIES:
        for k in range(3):
            item = {"task_family": fam, "prompt": f"question {k} of {fam}"}
            for j, model in enumerate(MODELS):
                text = f"{model} answers {k}" + " more" * j
                out["ratings"].append({**item, "model": model, "response": text, "judge": "J", "scale_min": 1,
                                       "scale_max": 10, "score": (k + j) % 10 + 1})
                out["labels"].append({**item, "model": model, "response": text, "score": j + 1, "scale_min": 1,
                                      "scale_max": 10, "annotator": "ann", "source": "src"})
                if model != "base":
                    out["labels"].append({**item, "model_a": model, "response_a": text, "model_b": "base",
                                          "response_b": f"base answers {k}" + " more" * 3, "preference": "ab"[j % 2],
                                          "annotator": "Ann", "source": "src"})
                    for judge in ("judge-x", "Judge-y"):
                        out["verdicts"].append({**item, "model_a": model, "response_a": text, "model_b": "base",
                                                "response_b": f"base answers {k}" + " more" * 3, "judge": judge,
                                                "preference": round(0.1 + 0.2 * j, 3), "source": "src"})
            out["pairs"].append({**item, "concise_model": "a-model", "concise": f"a-model answers {k}",
                                 "verbose_model": "B-model", "verbose": f"B-model answers {k} more", "source": "src"})
    return out


def _import(url: str, folder: Path, reverse: bool) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for kind, rows in _records().items():
        rows = rows[::-1] if reverse else rows
        halves = [rows[len(rows) // 2:], rows[:len(rows) // 2]] if reverse else [rows]
        for i, part in enumerate(halves):
            path = folder / f"{kind}{i}.jsonl"
            path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in part), encoding="utf-8")
            importing.import_generic(path, kind, "jsonl", None, url)


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_same_data_any_import_order_same_files(db_url, sqlite_url, tmp_path, fmt):
    first = f"sqlite:///{tmp_path / 'first.db'}"
    _import(first, tmp_path / "in1", reverse=False)
    _import(db_url, tmp_path / "in2", reverse=True)  # the other order, and SQLite or PostgreSQL
    for kind in ("responses", "ratings", "labels", "pairs", "verdicts"):
        a, b = tmp_path / f"{kind}-1.{fmt}", tmp_path / f"{kind}-2.{fmt}"
        n = export(kind, fmt, a, first)
        assert export(kind, fmt, b, db_url) == n > 0
        assert a.read_bytes() == b.read_bytes(), kind
    # the order is by code point: family "Fam" < "fam" < "éfam", model "B-model" < "a-model" < "base" < "Émodel"
    if fmt == "jsonl":
        rows = [json.loads(x) for x in (tmp_path / "responses-1.jsonl").read_text(encoding="utf-8").splitlines()]
        fams = list(dict.fromkeys(r["task_family"] for r in rows))
        assert fams == ["Fam", "fam", "éfam"]
        one_item = [r["model"] for r in rows if r["prompt"] == "question 0 of fam"]
        assert one_item == ["B-model", "a-model", "base", "Émodel"]
        verdicts = [json.loads(x) for x in (tmp_path / "verdicts-1.jsonl").read_text(encoding="utf-8").splitlines()]
        assert len(verdicts) == 3 * 3 * 3 * 2


def test_every_family_listed_by_name_not_by_id(db_url, tmp_path, run_cli):
    """Families imported in the order éfam, fam, Fam (ids 1, 2, 3) are listed by name, by code
    point, wherever "every family" is meant: the leaderboard's ``families`` (JSON)."""
    for fam in ("éfam", "fam", "Fam"):  # one import each: the ids follow this order
        rows = [r for r in _records()["ratings"] if r["task_family"] == fam]
        path = tmp_path / f"r-{fam}.jsonl"
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        importing.import_generic(path, "ratings", "jsonl", None, db_url)
    r = run_cli("--database-url", db_url, "leaderboard", "--format", "json")
    assert r.exit_code == 0, r
    assert json.loads(r.stdout)["families"] == ["Fam", "fam", "éfam"]
