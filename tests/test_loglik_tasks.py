"""Task loading: real files from ../shared/data/mc, lm-eval YAML, bad records."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from judgecal.errors import InputError, UsageError
from judgecal.loglik.tasks import (hellaswag_preprocess, hellaswag_query, load_jsonl, load_lm_eval_yaml,
                                   load_task)

from judgecal.config import shared_data_dir  # noqa: E402
DATA = shared_data_dir() / "mc"
needs_data = pytest.mark.skipif(not DATA.exists(), reason=f"real data folder absent: {DATA}")


@needs_data
def test_arc_easy_real():
    task = load_task(DATA / "arc_easy.jsonl")
    assert len(task.items) == 2376
    first = task.items[0]
    assert first.context == ("Question: Which statement best explains why photosynthesis is the foundation "
                             "of most food webs?\nAnswer:")
    assert first.choices[0] == "Sunlight is the source of energy for nearly all ecosystems."
    assert first.gold == 0 and task.target_delimiter == " "


@needs_data
def test_hellaswag_real_first_items():
    task = load_task(DATA / "hellaswag_val_full.txt.bz2", limit=3)
    assert task.format == "hellaswag" and len(task.items) == 3
    # ctx_b "he" capitalised, as lm-eval's process_docs does
    assert task.items[0].context == "Roof shingle removal: A man is sitting on a roof. He"
    assert task.items[0].gold == 3
    assert task.items[0].choices[3] == "starts pulling up roofing on a roof."
    assert task.items[1].context.endswith("She bends down and grabs the pole. The lady")
    full = load_task(DATA / "hellaswag_val_full.txt.bz2")
    assert len(full.items) == 10042


def test_hellaswag_preprocess_and_query():
    assert hellaswag_preprocess(" How to x [title] Do y [step] now  ok ") == "How to x. Do y now ok"
    assert hellaswag_query("Act: One thing. the man") == "Act: One thing. The man"
    assert hellaswag_query("Act: he ROCKS") == "Act: He rocks"  # str.capitalize lower-cases the rest
    assert hellaswag_query("Act: It is done.") == "Act: It is done."


def test_jsonl_bad_records(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text('{"query": "q", "choices": ["a", "b"], "gold": 1}\n\n{"query": "q", "choices": ["a"], "gold": 0}\n')
    with pytest.raises(InputError, match=r"t\.jsonl:3: field 'choices'"):
        load_jsonl(p)
    p.write_text('{"query": "q", "choices": ["a", "b"], "gold": 2}\n')
    with pytest.raises(InputError, match=r":1: field 'gold' must be an index in 0..1"):
        load_jsonl(p)
    p.write_text('{"query": "q", "choices": ["a", "b"]\n')
    with pytest.raises(InputError, match=r":1: invalid JSON"):
        load_jsonl(p)
    with pytest.raises(InputError, match="does not exist"):
        load_task(tmp_path / "missing.jsonl")


def test_hellaswag_bad_gold(tmp_path):
    p = tmp_path / "h.txt"
    p.write_text("A: b c\nx\n1\n2\n3\n4\n")
    with pytest.raises(InputError, match=r"h\.txt:2: gold line"):
        load_task(p)


def _yaml(tmp_path, body: str, rows: list[dict]) -> Path:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    y = tmp_path / "task.yaml"
    y.write_text(textwrap.dedent(body))
    return y


def test_lm_eval_yaml(tmp_path):
    rows = [{"question": "2+2?", "options": ["3", "4"], "answer": 1},
            {"question": "Sky?", "options": ["blue", "green"], "answer": "blue"}]
    y = _yaml(tmp_path, """\
        task: my_mc
        output_type: multiple_choice
        dataset_path: json
        dataset_kwargs:
          data_files:
            test: data.jsonl
        test_split: test
        doc_to_text: "Q: {{question}}\\nA:"
        doc_to_choice: "{{options}}"
        doc_to_target: answer
        metric_list:
          - metric: acc
            aggregation: mean
            higher_is_better: true
          - metric: acc_norm
        metadata:
          version: 1
        """, rows)
    task = load_lm_eval_yaml(y)
    assert task.name == "my_mc" and task.target_delimiter == " "
    assert task.items[0].context == "Q: 2+2?\nA:" and task.items[0].choices == ("3", "4")
    assert task.items[0].gold == 1 and task.items[1].gold == 0  # string target -> its index
    assert task.metrics == ["acc", "acc_norm"]


def test_lm_eval_yaml_unsupported(tmp_path):
    rows = [{"q": "x", "c": ["a", "b"], "g": 0}]
    base = "output_type: multiple_choice\ndataset_path: json\ndataset_kwargs: {data_files: data.jsonl}\n" \
           "doc_to_text: q\ndoc_to_choice: c\ndoc_to_target: g\n"
    y = _yaml(tmp_path, base + "process_docs: !function utils.process_docs\n", rows)
    with pytest.raises(InputError, match="'process_docs'"):
        load_task(y)
    y = _yaml(tmp_path, base + "filter_list: []\n", rows)
    with pytest.raises(InputError, match="unsupported lm-evaluation-harness task key 'filter_list'"):
        load_task(y)
    y = _yaml(tmp_path, base.replace("dataset_path: json", "dataset_path: allenai/ai2_arc"), rows)
    with pytest.raises(InputError, match="key 'dataset_path'"):
        load_task(y)
    y = _yaml(tmp_path, base + "metric_list: [{metric: exact_match}]\n", rows)
    with pytest.raises(InputError, match="unsupported metric 'exact_match'"):
        load_task(y)
    y = _yaml(tmp_path, base.replace("doc_to_target: g", "doc_to_target: '{{nope}}'"), rows)
    with pytest.raises(InputError, match=r"data\.jsonl:1: template error"):
        load_task(y)


def test_binary_file_and_bad_prompt_are_one_line_errors(tmp_path):
    from judgecal.errors import InputError
    from judgecal.loglik.tasks import load_jsonl

    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b'{"query": "q", "choices": ["a", "b"], "gold": 0}\n\xff\xfe\x00garbage\n')
    with pytest.raises(InputError, match=r"bin.jsonl:2: not UTF-8 text"):
        load_jsonl(binary)
    good = tmp_path / "ok.jsonl"
    good.write_text('{"query": "q", "choices": ["a", "b"], "gold": 0}\n')
    for bad, why in [("{nokey}", "only use plain"), ("no placeholder", "has no"), ("{query.__class__}", "only use plain"),
                     ("{query!r}", "only use plain"), ("{0}", "only use plain"), ("{query", "not a format string")]:
        with pytest.raises(UsageError, match=why):
            load_jsonl(good, prompt=bad)
    assert load_jsonl(good, prompt="Q: {query}\nA ({query}):").items[0].context == "Q: q\nA (q):"
