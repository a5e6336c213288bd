"""judgecal's fused Llama forward (judgecal/loglik/fused.py) against the transformers forward.

- tiny random Llama models (grouped-query attention, llama3 rope scaling, several head
  sizes): final hidden states under a packed block mask equal the transformers body's, on
  both linear backends (oneDNN and plain torch);
- what it refuses: biases, other architectures; ``--forward fused`` on such a model is a
  usage error, ``auto`` falls back to the transformers forward;
- the real SmolLM2 on real HellaSwag items: per-choice log-likelihoods of both forwards
  against a float64 run of the same model (the exact answer up to float64 rounding).
"""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from judgecal.config import default_model_dir, shared_data_dir  # noqa: E402
from judgecal.errors import UsageError  # noqa: E402
from judgecal.loglik.fused import FusedLlama, supports  # noqa: E402

HELLASWAG = shared_data_dir() / "mc" / "hellaswag_val_full.txt.bz2"


def tiny_llama(**over):
    cfg = dict(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
               num_key_value_heads=2, head_dim=16, max_position_embeddings=256, rms_norm_eps=1e-5,
               tie_word_embeddings=True)
    cfg.update(over)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**cfg))
    model.eval()
    with torch.no_grad():  # random weights large enough that a wrong rotation or permutation shows
        for p in model.parameters():
            p.normal_(0, 0.2) if p.dim() > 1 else p.uniform_(0.5, 1.5)
    return model


def packed_batch():
    """Two rows: [ctx 5 | cont 3 | cont 2] and [ctx 4 | cont 4 | pad 2], the scorer's mask."""
    L = 10
    seg = torch.tensor([[0] * 5 + [1] * 3 + [2] * 2, [0] * 4 + [1] * 4 + [-1] * 2])
    pos = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 7, 5, 6], [0, 1, 2, 3, 4, 5, 6, 7, 0, 1]])
    item = torch.where(seg >= 0, 0, -1)
    causal = torch.ones((L, L), dtype=torch.bool).tril()
    same_seg = seg[:, :, None] == seg[:, None, :]
    to_ctx = (seg[:, None, :] == 0) & (seg[:, :, None] > 0)
    mask = (causal[None] & (item[:, :, None] == item[:, None, :]) & (same_seg | to_ctx))[:, None]
    ids = torch.randint(0, 97, (2, L), generator=torch.Generator().manual_seed(1))
    return ids, mask, pos


@pytest.mark.parametrize("over", [
    {},
    {"num_key_value_heads": 4},  # plain multi-head attention
    {"num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 8},  # multi-query, small heads
    {"rope_parameters": {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 64}},
])
@pytest.mark.parametrize("onednn", [True, False])
def test_fused_equals_transformers_body(over, onednn):
    model = tiny_llama(**over)
    assert supports(model)
    ids, mask, pos = packed_batch()
    fused = FusedLlama(model, onednn=onednn)
    with torch.inference_mode():
        want = model.get_decoder()(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False).last_hidden_state
        got = fused(ids, mask, pos)
    assert got.shape == want.shape == (2, 10, 64)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("over", [{"attention_bias": True}, {"mlp_bias": True}, {"hidden_act": "gelu"}])
def test_supports_refuses_what_it_does_not_compute(over):
    assert not supports(tiny_llama(**over))


def test_forward_option_on_a_non_llama_model(tmp_path):
    """--forward fused on a GPT-2 folder: a usage error naming the model type; auto falls back."""
    from judgecal.loglik.hf import HFScorer
    from judgecal.localmodel import is_complete

    src = default_model_dir()
    if not is_complete(src):
        pytest.skip("SmolLM2 folder missing: run `judgecal model pull` (its tokenizer is reused)")
    cfg = transformers.GPT2Config(vocab_size=49152, n_embd=32, n_layer=1, n_head=2, n_positions=128)
    transformers.GPT2LMHeadModel(cfg).save_pretrained(tmp_path)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (src / name).exists():
            shutil.copy(src / name, tmp_path / name)
    with pytest.raises(UsageError, match="gpt2"):
        HFScorer(tmp_path, forward="fused")
    assert HFScorer(tmp_path, forward="auto").forward_name == "transformers"
    with pytest.raises(UsageError, match="--forward"):
        HFScorer(tmp_path, forward="fast")
    from judgecal import cli
    from judgecal.loglik import hf

    assert cli.FORWARDS == hf.FORWARDS  # the CLI's choices are the scorer's


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.long  # float64 reference forward passes: 2 min (make long)
@pytest.mark.skipif(not HELLASWAG.exists(), reason=f"real data absent: {HELLASWAG}")
def test_real_model_accuracy_against_float64():
    """SmolLM2 on 30 real HellaSwag items: both float32 forwards against float64."""
    from judgecal.localmodel import is_complete
    from judgecal.loglik.hf import HFScorer
    from judgecal.loglik.score import score_task
    from judgecal.loglik.tasks import load_hellaswag_text

    folder = default_model_dir()
    if not is_complete(folder):
        pytest.skip("SmolLM2 folder missing: run `judgecal model pull`")
    task = load_hellaswag_text(HELLASWAG, limit=30)

    def lls(scorer):
        res = score_task(task, scorer=scorer, null_context=None)
        return np.array([c.ll for r in res.items for c in r.choices])

    fused = HFScorer(folder, forward="auto")
    assert fused.forward_name == "fused"
    got_fused = lls(fused)
    ref = HFScorer(folder, forward="transformers")
    got_tf = lls(ref)
    ref.model.to(torch.float64)
    exact = lls(ref)
    err_fused, err_tf = np.abs(got_fused - exact), np.abs(got_tf - exact)
    # measured: fused (oneDNN) max 9.6e-5 / mean 1.7e-5 nats; transformers max 5.6e-5 / mean 1.2e-5
    assert err_fused.max() < 2e-4 and err_fused.mean() < 4e-5, (err_fused.max(), err_fused.mean())
    assert err_tf.max() < 2e-4 and err_tf.mean() < 4e-5
    assert exact.min() < -5  # real continuations, not trivially small numbers
