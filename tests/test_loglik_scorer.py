"""The transformers backend: lm-eval's split rules with the real SmolLM2 tokenizer, and packed
scoring (an item's choices in one row sharing its context, padded rows batched together, shared
few-shot prefixes) against a plain per-choice forward pass."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"

from judgecal.loglik.hf import HFScorer  # noqa: E402

from judgecal.config import shared_data_dir  # noqa: E402
DATA = shared_data_dir() / "mc"


def test_plan_batches():
    # every unit a row of its own, padded to a multiple of 8 tokens (at least 16): 16, 56, 32, 24, 56, 16;
    # a pass holds one padded length, longest first
    lengths = [10, 50, 30, 20, 52, 12]
    assert HFScorer.plan_batches(lengths, "auto", token_budget=120) == [[4, 1], [2], [3], [5, 0]]
    assert HFScorer.plan_batches(lengths, "auto", token_budget=100) == [[4], [1], [2], [3], [5, 0]]
    assert HFScorer.plan_batches(lengths, "auto", token_budget=10) == [[4], [1], [2], [3], [5], [0]]
    # an int: at most that many units a pass
    assert HFScorer.plan_batches(lengths, 2) == [[4, 1], [2], [3], [5, 0]]
    assert HFScorer.plan_batches(lengths, 1) == [[4], [1], [2], [3], [5], [0]]
    assert HFScorer.plan_batches([], "auto") == []
    with pytest.raises(Exception, match="batch-size"):
        HFScorer.plan_batches(lengths, 0)


def test_shared_prefixes_clusters_contexts_by_leading_tokens():
    from judgecal.loglik.hf import shared_prefixes

    shots = list(range(100, 140))  # 40 tokens every "few-shot" context starts with
    ctxs = [shots + [1, 2, 3], [9, 9], shots + [1, 2, 4, 5], shots + [7], shots[:20] + [8], [9, 9, 1]]
    got = sorted((p, sorted(m)) for p, m in shared_prefixes(ctxs, min_prefix=32))
    # the three full-prefix contexts share 40 tokens (each keeps its own last token); the others stand alone
    assert got == [(0, [1]), (0, [4]), (0, [5]), (40, [0, 2, 3])]
    # two contexts that agree beyond the shots share more, but splitting them off saves less than 2 x 40
    assert sorted(len(m) for _, m in shared_prefixes(ctxs, min_prefix=32)) == [1, 1, 1, 3]
    # a context equal to another's prefix keeps one token of its own
    assert shared_prefixes([shots, shots + [5]], min_prefix=32) == [(39, [0, 1])]
    assert shared_prefixes([], min_prefix=32) == []
    assert shared_prefixes([[1]], min_prefix=1) == [(0, [0])]
    # nested sharing: two families under a 40-token common start are kept apart (2 x 4 x 100 tokens
    # saved) rather than joined under the common start (9 x 40)
    a, b = list(range(200, 260)), list(range(300, 360))
    fam = [shots + a + [k] for k in range(5)] + [shots + b + [k] for k in range(5)]
    assert sorted((p, len(m)) for p, m in shared_prefixes(fam, min_prefix=32)) == [(100, 5), (100, 5)]
    # and joined when the families are small: 5 x 40 beats 2 x 1 x 100 + nothing
    fam = [shots + a + [k] for k in range(2)] + [shots + b + [0]] + [shots + [k] for k in range(400, 403)]
    assert [(p, len(m)) for p, m in shared_prefixes(fam, min_prefix=32)] == [(40, 6)]


@pytest.fixture(scope="module")
def scorer():
    from judgecal import config
    from judgecal.localmodel import is_complete

    folder = config.default_model_dir()
    if not is_complete(folder):
        pytest.skip(f"SmolLM2 folder missing at {folder}: run `judgecal model pull`")
    return HFScorer(folder)


@pytest.mark.model
def test_split_rules(scorer):
    enc = scorer.encoder
    tok = scorer.tokenizer
    # trailing space moves to the continuation: same tokens as "Answer:" + " Paris"
    (g,) = enc.encode_groups([("Answer: ", ["Paris"])])
    assert g.ctx == tok("Answer:")["input_ids"]
    assert g.conts == [tok("Answer: Paris")["input_ids"][len(g.ctx):]]
    assert tok.decode(g.conts[0]) == " Paris"
    # empty context -> the BOS/EOS prefix token; SmolLM2's BOS is <|im_start|> (id 1)
    (g,) = enc.encode_groups([("", [" Paris", " Rome"])])
    assert g.ctx == [1] and g.conts[0] == tok(" Paris", add_special_tokens=False)["input_ids"]
    # a token spanning the boundary ("foo" + "bar" tokenizes as one word) is re-encoded, not misaligned
    (g,) = enc.encode_groups([("The word is foo", ["bar"])])
    whole = tok("The word is foobar")["input_ids"]
    if whole[:len(g.ctx)] != g.ctx:
        assert g.boundary_fixes == 1 and g.conts[0] == tok("bar", add_special_tokens=False)["input_ids"]
    assert all(g.conts)


@pytest.mark.model
@pytest.mark.parametrize("forward", ["fused", "transformers"])
def test_packed_equals_plain_forward(scorer, forward, monkeypatch):
    """Packed rows (an item's choices in one row sharing the context, block mask; rows of
    different items padded and batched in one pass) against one plain forward pass of the model per (context, continuation). The transformers forward agrees
    within 1e-4 nats; the fused forward within float32 rounding: 1e-4 nats + 1e-5 relative
    (its linears round differently: 1.02e-4 nats seen on a 21.7-nat continuation)."""
    import torch

    assert scorer.forward_name == "fused"
    if forward == "transformers":
        monkeypatch.setattr(scorer, "fused", None)
    tol = {"abs": 1e-4} if forward == "transformers" else {"abs": 1e-4, "rel": 1e-5}
    groups = scorer.encoder.encode_groups([
        ("Question: What is the capital of France?\nAnswer:", [" Paris", " Rome", " a large city in Europe"]),
        ("2 + 2 =", [" 4", " 5"]),
        ("The café served", [" crème brûlée.", " nothing"]),
    ])
    got = scorer.score_groups(groups, batch_size=3)
    model = scorer.model
    for g, scores in zip(groups, got):
        for cont, s in zip(g.conts, scores):
            ids = torch.tensor([g.ctx + cont])
            with torch.inference_mode():
                logp = torch.log_softmax(model(ids).logits[0].float(), -1)
            n = len(g.ctx)
            want = sum(logp[n - 1 + j, t].item() for j, t in enumerate(cont))
            greedy = all(logp[n - 1 + j].argmax().item() == t for j, t in enumerate(cont))
            assert s.ll == pytest.approx(want, **tol)
            assert s.n_tokens == len(cont) and s.is_greedy == greedy
    # " Paris" is the likelier answer
    assert got[0][0].ll > got[0][1].ll


@pytest.mark.model
@pytest.mark.parametrize("forward", ["fused", "transformers"])
def test_shared_prefix_units_equal_plain_forward(scorer, forward, monkeypatch):
    """Items whose contexts share a long few-shot prefix are scored in one unit (the prefix
    computed once, each item attending to it): every continuation's ll equals a plain forward
    pass of the whole context within the same bounds as the packed rows above, and the
    prefix's tokens go through the body once."""
    import torch

    from judgecal.loglik.hf import RunStats

    if forward == "transformers":
        monkeypatch.setattr(scorer, "fused", None)
    tol = {"abs": 1e-4} if forward == "transformers" else {"abs": 1e-4, "rel": 1e-5}
    shots = "".join(f"Question: What is {a} + {a}?\nAnswer: {2 * a}\n\n" for a in range(3, 9))
    questions = ["What is 2 + 2?", "What is 10 + 10?", "Which is larger, 3 or 7?", "Name a colour."]
    groups = scorer.encoder.encode_groups([(shots + f"Question: {q}\nAnswer:", [" A", " B", " 4", " twenty"])
                                           for q in questions] + [("Unrelated context.", [" yes", " no"])])
    stats = RunStats()
    got = scorer.score_groups(groups, batch_size="auto", stats=stats)
    plain = RunStats()
    scorer.score_groups(groups, batch_size="auto", stats=plain, share_prefixes=False)
    assert stats.extra["shared_prefix_units"] == 1 and stats.extra["shared_prefix_tokens_saved"] > 3 * 40
    assert plain.tokens - stats.tokens == stats.extra["shared_prefix_tokens_saved"]
    model = scorer.model
    for g, scores in zip(groups, got):
        for cont, s in zip(g.conts, scores):
            ids = torch.tensor([g.ctx + cont])
            with torch.inference_mode():
                logp = torch.log_softmax(model(ids).logits[0].float(), -1)
            n = len(g.ctx)
            want = sum(logp[n - 1 + j, t].item() for j, t in enumerate(cont))
            assert s.ll == pytest.approx(want, **tol)
            assert s.is_greedy == all(logp[n - 1 + j].argmax().item() == t for j, t in enumerate(cont))


@pytest.mark.model
@pytest.mark.skipif(not DATA.exists(), reason=f"real data folder absent: {DATA}")
def test_score_task_real_items_with_pmi(scorer):
    from judgecal.loglik.score import score_task
    from judgecal.loglik.tasks import load_task

    task = load_task(DATA / "copa.jsonl", prompt="{query}", limit=6)
    res = score_task(task, scorer=scorer, null_context="Answer:")
    assert len(res.items) == 6
    for it, r in zip(task.items, res.items):
        for c, cr in zip(it.choices, r.choices):
            assert cr.n_chars == len(c) and cr.n_bytes == len(c.encode()) and cr.ll < 0 and cr.ll_null < 0
        pmi = [cr.ll - cr.ll_null for cr in r.choices]
        assert r.predictions["acc_pmi"] == pmi.index(max(pmi))
    assert set(res.metrics) == {"acc", "acc_norm", "acc_bytes", "acc_per_token", "acc_pmi"}
    # the null context "" is lm-eval's acc_mutual_info: the prefix token alone
    res2 = score_task(task, scorer=scorer, null_context="", limit=2)
    assert res2.items[0].choices[0].ll_null != res.items[0].choices[0].ll_null
