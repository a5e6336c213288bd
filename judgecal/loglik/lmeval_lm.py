"""judgecal's scorer as an lm-evaluation-harness model: ``JudgecalLM``, an ``lm_eval.api.model.LM``.

lm-eval (0.4.13) builds every request of a task (few-shot contexts, delimiters, multiple-input
contexts, the unconditional ``("", continuation)`` requests of ``acc_mutual_info``) and calls
``LM.loglikelihood(requests)`` once per run with all of them; it computes the metrics from the
answers. ``JudgecalLM`` answers that call with judgecal's scorer (:mod:`judgecal.loglik.hf`):

1. identical ``(context, continuation)`` pairs are scored once;
2. the pairs are grouped by context string, so an item's context is run through the model once
   for all its choices (packed rows ``[ctx | cont_1 | ... | cont_k]``, see hf.py), and groups
   of more than ``MAX_CONTS_PER_GROUP`` continuations (the empty context of acc_mutual_info) are
   cut into chunks that keep rows short;
3. tokenization is lm-eval's (:mod:`judgecal.loglik.split`), so the numbers are lm-eval's
   ``HFLM`` numbers (per-choice log-likelihoods within 1e-4 nats, tests/test_mc_lmeval.py).

Use it from lm-eval directly::

    import lm_eval
    from judgecal.loglik.lmeval_lm import JudgecalLM

    lm = JudgecalLM(pretrained="path/to/model-folder", device="cpu", dtype="float32")
    out = lm_eval.simple_evaluate(model=lm, tasks=["arc_easy"], num_fewshot=5)

Importing this module also registers the model name ``judgecal`` in lm-eval's registry
(``lm_eval.api.registry.get_model("judgecal")``), so ``simple_evaluate(model="judgecal",
model_args="pretrained=FOLDER")`` works in a process that imported it; an installed wheel
registers it in every process, lazily, for ``lm_eval run --model judgecal``
(:mod:`judgecal.lmeval_plugin`).

``loglikelihood`` requests (``output_type: multiple_choice`` and ``loglikelihood`` tasks) and,
with a local model, ``loglikelihood_rolling`` requests (perplexity tasks: word_perplexity,
byte_perplexity, bits_per_byte) are served; ``generate_until`` raises NotImplementedError
naming the request type. Needs lm-eval (``pip install 'judgecal[lmeval]'``).
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

from judgecal.loglik import lmeval_args
from judgecal.loglik.split import EncodedGroup

MAX_CONTS_PER_GROUP = 16  # continuations per packed group (keeps rows of many short choices batchable)


def hf_device(device: str | None) -> str:
    """The device lm-eval's ``hf`` model would run on for ``device`` (``--device`` /
    ``device=``), so that ``--model judgecal`` takes what ``--model hf`` takes: a device among
    ``cpu``, ``cuda``, ``cuda:N`` for the GPUs torch sees, ``mps``, ``mps:0`` is used as given;
    anything else (None, lm-eval's default ``cuda:0`` on a machine without a GPU) falls back to
    ``cuda`` when torch sees a GPU, else ``cpu``, with a warning naming both (HFLM.__init__,
    lm_eval/models/huggingface.py, logs it as "Device not specified"). Torch is imported here."""
    import logging

    import torch

    gpus = torch.cuda.device_count()
    known = {"cuda", "cpu", "mps", "mps:0"} | {f"cuda:{i}" for i in range(gpus)}
    if device in known:
        return str(device)
    chosen = "cuda" if torch.cuda.is_available() else "cpu"
    if device is None:  # HFLM logs "Device not specified" at info level
        logging.getLogger("judgecal").info("no device given: using %s, as lm-eval's hf model does", chosen)
        return chosen
    logging.getLogger("judgecal").warning("device %r is not available (%d GPU(s) seen by torch): using %s, as "
                                          "lm-eval's hf model does", device, gpus, chosen)
    return chosen


@register_model("judgecal")
class JudgecalLM(LM):
    """An lm-eval ``LM`` whose ``loglikelihood`` runs judgecal's scorer.

    The keyword arguments are lm-eval's ``hf`` model arguments (:mod:`judgecal.loglik.lmeval_args`
    refuses, in one line naming the key, every one judgecal cannot honour; the table in
    docs/mc.md). ``pretrained``: a transformers model folder (or ``scorer``: an already loaded
    :class:`~judgecal.loglik.hf.HFScorer`, whose device, dtype and forward are kept); ``device``
    ("cpu", "cuda", "cuda:N"; None or a device torch lacks: the GPU, else the CPU, as hf),
    ``dtype`` ("auto", hf's default: the config's dtype, else the weights'; "float32",
    "bfloat16", "float16"), ``batch_size`` (items a forward pass, or "auto" / "auto:N": a token
    budget), ``max_batch_size`` (with an integer batch_size only, unread there as in hf),
    ``prefix_token_id`` (the empty context's token, default BOS else EOS), ``trust_remote_code``
    (to transformers), ``chat_template_args`` / ``enable_thinking`` (to the chat template, as
    hf), ``forward`` ("auto", "fused", "transformers"; see :mod:`judgecal.loglik.fused`):
    here "auto" is the model's own transformers forward, which rounds as lm-eval's HFLM does
    (per-choice log-likelihoods within ~3e-5 nats of HFLM's); judgecal's fused forward is about
    10% faster on a CPU but rounds further (up to ~1.4e-4 nats from HFLM's measured on
    acc_mutual_info's BOS-only contexts), so it is used only when asked for. ``max_length``
    (int, or its text from ``--model_args``; >= 2): the model's positions as HFLM's
    ``max_length``, sizing the rolling windows of :meth:`loglikelihood_rolling` and the
    left-truncation of long contexts (default lm-eval's ``resolve_max_length``).
    Or, with ``base_url`` and ``model``, an OpenAI-compatible completions endpoint
    (:mod:`judgecal.loglik.endpoint`; no empty contexts, so no acc_mutual_info).

    After each ``loglikelihood`` call: ``n_tokens[(context, continuation)]`` holds the number of
    continuation tokens scored (judgecal's acc_per_token needs it), ``stats`` the work done
    (tokens, padded_tokens, scored_rows, forward_passes, boundary_fixes, seconds, requests,
    distinct_requests; summed over calls). Raises ModelError / UsageError (judgecal.errors)
    when the model cannot load or an option is bad."""

    def __init__(self, pretrained: str | Path | None = None, *, scorer: Any = None, device: str | None = None,
                 dtype: Any = "auto", batch_size: int | str | None = "auto", forward: str = "auto",
                 base_url: str | None = None, model: str | None = None, api_key: str | None = None,
                 max_length: int | str | None = None, max_batch_size: int | None = None,
                 prefix_token_id: int | str | None = None, trust_remote_code: bool | str = False,
                 chat_template_args: dict | None = None, enable_thinking: bool | None = None,
                 **hf_args: Any) -> None:
        super().__init__()
        lmeval_args.check_hf_args(hf_args)
        self.batch_size = lmeval_args.batch_size(batch_size)
        if max_batch_size is not None:
            if self.batch_size == "auto":
                raise ValueError(f"max_batch_size={max_batch_size!r} caps hf's batch-size search; judgecal's "
                                 "batch_size=auto is a token budget a forward pass: give batch_size=N (N items a "
                                 "pass) instead")
            # with an integer batch_size hf does not read max_batch_size either
        if not isinstance(trust_remote_code, bool):  # as hf reads it: truthy values trust
            text = str(trust_remote_code).lower()
            if text not in ("true", "1", "false", "0", "none", ""):
                raise ValueError(f"trust_remote_code must be true or false, got {trust_remote_code!r}")
            trust_remote_code = text in ("true", "1")
        if enable_thinking and hf_args.get("think_end_token") is None:
            raise ValueError("enable_thinking=True needs think_end_token=... (as lm-eval's hf model)")
        self.chat_template_args = dict(chat_template_args or {})
        if enable_thinking is not None:
            self.chat_template_args["enable_thinking"] = enable_thinking
        if max_length is not None and max_length != "":
            try:
                max_length = int(max_length)
            except (TypeError, ValueError):
                raise ValueError(f"max_length must be an integer >= 2, got {max_length!r}") from None
            if max_length < 2:
                raise ValueError(f"max_length must be an integer >= 2, got {max_length!r}")
        else:
            max_length = None
        if prefix_token_id is not None:
            try:
                prefix_token_id = int(prefix_token_id)
            except (TypeError, ValueError):
                raise ValueError(f"prefix_token_id must be a token id (an integer), got {prefix_token_id!r}") from None
        self.endpoint = None
        self.scorer = None
        if base_url is not None:
            from judgecal.loglik.endpoint import CompletionsScorer

            if not model:
                raise ValueError("JudgecalLM(base_url=...) needs the served model name (model=...)")
            local = {"pretrained": pretrained, "scorer": scorer, "max_length": max_length,
                     "prefix_token_id": prefix_token_id, "max_batch_size": max_batch_size,
                     "trust_remote_code": trust_remote_code or None, "chat_template_args": chat_template_args,
                     "enable_thinking": enable_thinking,
                     "dtype": None if lmeval_args._norm(dtype) in (None, "auto") else dtype,
                     "forward": None if forward == "auto" else forward}
            given = [k for k, v in local.items() if v is not None]
            if given:
                raise ValueError(f"JudgecalLM: {', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to a local "
                                 "model, not to base_url (the server "
                                 "loads the model and sets its context)")
            self.endpoint = CompletionsScorer(base_url, model, api_key=api_key)
            self.tokenizer = None
            self.model_name = model
        else:
            if scorer is None:
                if pretrained is None:
                    raise ValueError("JudgecalLM needs pretrained=MODEL_FOLDER, scorer=HFScorer or base_url")
                if not isinstance(pretrained, (str, Path)):
                    raise ValueError(f"JudgecalLM: pretrained must be a model folder (a path), got a "
                                     f"{type(pretrained).__name__}; pass a loaded model as scorer=HFScorer(...)")
                from judgecal.loglik.hf import HFScorer

                dtype_name = lmeval_args.resolve_dtype(pretrained, dtype, trust_remote_code)
                scorer = HFScorer(pretrained, device=hf_device(device), dtype=dtype_name,
                                  forward="transformers" if forward == "auto" else forward,
                                  trust_remote_code=trust_remote_code)
            # the model's positions as lm-eval's HFLM counts them (max_length=, else the config's
            # n_positions / max_position_embeddings / n_ctx, else the tokenizer's, else 2048): the
            # rolling windows' size and the left-truncation of loglikelihood requests
            from lm_eval.models.utils import resolve_max_length

            positions = max_length or resolve_max_length(scorer.model.config, scorer.tokenizer, default=2048)
            if positions != scorer.max_length:  # a copy: a scorer passed in is left as it was
                scorer = copy.copy(scorer)
                scorer.max_length = positions
            if prefix_token_id is not None and prefix_token_id != scorer.encoder.prefix_token_id:
                from judgecal.loglik.split import Encoder

                if not 0 <= prefix_token_id < len(scorer.tokenizer):
                    raise ValueError(f"prefix_token_id={prefix_token_id} is not a token id of the tokenizer "
                                     f"(0..{len(scorer.tokenizer) - 1})")
                scorer = copy.copy(scorer)  # as hf's prefix_token_id: the empty context's token
                scorer.encoder = Encoder(scorer.tokenizer, prefix_token_id)
            self.scorer = scorer
            self.tokenizer = scorer.tokenizer
            self.model_name = str(pretrained) if pretrained is not None else "(loaded)"
            self._device = scorer.device
        self.n_tokens: dict[tuple[str, str], int] = {}
        self.rolling_tokens: dict[str, int] = {}
        self.rolling_windows: dict[str, int] = {}
        self.stats: dict[str, Any] = {"tokens": 0, "padded_tokens": 0, "scored_rows": 0, "forward_passes": 0,
                                      "boundary_fixes": 0, "seconds": 0.0, "cpu_seconds": 0.0, "requests": 0,
                                      "distinct_requests": 0}

    # ------------------------------------------------------------------ lm-eval API
    def loglikelihood(self, requests: list, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        """``[(log p(continuation | context) in nats, is_greedy), ...]``, one per request, in order.
        ``requests``: lm-eval ``Instance`` objects whose ``args`` are ``(context, continuation)``.
        ``is_greedy`` is False when the endpoint backend cannot tell."""
        pairs: list[tuple[str, str]] = []
        for req in requests:
            args = req.args if hasattr(req, "args") else req
            if len(args) != 2:
                raise NotImplementedError("JudgecalLM scores text (context, continuation) requests only, "
                                          f"got {len(args)} arguments (a multimodal task?)")
            pairs.append((str(args[0]), str(args[1])))
        distinct = list(dict.fromkeys(pairs))
        t0, c0 = time.perf_counter(), time.process_time()
        if self.endpoint is not None:
            scored = dict(zip(distinct, self.endpoint.score_pairs(distinct)))
            res = {p: (ll, n, bool(g)) for p, (ll, n, g) in scored.items()}
        else:
            res = self._score_local(distinct)
        self.stats["seconds"] += time.perf_counter() - t0
        self.stats["cpu_seconds"] += time.process_time() - c0
        self.stats["requests"] += len(pairs)
        self.stats["distinct_requests"] += len(distinct)
        for p, (_, n, _) in res.items():
            self.n_tokens[p] = n
        return [(res[p][0], res[p][2]) for p in pairs]

    def _score_local(self, distinct: list[tuple[str, str]]) -> dict[tuple[str, str], tuple[float, int, bool]]:
        from judgecal.loglik.hf import RunStats

        by_ctx: dict[str, list[str]] = {}
        for ctx, cont in distinct:
            by_ctx.setdefault(ctx, []).append(cont)
        groups = list(by_ctx.items())
        enc = self.scorer.encoder.encode_groups(groups)
        chunks: list[tuple[int, int, EncodedGroup]] = []  # (group, first continuation, encoded chunk)
        for gi, g in enumerate(enc):
            for s in range(0, len(g.conts), MAX_CONTS_PER_GROUP):
                chunks.append((gi, s, EncodedGroup(g.ctx, g.conts[s:s + MAX_CONTS_PER_GROUP],
                                                   g.boundary_fixes if s == 0 else 0)))
        stats = RunStats()
        out = self.scorer.score_groups([c for _, _, c in chunks], batch_size=self.batch_size, stats=stats)
        res: dict[tuple[str, str], tuple[float, int, bool]] = {}
        for (gi, s, _), scores in zip(chunks, out):
            ctx, conts = groups[gi]
            for j, sc in enumerate(scores):
                res[(ctx, conts[s + j])] = (sc.ll, sc.n_tokens, sc.is_greedy)
        for k in ("tokens", "padded_tokens", "scored_rows", "forward_passes", "boundary_fixes"):
            self.stats[k] += getattr(stats, k)
        for k in ("shared_prefix_units", "shared_prefix_tokens_saved", "truncated_requests"):
            self.stats[k] = self.stats.get(k, 0) + stats.extra.get(k, 0)
        return res

    def loglikelihood_rolling(self, requests: list, disable_tqdm: bool = False) -> list[float]:
        """``[log p(text) in nats, ...]``, one per request (``args == (text,)``), in order: the
        whole text's log-likelihood from lm-eval's rolling windows, as lm-eval's HFLM computes it
        (``HFLM.loglikelihood_rolling``, lm_eval/models/huggingface.py): the text is encoded as
        HFLM's ``tok_encode`` does (the tokenizer's special tokens; none when it starts with the
        BOS text), cut by lm-eval's own ``utils.get_rolling_token_windows`` (prefix token: BOS,
        else EOS; ``max_seq_len`` = :attr:`max_length`; ``context_len`` 1) and
        ``utils.make_disjoint_window``; each window is one (context tokens, continuation tokens)
        group for :meth:`HFScorer.score_groups` (the first window's context is the prefix token
        alone), and a text's windows' log-likelihoods are summed. An empty text scores 0.0 (no
        window), as in HFLM. Identical texts are scored once. ``rolling_tokens[text]`` /
        ``rolling_windows[text]`` hold the tokens scored and the windows. Raises
        NotImplementedError for the completions endpoint backend (its windows would be text, not
        lm-eval's token windows)."""
        from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

        from judgecal.loglik.hf import RunStats

        if self.endpoint is not None:
            raise NotImplementedError("JudgecalLM(base_url=...) does not serve loglikelihood_rolling (perplexity "
                                      "tasks): lm-eval's rolling windows are token windows; use pretrained=MODEL_FOLDER")
        texts: list[str] = []
        for req in requests:
            args = req.args if hasattr(req, "args") else req
            if len(args) != 1:
                raise NotImplementedError(f"loglikelihood_rolling takes (text,) requests, got {len(args)} arguments")
            texts.append(str(args[0]))
        distinct = list(dict.fromkeys(texts))
        t0, c0 = time.perf_counter(), time.process_time()
        encoder = self.scorer.encoder
        windows: list[EncodedGroup] = []
        owner: list[int] = []
        for i, tokens in enumerate(encoder.tok_encode_many(distinct)):
            for ctx, cont in map(make_disjoint_window, get_rolling_token_windows(
                    token_list=tokens, prefix_token=encoder.prefix_token_id, max_seq_len=self.max_length,
                    context_len=1)):
                windows.append(EncodedGroup(list(ctx), [list(cont)]))
                owner.append(i)
        stats = RunStats()
        scored = self.scorer.score_groups(windows, batch_size=self.batch_size, stats=stats) if windows else []
        total = [0.0] * len(distinct)
        n_tok = [0] * len(distinct)
        n_win = [0] * len(distinct)
        for i, (sc,) in zip(owner, scored):
            total[i] += sc.ll
            n_tok[i] += sc.n_tokens
            n_win[i] += 1
        for i, t in enumerate(distinct):
            self.rolling_tokens[t] = n_tok[i]
            self.rolling_windows[t] = n_win[i]
        self.stats["seconds"] += time.perf_counter() - t0
        self.stats["cpu_seconds"] += time.process_time() - c0
        self.stats["requests"] += len(texts)
        self.stats["distinct_requests"] += len(distinct)
        self.stats["rolling_windows"] = self.stats.get("rolling_windows", 0) + len(windows)
        for k in ("tokens", "padded_tokens", "scored_rows", "forward_passes", "boundary_fixes"):
            self.stats[k] += getattr(stats, k)
        index = {t: i for i, t in enumerate(distinct)}
        return [total[index[t]] for t in texts]

    def generate_until(self, requests: list, disable_tqdm: bool = False) -> list[str]:
        """Not served: judgecal does not generate text (raises NotImplementedError)."""
        raise NotImplementedError("JudgecalLM serves loglikelihood requests (multiple_choice and loglikelihood "
                                  "tasks) only, not generate_until (generation tasks)")

    # ------------------------------------------------------------------ chat templates (as lm-eval's HFLM)
    @property
    def tokenizer_name(self) -> str:
        """The tokenizer's name with "/" as "__" (lm-eval's HFLM; fingerprints request caches)."""
        if self.tokenizer is None:
            return self.model_name.replace("/", "__")
        return str(self.tokenizer.name_or_path).replace("/", "__")

    def chat_template(self, chat_template: bool | str = False) -> str | None:
        """The chat template lm-eval's HFLM selects (its ``TemplateLM.chat_template``: the
        tokenizer's template, or the one named ``chat_template`` among several); None when
        ``chat_template`` is False or there is no tokenizer."""
        if not chat_template or self.tokenizer is None:
            return None
        from lm_eval.api.model import TemplateLM

        return TemplateLM.chat_template(self, chat_template)

    def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        """Render ``chat_history`` with the tokenizer's chat template, as lm-eval's HFLM does
        (``continue_final_message`` when no generation prompt is added; on a template error, once
        more without the system turn). Raises NotImplementedError for the endpoint backend."""
        if self.tokenizer is None:
            raise NotImplementedError("the completions endpoint backend has no chat template here")
        import jinja2

        kwargs = dict(tokenize=False, add_generation_prompt=add_generation_prompt,
                      continue_final_message=not add_generation_prompt, **self.chat_template_args)
        try:
            return self.tokenizer.apply_chat_template(chat_history, **kwargs)
        except jinja2.exceptions.TemplateError:
            return self.tokenizer.apply_chat_template([m for m in chat_history if m["role"] != "system"], **kwargs)

    @property
    def max_length(self) -> int | None:
        """The model's positions as HFLM counts them (``max_length=``, else lm-eval's
        ``resolve_max_length`` of the config and tokenizer): context + continuation are
        left-truncated to fit, and it is the rolling windows' size, as in HFLM. None for the
        endpoint backend."""
        return getattr(self.scorer, "max_length", None)

    @property
    def eot_token_id(self) -> int | None:
        """The tokenizer's EOS id (reported by lm-eval's result logging)."""
        return getattr(self.tokenizer, "eos_token_id", None)

    def get_model_info(self) -> dict:
        """What lm-eval's ``simple_evaluate`` adds to its results' ``config`` about the model:
        HFLM's keys (``model_num_parameters``, ``model_dtype``, ``model_revision``,
        ``model_sha``: empty, nothing is asked of the Hub) and judgecal's (``judgecal_model``,
        ``judgecal_forward``, ``judgecal_device``). No ``model`` key: lm-eval's own
        ``config.model`` (the registry name, ``judgecal``) stays."""
        info: dict[str, Any] = {"judgecal_model": self.model_name}
        if self.scorer is not None:
            model = self.scorer.model
            info.update(model_num_parameters=sum(p.numel() for p in model.parameters()),
                        model_dtype=str(getattr(model, "dtype", "")), model_revision="main", model_sha="",
                        judgecal_forward=self.scorer.forward_name, judgecal_device=str(self.scorer.device))
        return info
