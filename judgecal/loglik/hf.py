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
- **Batched across items by length.** Rows are sorted by packed length and batched under a
  token budget, so padding is small and the matmuls are large enough to run fast on CPU.

torch/transformers are imported lazily; missing -> ModelError with the install hint.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from judgecal.errors import ModelError, UsageError
from judgecal.loglik.split import EncodedGroup, Encoder

INSTALL_HINT = "install the local extra: pip install 'judgecal[local]'"
# tokens (real tokens, rows x packed length) per forward pass with batch_size="auto". 2048 with
# 192-token rows measured 9% faster than 4096 with 256-token rows on 200 HellaSwag items (2 CPU
# threads; docs/performance.md): less padding, and the activations stay closer to the caches.
DEFAULT_TOKEN_BUDGET = 2048
DEFAULT_ROW_LEN = 192  # tokens per packed row (several items share a row, block-diagonal mask)
FORWARDS = ("auto", "fused", "transformers")  # body forward: judgecal.loglik.fused or the model's own
LM_HEAD_CHUNK = 2048  # scored rows per output-projection chunk (bounds the float32 logits memory)
MIN_SHARED_PREFIX = 32  # tokens: a shorter common context prefix is not worth a shared unit
PREFIX_UNIT_FACTOR = 4  # a shared-prefix unit holds at most max(row_len, factor x prefix) tokens


def _lcp(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


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
    ``scored_rows`` (rows through the LM head), ``forward_passes``, ``boundary_fixes``."""

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
    ``dtype`` ("float32", "bfloat16", "float16"). Raises ModelError when it cannot load."""

    def __init__(self, folder: str | Path, *, device: str = "cpu", dtype: str = "float32",
                 forward: str = "auto"):
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
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
            self.model = transformers.AutoModelForCausalLM.from_pretrained(
                str(folder), dtype=dtypes[dtype], attn_implementation="sdpa")
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
        self.row_len = DEFAULT_ROW_LEN  # tokens per packed row; an attribute so benchmarks can tune it
        self.token_budget = DEFAULT_TOKEN_BUDGET  # tokens per forward pass with batch_size="auto"
        if forward not in FORWARDS:
            raise UsageError(f"--forward must be one of {', '.join(FORWARDS)}, got {forward!r}")
        from judgecal.loglik import fused

        if forward == "fused" and not fused.supports(self.model):
            raise UsageError(f"--forward fused: {folder} is not a plain Llama decoder "
                             f"(model_type {getattr(cfg, 'model_type', None)!r}); use --forward transformers")
        self.fused = fused.FusedLlama(self.model) if forward != "transformers" and fused.supports(self.model) else None
        self.forward_name = "fused" if self.fused is not None else "transformers"
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
                     row_len: int = DEFAULT_ROW_LEN) -> list[list[list[int]]]:
        """Forward passes as lists of packed rows of group indices (``lengths``: tokens per
        group). Pure.

        ``batch_size="auto"``: every group is packed into rows of ``row_len`` tokens first
        (:meth:`pack_rows`, over the whole task, so that long and short items share rows and
        padding stays near 1%), then the rows, fullest first, are cut into passes of at most
        ``token_budget`` tokens (rows x the pass's longest row; at least one row a pass).
        An int ``batch_size``: the groups, longest first, in passes of that many groups, each
        pass packed on its own. Raises UsageError for an int below 1."""
        if batch_size != "auto":
            cap = int(batch_size)
            if cap < 1:
                raise UsageError(f"--batch-size must be >= 1 or auto, got {batch_size!r}")
            order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
            chunks = [order[s:s + cap] for s in range(0, len(order), cap)]
            return [[[chunk[i] for i in row] for row in HFScorer.pack_rows([lengths[i] for i in chunk], row_len)]
                    for chunk in chunks]
        rows = HFScorer.pack_rows(lengths, row_len)
        fill = [sum(lengths[i] for i in row) for row in rows]
        batches: list[list[list[int]]] = []
        cur: list[list[int]] = []
        width = 0
        for r in sorted(range(len(rows)), key=lambda r: -fill[r]):
            if cur and (len(cur) + 1) * width > token_budget:
                batches.append(cur)
                cur = []
            if not cur:
                width = fill[r]
            cur.append(rows[r])
        if cur:
            batches.append(cur)
        return batches

    @staticmethod
    def pack_rows(lengths: Sequence[int], row_len: int) -> list[list[int]]:
        """Best-fit-decreasing packing of groups (indices into ``lengths``) into rows of at
        most ``max(row_len, longest)`` tokens: each group, longest first, goes into the row
        whose free space fits it most tightly (ties: the earlier row). O(n log n) searches.
        Pure."""
        if not lengths:
            return []
        cap = max(row_len, max(lengths))
        rows: list[list[int]] = []
        free: list[tuple[int, int]] = []  # (free tokens, row), sorted; full rows are dropped
        for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
            n = lengths[i]
            k = bisect.bisect_left(free, (n, -1))
            if k < len(free):
                room, r = free.pop(k)
                rows[r].append(i)
            else:
                room, r = cap, len(rows)
                rows.append([i])
            if room > n:
                bisect.insort(free, (room - n, r))
        return rows

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
        pass when given (groups done)."""
        torch = self.torch
        stats = stats if stats is not None else RunStats()
        groups = [self._truncate(g) for g in groups]
        units = self.units(groups, share_prefixes and batch_size == "auto")  # an int batch_size counts groups
        lengths = [u.length for u in units]
        out: list[list[ChoiceScore] | None] = [None] * len(groups)
        stats.extra["shared_prefix_units"] = stats.extra.get("shared_prefix_units", 0) + sum(
            1 for u in units if u.prefix)
        stats.extra["shared_prefix_tokens_saved"] = stats.extra.get("shared_prefix_tokens_saved", 0) + sum(
            (len(u.members) - 1) * len(u.prefix) for u in units if u.prefix)
        with torch.inference_mode():
            budget = self.token_budget if token_budget is None else token_budget
            for rows in self.plan_batches(lengths, batch_size, budget, self.row_len):
                res = self._forward([[units[i] for i in row] for row in rows], groups, stats)
                for gi, r in res.items():
                    out[gi] = r
                if progress is not None:
                    progress(sum(len(units[i].members) for row in rows for i in row))
        stats.boundary_fixes += sum(g.boundary_fixes for g in groups)
        return out  # type: ignore[return-value]

    def _forward(self, packed: Sequence[Sequence[_Unit]], groups: Sequence[EncodedGroup],
                 stats: RunStats) -> dict[int, list[ChoiceScore]]:
        """One forward pass over ``packed`` rows (each a list of units sharing one row of the
        batch). Returns group index -> one score per continuation."""
        torch = self.torch
        B = len(packed)
        L = max(sum(u.length for u in row) for row in packed)
        ids = torch.zeros((B, L), dtype=torch.long)
        pos = torch.zeros((B, L), dtype=torch.long)
        seg = torch.full((B, L), -1, dtype=torch.long)  # 0 = context, j+1 = continuation j, -1 = pad
        item = torch.full((B, L), -1, dtype=torch.long)  # which slot of the row (a group or a prefix) a token is
        pfx = torch.full((B, L), -1, dtype=torch.long)  # the slot of the shared prefix a group's token continues
        src_b: list[int] = []
        src_p: list[int] = []
        tgt_row: list[int] = []  # for each scored token: its row among the gathered positions
        tgt_tok: list[int] = []
        owner: list[tuple[int, int]] = []
        done: list[int] = []
        for b, row in enumerate(packed):
            o = 0
            slot = 0
            for u in row:
                P = len(u.prefix)
                pslot = -1
                if P:
                    pslot = slot
                    slot += 1
                    ids[b, o:o + P] = torch.tensor(u.prefix)
                    pos[b, o:o + P] = torch.arange(P)
                    seg[b, o:o + P] = 0
                    item[b, o:o + P] = pslot
                    o += P
                for gi, suffix in zip(u.members, u.suffixes):
                    g = groups[gi]
                    n = len(suffix)
                    size = n + sum(len(c) for c in g.conts)
                    ids[b, o:o + n] = torch.tensor(suffix)
                    pos[b, o:o + n] = torch.arange(P, P + n)
                    seg[b, o:o + n] = 0
                    item[b, o:o + size] = slot
                    pfx[b, o:o + size] = pslot
                    shared = len(src_b)  # the last context token predicts every continuation's first token
                    src_b.append(b)
                    src_p.append(o + n - 1)
                    o += n
                    for j, c in enumerate(g.conts):
                        k = len(c)
                        ids[b, o:o + k] = torch.tensor(c)
                        pos[b, o:o + k] = torch.arange(P + n, P + n + k)
                        seg[b, o:o + k] = j + 1
                        rows_ = [shared]
                        for t in range(k - 1):
                            rows_.append(len(src_b))
                            src_b.append(b)
                            src_p.append(o + t)
                        tgt_row.extend(rows_)
                        tgt_tok.extend(c)
                        owner.extend([(gi, j)] * k)
                        o += k
                    slot += 1
                    done.append(gi)
            pos[b, o:] = torch.arange(L - o)  # padding: attends to itself and earlier padding only
            stats.tokens += o
        stats.padded_tokens += B * L
        stats.scored_rows += len(src_b)
        stats.forward_passes += 1
        causal = torch.ones((L, L), dtype=torch.bool).tril()
        same_item = item[:, :, None] == item[:, None, :]
        same_seg = seg[:, :, None] == seg[:, None, :]
        to_ctx = (seg[:, None, :] == 0) & (seg[:, :, None] > 0)
        to_prefix = (item[:, None, :] == pfx[:, :, None]) & (pfx[:, :, None] >= 0)
        mask = (causal[None] & ((same_item & (same_seg | to_ctx)) | to_prefix))[:, None]  # (B, 1, L, L), True = attend
        dev = self.device
        if self.fused is not None:
            hidden = self.fused(ids.to(dev), mask.to(dev), pos.to(dev))
        else:
            hidden = self.body(input_ids=ids.to(dev), attention_mask=mask.to(dev), position_ids=pos.to(dev),
                               use_cache=False).last_hidden_state
        gathered = hidden[torch.tensor(src_b, device=dev), torch.tensor(src_p, device=dev)]
        tgt_row_t = torch.tensor(tgt_row, device=dev)
        tgt_tok_t = torch.tensor(tgt_tok, device=dev)
        token_lp = torch.empty(len(tgt_tok), dtype=torch.float32, device=dev)
        greedy_tok = torch.empty(len(src_b), dtype=torch.long, device=dev)
        for s in range(0, len(src_b), LM_HEAD_CHUNK):
            e = min(s + LM_HEAD_CHUNK, len(src_b))
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
