"""Local scoring with torch + transformers: one forward pass per item for all its choices.

Design (the work lm-evaluation-harness does, minus the repetition):

- **Shared context, once.** An item's context tokens and all its continuations are packed into
  ONE row: ``[ctx | cont_1 | cont_2 | ... | cont_k]``, with position ids restarting at
  ``len(ctx)`` for every continuation and a block attention mask: a context token attends
  causally to the context; a continuation token attends to the whole context and causally to
  its own continuation only. This is exactly a KV-cache reuse of the context for every choice,
  done in a single batched forward pass (no cache copying, no second pass).
- **LM head only where scored.** The body's final hidden states are gathered at the positions
  that predict continuation tokens (the last context token, shared by all choices, plus each
  continuation's own tokens but its last), and only those rows go through the output
  projection; log-softmax in float32 whatever the model dtype.
- **Shared prefixes, once.** Contexts that begin with the same tokens (the few-shot examples
  every item of an MMLU subject shares, a task description) are found by sorting the token
  sequences (:func:`shared_prefixes`); such items go into one row as
  ``[prefix | ctx_1 rest | conts_1 | ctx_2 rest | conts_2 | ...]``: every item's tokens attend
  to the prefix and causally to their own context and continuation (positions continue from
  the prefix), so the prefix's keys/values are computed once for all those items, the same
  way an item's context is computed once for all its choices.
- **Batched across items, batch-independent.** Each unit (an item, or items sharing a
  prefix) is a row of its own, at offset 0, padded to a length that depends on its own length
  only (:func:`padded_length`: the next multiple of 4 tokens with the fused forward, 8 with the
  transformers forward, at least 16). The fused forward takes rows of several lengths in one
  pass (every linear on all the pass's tokens at once, attention per length:
  :meth:`judgecal.loglik.fused.FusedLlama.segments`); the transformers forward gets rows of one
  length a pass. So every unit is computed with the same shapes whatever else is in its pass:
  attention sees the same sequence length and positions, the row-wise linears the same rows,
  and the LM head always a multiple of 16 rows. On the CPU in float32 an item's
  log-likelihoods are then the same to the bit at every ``--batch-size``
  (tests/test_scorer_exactness.py; docs/mc.md "Exactness" says what this rests on). Passes
  are cut under a token budget, so the matmuls stay large enough to run fast.

torch/transformers are imported lazily; missing -> ModelError with the install hint.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

from judgecal.errors import ModelError, UsageError
from judgecal.loglik.split import EncodedGroup, Encoder

INSTALL_HINT = "install the local extra: pip install 'judgecal[local]'"
# tokens (rows x padded length) per forward pass with batch_size="auto"
DEFAULT_TOKEN_BUDGET = 2048
# a shared-prefix unit holds at most max(row_len, PREFIX_UNIT_FACTOR x prefix) tokens (HFScorer.units)
DEFAULT_ROW_LEN = 192
# a row is padded to the next multiple of this many tokens (at least MIN_ROW tokens): its
# length then depends on the unit alone, so that batch composition cannot change its numbers.
# The transformers forward batches rows of one length a pass: 8 keeps the passes few (4 was
# 6% slower on 200 HellaSwag items, 16 pads 18% on ARC-Easy); the fused forward takes several
# lengths a pass, so 4 pads less for no more passes (docs/performance.md, issue 33).
PAD_MULTIPLE = 8
PAD_MULTIPLE_FUSED = 4
# no row shorter than this: MKL's float32 GEMM (the transformers forward, the LM head) takes
# another code path, with another summation order, below 12 rows (measured with torch 2.13)
MIN_ROW = 16
FORWARDS = ("auto", "fused", "transformers")  # body forward: judgecal.loglik.fused or the model's own
LM_HEAD_CHUNK = 2048  # scored rows per output-projection chunk (bounds the float32 logits memory)
HEAD_MULTIPLE = 16  # LM-head rows are padded to a multiple of this (MKL's small-M path, see MIN_ROW)
MIN_SHARED_PREFIX = 32  # tokens: a shorter common context prefix is not worth a shared unit
PREFIX_UNIT_FACTOR = 4  # a shared-prefix unit holds at most max(row_len, factor x prefix) tokens


def _lcp(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def padded_length(n: int, multiple: int = PAD_MULTIPLE) -> int:
    """The row length a unit of ``n`` tokens is computed in: ``n`` rounded up to a multiple of
    ``multiple``, at least ``MIN_ROW``. A function of ``n`` alone, so that a unit's shapes
    (and with them its float rounding) do not depend on what else is in its forward pass. Pure."""
    return max(MIN_ROW, -(-n // multiple) * multiple)


def shared_prefixes(ctxs: Sequence[Sequence[int]], min_prefix: int = MIN_SHARED_PREFIX) -> list[tuple[int, list[int]]]:
    """Clusters of contexts (token id lists) that share a leading run of tokens, as
    ``(prefix length, [indices])``; every index appears in exactly one cluster, a lone context
    as ``(0, [i])``. The prefix of a cluster is shorter than each member's context (each keeps
    at least one token of its own: the one that predicts its continuations' first token) and at
    least ``min_prefix`` tokens. Clusters maximise the tokens saved, (members - 1) x prefix:
    the contexts are sorted, neighbours' common prefixes computed, and a run is split at its
    shortest common prefix when its parts together save more. Pure."""
    n = len(ctxs)
    order = sorted(range(n), key=lambda i: ctxs[i])
    lcp = [min(_lcp(ctxs[order[k]], ctxs[order[k + 1]]), len(ctxs[order[k]]) - 1, len(ctxs[order[k + 1]]) - 1)
           for k in range(n - 1)]
    out: list[tuple[int, list[int]]] = []

    def solve(lo: int, hi: int, depth: int) -> tuple[int, list[tuple[int, list[int]]]]:
        """Best clusters of order[lo..hi] (inclusive): (tokens saved, clusters)."""
        if lo == hi:
            return 0, [(0, [order[lo]])]
        m = min(lcp[lo:hi])
        own = (hi - lo) * m if m >= min_prefix else 0
        if depth > 100:  # a pathological chain: keep what this level gives
            return (own, [(m, order[lo:hi + 1])]) if own else (0, [(0, [i]) for i in order[lo:hi + 1]])
        parts, start = [], lo
        for k in range(lo, hi):
            if lcp[k] == m:
                parts.append((start, k))
                start = k + 1
        parts.append((start, hi))
        saved, clusters = 0, []
        for a, b in parts:
            s_, c_ = solve(a, b, depth + 1)
            saved += s_
            clusters.extend(c_)
        if own and own >= saved:
            return own, [(m, order[lo:hi + 1])]
        return saved, clusters

    k = 0
    while k < n:  # runs of neighbours sharing at least min_prefix tokens, solved one by one
        e = k
        while e < n - 1 and lcp[e] >= min_prefix:
            e += 1
        out.extend(solve(k, e, 0)[1])
        k = e + 1
    return out


@dataclass
class _Unit:
    """What one packed row segment holds: a shared ``prefix`` (token ids; empty for a lone
    group), the ``members`` (indices of groups) that continue it, each member's context after
    the prefix (``suffixes``, at least one token each), and the segment's ``length`` in tokens."""

    prefix: list[int]
    members: list[int]
    suffixes: list[list[int]]
    length: int


@dataclass
class ChoiceScore:
    """Scored continuation: ``ll`` (nats, summed over its tokens), ``n_tokens``, ``is_greedy``
    (every token is the argmax of its position), ``greedy_run`` (how many of its leading tokens
    are the argmax of their position: what greedy decoding shares with it)."""

    ll: float
    n_tokens: int
    is_greedy: bool
    greedy_run: int = 0


@dataclass
class RunStats:
    """Work done: ``tokens`` (real tokens through the body), ``padded_tokens`` (incl. padding),
    ``scored_rows`` (rows through the LM head), ``forward_passes``, ``boundary_fixes``; ``extra``:
    ``shared_prefix_units``, ``shared_prefix_tokens_saved``, ``truncated_requests`` (continuations
    whose context was left-truncated to the model's positions)."""

    tokens: int = 0
    padded_tokens: int = 0
    scored_rows: int = 0
    forward_passes: int = 0
    boundary_fixes: int = 0
    extra: dict = field(default_factory=dict)


def _import_torch():
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise ModelError(f"the local scorer needs torch and transformers ({exc}); {INSTALL_HINT}") from exc
    return torch, transformers


class HFScorer:
    """A transformers causal LM loaded from ``folder`` on ``device`` ("cpu", "cuda") in
    ``dtype`` ("float32", "bfloat16", "float16"); ``trust_remote_code`` is passed to
    transformers' ``from_pretrained`` (lm-eval's model argument of that name). Raises ModelError
    when it cannot load."""

    def __init__(self, folder: str | Path, *, device: str = "cpu", dtype: str = "float32",
                 forward: str = "auto", trust_remote_code: bool = False):
        torch, transformers = _import_torch()
        self.torch = torch
        dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
        if dtype not in dtypes:
            raise UsageError(f"--dtype must be one of {', '.join(dtypes)}, got {dtype!r}")
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise UsageError("--device cuda: no CUDA GPU is available to torch")
        try:
            self.device = torch.device(device)
        except RuntimeError:
            raise UsageError(f"--device must be cpu, cuda or cuda:N, got {device!r}") from None
        self.dtype_name = dtype
        try:
            transformers.utils.logging.disable_progress_bar()  # no "Loading weights" bar in CLI output
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder),
                                                                        trust_remote_code=trust_remote_code)
            self.model = transformers.AutoModelForCausalLM.from_pretrained(
                str(folder), dtype=dtypes[dtype], attn_implementation="sdpa", trust_remote_code=trust_remote_code)
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot load the model in {folder}: {exc}") from exc
        self.model.to(self.device).eval()
        self.body = self.model.get_decoder() if hasattr(self.model, "get_decoder") else self.model.base_model
        self.head = self.model.get_output_embeddings()
        if self.head is None:
            raise ModelError(f"{folder}: the model has no output embeddings (not a causal LM?)")
        cfg = self.model.config
        self.softcap = getattr(cfg, "final_logit_softcapping", None)
        self.max_length = int(getattr(cfg, "max_position_embeddings", 0) or 2048)
        self.encoder = Encoder(self.tokenizer)
        self.row_len = DEFAULT_ROW_LEN  # smallest cap of a shared-prefix unit (tokens); benchmarks tune it
        self.token_budget = DEFAULT_TOKEN_BUDGET  # tokens per forward pass with batch_size="auto"
        if forward not in FORWARDS:
            raise UsageError(f"--forward must be one of {', '.join(FORWARDS)}, got {forward!r}")
        from judgecal.loglik import fused

        if forward == "fused" and not fused.supports(self.model):
            raise UsageError(f"--forward fused: {folder} is not a plain Llama decoder "
                             f"(model_type {getattr(cfg, 'model_type', None)!r}); use --forward transformers")
        self.fused = fused.FusedLlama(self.model) if forward != "transformers" and fused.supports(self.model) else None
        self.forward_name = "fused" if self.fused is not None else "transformers"
        self.pad_multiple = PAD_MULTIPLE_FUSED if self.fused is not None else PAD_MULTIPLE
        self.n_body_params = sum(p.numel() for n, p in self.body.named_parameters() if "embed" not in n)
        self.n_head_params = self.head.weight.numel()

    # ------------------------------------------------------------------ batching
    def _truncate(self, g: EncodedGroup) -> EncodedGroup:
        """Left-truncate the context so that context + longest continuation fits the model's
        positions (lm-eval truncates ``(ctx + cont)[-(max_length + 1):]`` the same way)."""
        longest = max(len(c) for c in g.conts)
        room = self.max_length + 1 - longest
        if room < 1:
            raise ModelError(f"a continuation of {longest} tokens exceeds the model's {self.max_length} positions")
        if len(g.ctx) > room:
            return EncodedGroup(g.ctx[-room:], g.conts, g.boundary_fixes)
        return g

    @staticmethod
    def plan_batches(lengths: Sequence[int], batch_size: int | str, token_budget: int = DEFAULT_TOKEN_BUDGET,
                     mixed: bool = False, multiple: int = PAD_MULTIPLE) -> list[list[int]]:
        """Forward passes as lists of unit indices (``lengths``: tokens per unit), longest
        first; every unit is a row of its own, padded to :func:`padded_length` (``multiple``).
        ``batch_size="auto"``: passes of at most ``token_budget`` tokens (padded; at least one
        row a pass). An int: at most that many units a pass. ``mixed``: a pass may hold rows of
        several padded lengths (the fused forward: attention per length); else one padded
        length a pass (the transformers forward's (B, L) batch; ``token_budget`` then counts
        rows x that length). Pure. Raises UsageError for an int below 1."""
        if batch_size == "auto":
            cap = None
        else:
            cap = int(batch_size)
            if cap < 1:
                raise UsageError(f"--batch-size must be >= 1 or auto, got {batch_size!r}")
        width = [padded_length(n, multiple) for n in lengths]
        order = sorted(range(len(lengths)), key=lambda i: (-width[i], -lengths[i]))
        passes: list[list[int]] = []
        cur: list[int] = []
        used = 0
        for i in order:
            w = width[i]
            full = (len(cur) >= cap) if cap is not None else (used + w > token_budget)
            if cur and (full or (not mixed and width[cur[0]] != w)):
                passes.append(cur)
                cur, used = [], 0
            cur.append(i)
            used += w
        if cur:
            passes.append(cur)
        return passes

    def units(self, groups: Sequence[EncodedGroup], share_prefixes: bool = True) -> list[_Unit]:
        """The groups as packing units: groups whose contexts share at least
        ``MIN_SHARED_PREFIX`` leading tokens (:func:`shared_prefixes`) become shared-prefix
        units of at most ``max(row_len, PREFIX_UNIT_FACTOR x prefix)`` tokens (a cluster too
        large for one is cut in several, each with the prefix); every other group is a unit of
        its own (no prefix). ``share_prefixes=False``: every group alone."""
        def alone(i: int) -> _Unit:
            g = groups[i]
            return _Unit([], [i], [g.ctx], len(g.ctx) + sum(len(c) for c in g.conts))

        if not share_prefixes:
            return [alone(i) for i in range(len(groups))]
        out: list[_Unit] = []
        for plen, members in shared_prefixes([g.ctx for g in groups]):
            if plen == 0 or len(members) < 2:
                out.extend(alone(i) for i in members)
                continue
            cap = max(self.row_len, PREFIX_UNIT_FACTOR * plen)
            prefix = list(groups[members[0]].ctx[:plen])
            cur: _Unit | None = None
            for i in members:
                g = groups[i]
                size = len(g.ctx) - plen + sum(len(c) for c in g.conts)
                if cur is None or cur.length + size > cap:
                    cur = _Unit(prefix, [], [], plen)
                    out.append(cur)
                cur.members.append(i)
                cur.suffixes.append(list(g.ctx[plen:]))
                cur.length += size
        return [u if len(u.members) > 1 or not u.prefix else alone(u.members[0]) for u in out]

    def score_groups(self, groups: Sequence[EncodedGroup], *, batch_size: int | str = "auto",
                     token_budget: int | None = None, stats: RunStats | None = None,
                     progress: Any = None, share_prefixes: bool = True) -> list[list[ChoiceScore]]:
        """Score every continuation of every group. Returns, per group, one
        :class:`ChoiceScore` per continuation (ll in nats). ``token_budget`` (tokens per
        forward pass with ``batch_size="auto"``) defaults to ``self.token_budget``.
        ``share_prefixes``: groups whose contexts begin with the same tokens share that
        prefix's computation (:meth:`units`; with ``batch_size="auto"`` only: an int batch
        size counts groups a pass, so each group is scored alone). ``progress(n_done)`` is called after each forward
        pass when given (groups done). A continuation a group lists twice (the same token ids) is
        scored once and copied, so that duplicate choices tie exactly, as in lm-eval."""
        torch = self.torch
        stats = stats if stats is not None else RunStats()
        # a continuation listed twice in a group (duplicate choices) is scored once and copied:
        # a second copy later in the row would sit at other offsets and round differently
        # (up to ~1e-5 nats), so that duplicates would not tie as they do in lm-eval
        copies: list[list[int]] = []
        deduped: list[EncodedGroup] = []
        for g in groups:
            first: dict[tuple[int, ...], int] = {}
            copies.append([first.setdefault(tuple(c), len(first)) for c in g.conts])
            deduped.append(g if len(first) == len(g.conts)
                           else EncodedGroup(g.ctx, [list(c) for c in first], g.boundary_fixes))
        groups = [self._truncate(g) for g in deduped]
        # requests whose context was cut on the left to fit the model's positions (lm-eval cuts them
        # the same way, without a word): counted, so that the run's diagnostics can say so
        stats.extra["truncated_requests"] = stats.extra.get("truncated_requests", 0) + sum(
            len(idx) for idx, orig, g in zip(copies, deduped, groups) if len(g.ctx) < len(orig.ctx))
        units = self.units(groups, share_prefixes and batch_size == "auto")  # an int batch_size counts groups
        lengths = [u.length for u in units]
        out: list[list[ChoiceScore] | None] = [None] * len(groups)
        stats.extra["shared_prefix_units"] = stats.extra.get("shared_prefix_units", 0) + sum(
            1 for u in units if u.prefix)
        stats.extra["shared_prefix_tokens_saved"] = stats.extra.get("shared_prefix_tokens_saved", 0) + sum(
            (len(u.members) - 1) * len(u.prefix) for u in units if u.prefix)
        with torch.inference_mode():
            budget = self.token_budget if token_budget is None else token_budget
            for rows in self.plan_batches(lengths, batch_size, budget, mixed=self.fused is not None,
                                          multiple=self.pad_multiple):
                res = self._forward([units[i] for i in rows], groups, stats)
                for gi, r in res.items():
                    out[gi] = r
                if progress is not None:
                    progress(sum(len(units[i].members) for i in rows))
        stats.boundary_fixes += sum(g.boundary_fixes for g in groups)
        return [row if len(idx) == len(row) else [replace(row[k]) for k in idx]  # type: ignore[arg-type]
                for row, idx in zip(out, copies)]

    def _forward(self, packed: Sequence[_Unit], groups: Sequence[EncodedGroup],
                 stats: RunStats) -> dict[int, list[ChoiceScore]]:
        """One forward pass over ``packed`` units, each a row of its own at offset 0,
        :func:`padded_length` long, rows of equal length consecutive (:meth:`plan_batches`).
        The fused forward takes rows of several lengths in one pass (attention per length);
        the transformers forward gets one (B, L) batch, so all rows must be equally long.
        Returns group index -> one score per continuation."""
        torch = self.torch
        widths = [padded_length(u.length, self.pad_multiple) for u in packed]
        starts = [0]
        for w in widths:
            starts.append(starts[-1] + w)
        T = starts[-1]
        ids = torch.zeros(T, dtype=torch.long)
        pos = torch.zeros(T, dtype=torch.long)
        seg = torch.full((T,), -1, dtype=torch.long)  # 0 = context, j+1 = continuation j, -1 = pad
        item = torch.full((T,), -1, dtype=torch.long)  # which slot of the row (a group or a prefix) a token is
        pfx = torch.full((T,), -1, dtype=torch.long)  # the slot of the shared prefix a group's token continues
        src: list[int] = []  # flat positions (over the pass's T tokens) whose hidden state the LM head reads
        tgt_row: list[int] = []  # for each scored token: its row among the gathered positions
        tgt_tok: list[int] = []
        owner: list[tuple[int, int]] = []
        done: list[int] = []
        for u, base, w in zip(packed, starts, widths):
            o = base
            slot = 0
            P = len(u.prefix)
            pslot = -1
            if P:
                pslot = slot
                slot += 1
                ids[o:o + P] = torch.tensor(u.prefix)
                pos[o:o + P] = torch.arange(P)
                seg[o:o + P] = 0
                item[o:o + P] = pslot
                o += P
            for gi, suffix in zip(u.members, u.suffixes):
                g = groups[gi]
                n = len(suffix)
                size = n + sum(len(c) for c in g.conts)
                ids[o:o + n] = torch.tensor(suffix)
                pos[o:o + n] = torch.arange(P, P + n)
                seg[o:o + n] = 0
                item[o:o + size] = slot
                pfx[o:o + size] = pslot
                shared = len(src)  # the last context token predicts every continuation's first token
                src.append(o + n - 1)
                o += n
                for j, c in enumerate(g.conts):
                    k = len(c)
                    ids[o:o + k] = torch.tensor(c)
                    pos[o:o + k] = torch.arange(P + n, P + n + k)
                    seg[o:o + k] = j + 1
                    rows_ = [shared]
                    for t in range(k - 1):
                        rows_.append(len(src))
                        src.append(o + t)
                    tgt_row.extend(rows_)
                    tgt_tok.extend(c)
                    owner.extend([(gi, j)] * k)
                    o += k
                slot += 1
                done.append(gi)
            pos[o:base + w] = torch.arange(base + w - o)  # padding: attends to itself and earlier padding only
            stats.tokens += o - base
        stats.padded_tokens += T
        stats.scored_rows += len(src)
        stats.forward_passes += 1
        parts = []  # (first token, rows, width, mask): consecutive rows of one width
        b = 0
        while b < len(packed):
            e = b
            while e < len(packed) and widths[e] == widths[b]:
                e += 1
            w, sl = widths[b], slice(starts[b], starts[e])
            rows = e - b
            sg, it, pf = seg[sl].view(rows, w), item[sl].view(rows, w), pfx[sl].view(rows, w)
            causal = torch.ones((w, w), dtype=torch.bool).tril()
            same_item = it[:, :, None] == it[:, None, :]
            same_seg = sg[:, :, None] == sg[:, None, :]
            to_ctx = (sg[:, None, :] == 0) & (sg[:, :, None] > 0)
            to_prefix = (it[:, None, :] == pf[:, :, None]) & (pf[:, :, None] >= 0)
            mask = (causal[None] & ((same_item & (same_seg | to_ctx)) | to_prefix))[:, None]  # (rows, 1, w, w)
            parts.append((starts[b], rows, w, mask))
            b = e
        dev = self.device
        if self.fused is not None:
            hidden = self.fused.segments(ids.to(dev), pos.to(dev), [(r, w, m.to(dev)) for _, r, w, m in parts])
        else:
            if len(parts) != 1:
                raise AssertionError("the transformers forward takes rows of one length a pass")
            _, rows, w, mask = parts[0]
            hidden = self.body(input_ids=ids.view(rows, w).to(dev), attention_mask=mask.to(dev),
                               position_ids=pos.view(rows, w).to(dev), use_cache=False).last_hidden_state
            hidden = hidden.reshape(T, -1)
        extra = -len(src) % HEAD_MULTIPLE  # repeat a real row: every LM-head matmul has a multiple of 16 rows
        gathered = hidden[torch.tensor(src + [src[0]] * extra, device=dev)]
        tgt_row_t = torch.tensor(tgt_row, device=dev)
        tgt_tok_t = torch.tensor(tgt_tok, device=dev)
        token_lp = torch.empty(len(tgt_tok), dtype=torch.float32, device=dev)
        greedy_tok = torch.empty(len(src) + extra, dtype=torch.long, device=dev)
        for s in range(0, len(src) + extra, LM_HEAD_CHUNK):
            e = min(s + LM_HEAD_CHUNK, len(src) + extra)
            logits = self.head(gathered[s:e]).float()  # float32 log-softmax whatever the dtype
            if self.softcap:
                logits = torch.tanh(logits / self.softcap) * self.softcap
            logp = torch.log_softmax(logits, dim=-1)
            greedy_tok[s:e] = logp.argmax(dim=-1)
            sel = (tgt_row_t >= s) & (tgt_row_t < e)
            token_lp[sel] = logp[tgt_row_t[sel] - s, tgt_tok_t[sel]]
        is_hit = (greedy_tok[tgt_row_t] == tgt_tok_t).cpu().tolist()
        token_lp_list = token_lp.double().cpu().tolist()
        res: dict[int, list[list]] = {gi: [[0.0, 0, True, 0] for _ in groups[gi].conts] for gi in done}
        for (gi, j), lp, hit in zip(owner, token_lp_list, is_hit):
            r = res[gi][j]
            r[0] += lp
            r[1] += 1
            r[2] = r[2] and bool(hit)
            if r[2]:
                r[3] += 1
        return {gi: [ChoiceScore(float(a), int(n), bool(h), int(k)) for a, n, h, k in g] for gi, g in res.items()}
