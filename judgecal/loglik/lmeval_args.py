"""lm-eval's ``hf`` model arguments as ``--model judgecal`` takes them (issue 36 item 1).

``lm_eval run --model hf --model_args KEY=VALUE,...`` passes every key to ``HFLM.__init__``
(lm_eval/models/huggingface.py, lm-eval 0.4.13), which hands the keys it does not name to
``transformers.AutoModelForCausalLM.from_pretrained``; lm-eval's CLI adds ``batch_size``,
``max_batch_size`` (when given) and ``device`` (default ``cuda:0``), and ``--trust_remote_code``
adds ``trust_remote_code=True``. ``JudgecalLM`` takes the same keys, so that a team's command
line runs with ``--model judgecal`` or stops with a one-line error naming the key; no key is
ignored without a word. Each key is one of (the table in docs/mc.md lists them all):

- honoured by :class:`~judgecal.loglik.lmeval_lm.JudgecalLM` itself: ``pretrained``,
  ``device``, ``dtype``, ``batch_size``, ``max_batch_size``, ``max_length``,
  ``prefix_token_id``, ``trust_remote_code``, ``chat_template_args``, ``enable_thinking``;
- :data:`AT_DEFAULT`: accepted at ``hf``'s default (what judgecal does is what ``hf`` does
  with that value), any other value refused with the reason;
- :data:`NO_EFFECT`: accepted with any value, as ``hf``'s log-likelihood requests do not read
  them either (``truncation`` and ``think_end_token`` are read by ``generate_until`` only,
  ``logits_cache`` changes which requests share a forward pass, not the numbers);
- any other key (one ``hf`` would pass to ``from_pretrained``: ``device_map``,
  ``attn_implementation``, ``load_in_8bit``, ...) is refused naming it.
"""

from __future__ import annotations

from typing import Any

_ONE_DEVICE = "judgecal runs the model on one device in one process (no split over GPUs)"

# key -> (values accepted: hf's default and its equivalents, why any other value is refused)
AT_DEFAULT: dict[str, tuple[tuple[Any, ...], str]] = {
    "backend": (("default", "causal"), "judgecal scores causal (decoder-only) models; seq2seq models are not served"),
    "revision": (("main",), "judgecal loads the model folder as it is, no Hub revision; give the revision's folder"),
    "subfolder": (("", None), "judgecal loads the model folder itself; give the subfolder as pretrained="),
    "tokenizer": ((None,), "judgecal uses the model folder's own tokenizer"),
    "use_fast_tokenizer": ((True,), "judgecal uses the fast tokenizer (its lm-eval token parity is measured with it)"),
    "add_bos_token": ((None,), "judgecal encodes with the tokenizer's own special tokens, as hf with "
                               "add_bos_token=None"),
    "softmax_dtype": ((None, "float32"), "judgecal's log-softmax is float32 whatever the dtype"),
    "mixed_precision_dtype": ((None,), "judgecal runs the forward pass in dtype=, without autocast"),
    "parallelize": ((False,), _ONE_DEVICE),
    "max_memory_per_gpu": ((None,), _ONE_DEVICE),
    "max_cpu_memory": ((None,), _ONE_DEVICE),
    "offload_folder": (("./offload", None), _ONE_DEVICE),
    "tp_plan": ((None,), _ONE_DEVICE),
    "peft": ((None,), "judgecal loads no adapters; merge the adapter into a model folder first"),
    "delta": ((None,), "judgecal loads no delta weights; add them into a model folder first"),
    "autogptq": ((False,), "judgecal loads no GPTQ checkpoints"),
    "gptqmodel": ((False,), "judgecal loads no GPTQ checkpoints"),
    "gguf_file": ((None,), "judgecal loads transformers folders, not GGUF files (a GGUF server: base_url=)"),
}

NO_EFFECT = frozenset({"truncation", "logits_cache", "think_end_token"})

# the keys JudgecalLM reads itself (hf's and judgecal's own)
HONOURED = frozenset({"pretrained", "device", "dtype", "batch_size", "max_batch_size", "max_length",
                      "prefix_token_id", "trust_remote_code", "chat_template_args", "enable_thinking"})
JUDGECAL_ONLY = frozenset({"scorer", "forward", "base_url", "model", "api_key"})


def _norm(value: Any) -> Any:
    """A torch dtype or its ``"torch.X"`` text as ``"X"``; anything else as given."""
    text = str(value)
    if text.startswith("torch.") and not isinstance(value, (int, float)):
        return text[len("torch."):]
    return value


def _same(value: Any, allowed: tuple[Any, ...]) -> bool:
    v = _norm(value)
    if isinstance(v, str) and v.lower() in ("true", "false"):
        v = v.lower() == "true"
    # a bool only equals a bool (True == 1 in Python)
    return any(isinstance(a, bool) == isinstance(v, bool) and v == a for a in allowed)


def check_hf_args(extra: dict[str, Any]) -> None:
    """Refuse, in one ``ValueError`` line naming the key(s), every ``hf`` model argument in
    ``extra`` (the keyword arguments ``JudgecalLM`` does not read itself) that judgecal cannot
    honour: an :data:`AT_DEFAULT` key at another value than ``hf``'s default, or a key judgecal
    does not know (hf would pass it to ``from_pretrained``). :data:`NO_EFFECT` keys pass."""
    bad: list[str] = []
    unknown: list[str] = []
    for key, value in extra.items():
        if key in NO_EFFECT:
            continue
        if key in AT_DEFAULT:
            allowed, why = AT_DEFAULT[key]
            if not _same(value, allowed):
                shown = " or ".join("''" if a == "" else str(a) for a in allowed)
                bad.append(f"{key}={value!r} ({why}; accepted: {shown})")
        else:
            unknown.append(f"{key}={value!r}")
    if bad:
        raise ValueError("--model judgecal cannot honour model argument " + "; ".join(bad))
    if unknown:
        raise ValueError("--model judgecal does not know model argument " + ", ".join(unknown)
                         + " (hf would pass it to transformers' from_pretrained; judgecal refuses it rather than "
                           "ignore it; see docs/mc.md)")


def batch_size(value: Any) -> int | str:
    """``batch_size`` as hf takes it: an integer >= 1 (items a forward pass here), ``"auto"``
    or ``"auto:N"`` (hf's batch-size search, N times; here both are judgecal's token budget,
    fitted to each pass), None = ``"auto"``. Raises ValueError otherwise."""
    if value is None or value == "auto":
        return "auto"
    if isinstance(value, str) and value.startswith("auto:"):
        try:
            n = float(value[5:])
        except ValueError:
            n = 0
        if n > 0:
            return "auto"
        raise ValueError(f"batch_size must be an integer >= 1, 'auto' or 'auto:N', got {value!r}")
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"batch_size must be an integer >= 1, 'auto' or 'auto:N', got {value!r}") from None
    if n < 1 or isinstance(value, bool):
        raise ValueError(f"batch_size must be an integer >= 1, 'auto' or 'auto:N', got {value!r}")
    return n


DTYPES = ("float32", "bfloat16", "float16")


def resolve_dtype(pretrained: Any, dtype: Any, trust_remote_code: bool = False) -> str:
    """The dtype name judgecal loads ``pretrained`` in for ``dtype`` as ``hf`` takes it:
    ``"auto"`` (hf's default) or None = what transformers' ``dtype="auto"`` picks, the config's
    ``dtype``/``torch_dtype``, else the first floating tensor's dtype in the folder's
    safetensors files; a name or torch dtype among float32, bfloat16, float16 as given.
    Raises ValueError naming the dtype when it is another one or cannot be told, ModelError
    when the config cannot be read."""
    name = _norm(dtype)
    if name is None or name == "auto":
        import transformers

        from judgecal.errors import ModelError

        try:
            cfg = transformers.AutoConfig.from_pretrained(str(pretrained), trust_remote_code=trust_remote_code)
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot load the model in {pretrained}: {exc}") from exc
        found = getattr(cfg, "dtype", None) or getattr(cfg, "torch_dtype", None)
        name = _norm(found) if found is not None else _weights_dtype(pretrained)
        if name is None:
            raise ValueError(f"dtype=auto: {pretrained} names no dtype in its config and has no safetensors "
                             f"weights to read it from; give dtype= one of {', '.join(DTYPES)}")
        if name not in DTYPES:
            raise ValueError(f"dtype=auto is {name} for {pretrained}; judgecal runs {', '.join(DTYPES)}: "
                             "give dtype= one of them")
        return str(name)
    if name not in DTYPES:
        raise ValueError(f"dtype must be auto, {', '.join(DTYPES)}, got {dtype!r}")
    return str(name)


def _weights_dtype(folder: Any) -> str | None:
    from pathlib import Path

    files = sorted(Path(str(folder)).glob("*.safetensors")) if Path(str(folder)).is_dir() else []
    if not files:
        return None
    from safetensors import safe_open

    names = {"F32": "float32", "BF16": "bfloat16", "F16": "float16", "F64": "float64"}
    with safe_open(str(files[0]), framework="pt") as f:
        for key in f.keys():
            code = f.get_slice(key).get_dtype()
            if code in names:
                return names[code]
    return None
