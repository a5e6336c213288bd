"""`--model judgecal` takes lm-eval's `hf` model arguments (issue 36 item 1): every key of
``HFLM.__init__`` is honoured, accepted at hf's default only, or of no effect as in hf, and the
rest are refused in one line naming the key (judgecal/loglik/lmeval_args.py, docs/mc.md's
table). References: lm-eval 0.4.13's own HFLM signature and HFLM's numbers on SmolLM2."""

from __future__ import annotations

import inspect
import os
import re
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

lm_eval = pytest.importorskip("lm_eval")

from judgecal.loglik import lmeval_args  # noqa: E402
from judgecal.loglik.lmeval_lm import JudgecalLM  # noqa: E402

DOCS = Path(__file__).resolve().parents[1] / "docs" / "mc.md"


def _hf_params() -> dict:
    from lm_eval.models.huggingface import HFLM

    return {k: p.default for k, p in inspect.signature(HFLM.__init__).parameters.items() if k not in ("self", "kwargs")}


def test_every_hf_key_is_classified_and_hf_defaults_are_accepted():
    params = _hf_params()
    classified = set(lmeval_args.AT_DEFAULT) | lmeval_args.NO_EFFECT | lmeval_args.HONOURED
    assert set(params) == classified  # a new lm-eval key fails here until it is placed
    for key, (allowed, _) in lmeval_args.AT_DEFAULT.items():
        assert lmeval_args._same(params[key], allowed), key
    lmeval_args.check_hf_args({k: params[k] for k in lmeval_args.AT_DEFAULT})  # hf's defaults pass
    lmeval_args.check_hf_args({"truncation": True, "logits_cache": False, "think_end_token": "</think>"})


def test_docs_table_lists_every_hf_key_with_its_behaviour():
    text = DOCS.read_text(encoding="utf-8")
    start = text.index("### `--model_args` and options of `--model hf`")
    kinds: dict[str, str] = {}
    for line in text[start:].split("\n\n| lm-eval option")[0].splitlines():
        cells = line.split(" | ")
        if line.startswith("| `") and len(cells) == 2:
            for key in re.findall(r"`([a-z_]+)", cells[0]):
                kinds[key] = cells[1]
    assert set(_hf_params()) <= set(kinds)
    for key in lmeval_args.AT_DEFAULT:
        assert kinds[key].startswith("refused"), key
    for key in lmeval_args.NO_EFFECT | lmeval_args.HONOURED:
        assert kinds[key].startswith("honoured"), key
    options = text[start:].split("| lm-eval option")[1].split("\n\n")[0]
    for opt in ("--num_fewshot", "--limit", "--batch_size", "--max_batch_size", "--device", "--apply_chat_template",
                "--fewshot_as_multiturn", "--system_instruction", "--seed", "--log_samples", "--use_cache",
                "--trust_remote_code"):
        assert f"`{opt}" in options, opt


@pytest.mark.parametrize("key, value", [
    ("backend", "seq2seq"), ("revision", "v1.0"), ("subfolder", "sub"), ("tokenizer", "gpt2"),
    ("use_fast_tokenizer", False), ("add_bos_token", True), ("add_bos_token", False), ("softmax_dtype", "bfloat16"),
    ("mixed_precision_dtype", "bfloat16"), ("parallelize", True), ("max_memory_per_gpu", "10GiB"),
    ("max_cpu_memory", "30GiB"), ("offload_folder", "/tmp/off"), ("tp_plan", "auto"), ("peft", "adapter/"),
    ("delta", "delta/"), ("autogptq", True), ("gptqmodel", True), ("gguf_file", "m.gguf"),
    ("device_map", "auto"), ("attn_implementation", "eager"), ("load_in_8bit", True),
])
def test_a_key_judgecal_cannot_honour_is_refused_in_one_line(key, value):
    with pytest.raises(ValueError) as exc:
        JudgecalLM(pretrained="/nonexistent/model", **{key: value})  # refused before anything loads
    msg = str(exc.value)
    assert "\n" not in msg and f"{key}={value!r}" in msg


def test_batch_size_as_hf_takes_it():
    assert lmeval_args.batch_size("auto") == "auto" and lmeval_args.batch_size("auto:4") == "auto"
    assert lmeval_args.batch_size(None) == "auto" and lmeval_args.batch_size("16") == 16
    assert lmeval_args.batch_size(1) == 1
    for bad in ("0", 0, "auto:0", "auto:x", "big", True):
        with pytest.raises(ValueError, match="batch_size must be"):
            lmeval_args.batch_size(bad)
    # max_batch_size bounds hf's batch-size search; judgecal's auto is a token budget: refused there
    with pytest.raises(ValueError, match="max_batch_size=8"):
        JudgecalLM(pretrained="/nonexistent/model", batch_size="auto", max_batch_size=8)
    with pytest.raises(ValueError, match="enable_thinking=True needs think_end_token"):
        JudgecalLM(pretrained="/nonexistent/model", enable_thinking=True)


def test_local_keys_with_base_url_are_refused():
    for kw in ({"pretrained": "m/"}, {"dtype": "float16"}, {"forward": "fused"}, {"prefix_token_id": 0},
               {"trust_remote_code": True}, {"max_length": 64}, {"chat_template_args": {"a": 1}}):
        with pytest.raises(ValueError, match="to a local model, not to base_url"):
            JudgecalLM(base_url="http://127.0.0.1:9/v1", model="m", **kw)
    lm = JudgecalLM(base_url="http://127.0.0.1:9/v1", model="m", dtype="auto", device="cuda:0", batch_size=1)
    assert lm.endpoint is not None  # lm-eval's CLI always passes device and batch_size: not refused


def test_dtype_auto_is_the_configs_else_the_weights(tmp_path):
    import json

    import torch
    from safetensors.torch import save_file

    cfg = {"model_type": "llama", "hidden_size": 8, "intermediate_size": 16, "num_attention_heads": 2,
           "num_hidden_layers": 1, "num_key_value_heads": 2, "vocab_size": 32}
    (tmp_path / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    save_file({"w": torch.zeros(2, dtype=torch.int64), "x": torch.zeros(2, dtype=torch.bfloat16)},
              str(tmp_path / "model.safetensors"))
    assert lmeval_args.resolve_dtype(tmp_path, "auto") == "bfloat16"  # no dtype in config: the first float weight
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "dtype": "float16"}), encoding="utf-8")
    assert lmeval_args.resolve_dtype(tmp_path, None) == "float16"
    assert lmeval_args.resolve_dtype(tmp_path, torch.bfloat16) == "bfloat16"
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "dtype": "float64"}), encoding="utf-8")
    with pytest.raises(ValueError, match="dtype=auto is float64"):
        lmeval_args.resolve_dtype(tmp_path, "auto")
    with pytest.raises(ValueError, match="dtype must be auto"):
        lmeval_args.resolve_dtype(tmp_path, "int8")


def test_trust_remote_code_reaches_from_pretrained(monkeypatch):
    import judgecal.loglik.hf as hf

    seen = {}

    class Stop(Exception):
        pass

    def fake_init(self, folder, **kw):
        seen.update(kw)
        raise Stop

    monkeypatch.setattr(hf.HFScorer, "__init__", fake_init)
    monkeypatch.setattr(lmeval_args, "resolve_dtype", lambda p, d, t=False: "float32")
    with pytest.raises(Stop):
        JudgecalLM(pretrained="some/folder", trust_remote_code=True, device="cpu")  # lm-eval's --trust_remote_code
    assert seen == {"device": "cpu", "dtype": "float32", "forward": "transformers", "trust_remote_code": True}
    for value, expected in ((1, True), ("true", True), (False, False), ("0", False), (None, False)):
        seen.clear()
        with pytest.raises(Stop):
            JudgecalLM(pretrained="some/folder", trust_remote_code=value, device="cpu")
        assert seen["trust_remote_code"] is expected, value
    with pytest.raises(ValueError, match="trust_remote_code must be true or false, got 'maybe'"):
        JudgecalLM(pretrained="some/folder", trust_remote_code="maybe")


# ---------------------------------------------------------------- with the model
@pytest.fixture(scope="module")
def folder():
    from test_mc_lmeval_layout import model_folder_or_skip

    return model_folder_or_skip()


@pytest.mark.slow
@pytest.mark.model
def test_defaults_and_prefix_token_id_as_hf(folder, monkeypatch):
    """No device, no dtype: the CPU here (no CUDA) and the config's dtype (float32 for SmolLM2),
    as HFLM; prefix_token_id (the empty context's token) changes the numbers as in HFLM."""
    import torch
    from lm_eval.models.huggingface import HFLM

    lm = JudgecalLM(pretrained=str(folder))
    assert lm.scorer.dtype_name == "float32" and str(lm.scorer.device) == ("cuda" if torch.cuda.is_available() else "cpu")
    reqs = [("", " The cat sat on the mat."), ("Question: 2+2?\nAnswer:", " 4")]
    alt = JudgecalLM(pretrained=str(folder), prefix_token_id=198, device="cpu")  # "\n", not BOS/EOS
    assert alt.scorer.encoder.prefix_token_id == 198 and lm.scorer.encoder.prefix_token_id != 198
    ref_default = HFLM(pretrained=str(folder), device="cpu", dtype="float32")
    ref_alt = HFLM(pretrained=str(folder), device="cpu", dtype="float32", prefix_token_id=198)
    ours, ours_alt = lm.loglikelihood(reqs), alt.loglikelihood(reqs)
    theirs, theirs_alt = ref_default.loglikelihood(_instances(reqs)), ref_alt.loglikelihood(_instances(reqs))
    for (a, ga), (b, gb) in zip(ours + ours_alt, theirs + theirs_alt):
        assert abs(a - b) < 1e-4 and ga == gb
    assert abs(ours[0][0] - ours_alt[0][0]) > 0.01  # the empty context's prefix token matters
    assert ours[1][0] == pytest.approx(ours_alt[1][0], abs=1e-6)  # a non-empty context does not use it


@pytest.mark.slow
@pytest.mark.model
def test_chat_template_args_reach_the_template(folder, monkeypatch):
    lm = JudgecalLM(pretrained=str(folder), device="cpu", chat_template_args={"custom": 1}, enable_thinking=False,
                    think_end_token="</think>")
    seen = {}

    def spy(history, **kw):
        seen.update(kw)
        return "x"

    monkeypatch.setattr(lm.tokenizer, "apply_chat_template", spy)
    lm.apply_chat_template([{"role": "user", "content": "hi"}])
    assert seen["custom"] == 1 and seen["enable_thinking"] is False and seen["add_generation_prompt"] is True
    assert lm.chat_template(True) == lm.tokenizer.chat_template and lm.chat_template(False) is None


def _instances(pairs):
    from lm_eval.api.instance import Instance

    return [Instance(request_type="loglikelihood", doc={}, arguments=p, idx=0) for p in pairs]


def test_a_missing_model_folder_is_one_line(tmp_path):
    from judgecal.errors import ModelError

    with pytest.raises(ModelError, match="cannot load the model in") as exc:
        JudgecalLM(pretrained=str(tmp_path / "absent"))  # dtype=auto reads the config first
    assert "\n" not in str(exc.value)
