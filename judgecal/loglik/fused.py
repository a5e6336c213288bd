"""A leaner inference forward for Llama-architecture decoders (SmolLM2, Llama 2/3, ...).

The scorer's packed rows go through the model body many times; on a CPU about a fifth of the
eager transformers forward is elementwise work around the matmuls (RMSNorm in several passes,
rotary embeddings through ``rotate_half`` copies, ``repeat_kv`` copies for grouped-query
attention, separate q/k/v and gate/up projections). This module computes the *same* function
with fewer passes over memory, from the model's own weights:

- q, k and v come from one matmul with the three weights stacked (and gate/up from another);
- the rotary embedding is one complex multiplication: the rows of ``W_q`` and ``W_k`` are
  permuted once, inside each head, from the ``[x_0..x_{d/2-1}, x_{d/2}..x_{d-1}]`` halves that
  ``rotate_half`` pairs to interleaved pairs ``(x_i, x_{i+d/2})``, so that
  ``q * cos + rotate_half(q) * sin`` (transformers' ``apply_rotary_pos_emb``) becomes
  ``(q_i + i q_{i+d/2}) * (cos_i + i sin_i)``. Permuting q and k the same way inside a head
  leaves every attention score ``q . k`` unchanged; v and the output projection are untouched;
- RMSNorm is ``torch.nn.functional.rms_norm`` (one kernel), attention is
  ``scaled_dot_product_attention`` with ``enable_gqa`` (no copies of the shared k/v heads);
- on a CPU in float32 the projections are oneDNN linears (``mkldnn._linear_pointwise``, the
  ops torch.compile's CPU backend emits) on weights packed once in oneDNN's preferred layout,
  with the SiLU, the gate x up product and the residual additions fused into the matmuls;
  elsewhere (CUDA, bfloat16, a build without oneDNN) ``F.linear`` with the same structure.
- rows of several lengths go through one pass (:meth:`FusedLlama.segments`): the tokens of
  all rows, without padding between them, through every linear at once, and attention per
  group of equally long rows, so a row's numbers do not depend on the other rows' lengths.

The cos/sin tables come from the model's own rotary module, so rope scaling variants are
honoured. Only plain Llama blocks are accepted (:func:`supports`); anything else (biases,
other activations, other architectures) keeps the transformers forward. The results equal the
transformers forward up to float32 rounding: oneDNN's GEMM rounds about twice as far from the
exact product as MKL's, so per-choice log-likelihoods sit within ~1e-4 nats of a float64 run
(transformers forward: ~6e-5). tests/test_mc_fused.py checks hidden states against the
transformers body and log-likelihoods against float64; tests/test_loglik_parity.py checks
both forwards against lm-evaluation-harness.
"""

from __future__ import annotations

from typing import Any


def supports(model: Any) -> bool:
    """True when ``model`` (a transformers causal LM) is a plain Llama decoder this module
    computes exactly: model_type "llama", SiLU MLP without biases, no attention bias, even
    head dimension, and every layer the stock ``LlamaDecoderLayer``."""
    cfg = getattr(model, "config", None)
    if cfg is None or getattr(cfg, "model_type", None) != "llama":
        return False
    if getattr(cfg, "attention_bias", False) or getattr(cfg, "mlp_bias", False):
        return False
    if getattr(cfg, "hidden_act", "silu") != "silu" or getattr(cfg, "pretraining_tp", 1) != 1:
        return False
    head = model.get_output_embeddings()
    if head is None or getattr(head, "bias", None) is not None:
        return False
    body = model.get_decoder()
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    if head_dim % 2:
        return False
    return all(type(layer).__name__ == "LlamaDecoderLayer" for layer in body.layers)


def _onednn_linear(torch):
    """oneDNN's fused linear ops on the CPU (``torch.ops.mkldnn._linear_pointwise``: matmul with a
    pre-packed weight and an activation or a binary post-op in the same kernel), or None when
    this torch build lacks them. The op names are the ones torch.compile's CPU backend emits."""
    try:
        if not torch.backends.mkldnn.is_available():
            return None
        op = torch.ops.mkldnn._linear_pointwise
        x, w = torch.ones(2, 4), torch.ones(3, 4)
        wm = w.to_mkldnn()
        op(x, wm, None, "swish", [], "")
        op.binary(x, torch.ones(2, 3), wm, None, "mul")
        op.binary(x, torch.ones(2, 3), wm, None, "add")
        return op
    except (AttributeError, RuntimeError):
        return None


def _pack_onednn(w):
    """A weight in the blocked layout oneDNN's linear prefers (``mkldnn._reorder_linear_weight``,
    as torch.compile's CPU backend packs them; ~5% faster than a plain ``to_mkldnn()`` copy,
    same results), or the plain oneDNN copy where that op is missing."""
    import torch

    try:
        return torch.ops.mkldnn._reorder_linear_weight(w, None)
    except (AttributeError, RuntimeError):
        return w.to_mkldnn()


class FusedLlama:
    """The body of a Llama causal LM as stacked weights (built once from ``model``; the
    original weights are not modified). Call it like the body: ``(input_ids (B, L) long,
    attention_mask (B, 1, L, L) bool, True = attend, position_ids (B, L) long)`` -> final
    hidden states (B, L, hidden) after the last RMSNorm, in the model's dtype.

    On a CPU with oneDNN the projections run as oneDNN linears on pre-packed weights with the
    SiLU, the gate*up product and the residual additions fused into them; elsewhere (CUDA, or
    a build without oneDNN) as ``torch.nn.functional.linear`` with in-place elementwise ops."""

    def __init__(self, model: Any, *, onednn: bool = True):
        import torch

        self.torch = torch
        body = model.get_decoder()
        cfg = model.config
        self.body = body
        self.n_heads = cfg.num_attention_heads
        self.n_kv = cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.n_heads
        self.eps = float(cfg.rms_norm_eps)
        d = self.head_dim
        param = next(body.parameters())
        cpu32 = param.device.type == "cpu" and param.dtype == torch.float32
        self.onednn = _onednn_linear(torch) if onednn and cpu32 else None
        pack = _pack_onednn if self.onednn is not None else (lambda w: w)
        # inside each head: new row 2i <- old row i, new row 2i+1 <- old row i + d/2
        perm = torch.stack([torch.arange(d // 2), torch.arange(d // 2, d)], dim=1).reshape(-1)
        self.layers = []
        with torch.no_grad():
            for layer in body.layers:
                a, m = layer.self_attn, layer.mlp
                wq = a.q_proj.weight.view(self.n_heads, d, -1)[:, perm].reshape(a.q_proj.weight.shape)
                wk = a.k_proj.weight.view(self.n_kv, d, -1)[:, perm].reshape(a.k_proj.weight.shape)
                self.layers.append((
                    layer.input_layernorm.weight,
                    pack(torch.cat([wq, wk, a.v_proj.weight]).contiguous()),
                    pack(a.o_proj.weight.contiguous()),
                    layer.post_attention_layernorm.weight,
                    pack(m.gate_proj.weight.contiguous()),
                    pack(m.up_proj.weight.contiguous()),
                    pack(m.down_proj.weight.contiguous()),
                ))
        self.q_size = self.n_heads * d
        self.kv_size = self.n_kv * d
        self.scaling = body.layers[0].self_attn.scaling

    def __call__(self, input_ids, attention_mask, position_ids):
        B, L = input_ids.shape
        out = self.segments(input_ids.reshape(B * L), position_ids.reshape(B * L), [(B, L, attention_mask)])
        return out.view(B, L, -1)

    def segments(self, input_ids, position_ids, parts):
        """The body over ``input_ids`` / ``position_ids`` (T,) cut into consecutive segments,
        ``parts``: ``(rows, width, attention_mask (rows, 1, width, width) bool)`` each, rows x
        width tokens (T in all). Every linear, norm and rotary runs on the T tokens at once (they
        compute each token's row alone); attention runs per segment, among the rows of one
        width. Returns the final hidden states (T, hidden) after the last RMSNorm."""
        torch = self.torch
        F = torch.nn.functional
        H, KV, d = self.n_heads, self.n_kv, self.head_dim
        x = self.body.embed_tokens(input_ids[None])  # (1, T, D)
        cos, sin = self.body.rotary_emb(x, position_ids[None])  # (1, T, d), halves duplicated
        rot = torch.complex(cos[0, :, : d // 2].float(), sin[0, :, : d // 2].float()).unsqueeze(1)  # (T, 1, d/2)
        D = x.shape[-1]
        x = x[0]
        bounds = []
        start = 0
        for rows, width, mask in parts:
            bounds.append((start, rows, width, mask))
            start += rows * width
        op = self.onednn
        for w_in, w_qkv, w_o, w_post, w_gate, w_up, w_down in self.layers:
            h = F.rms_norm(x, (D,), w_in, self.eps)
            qkv = op(h, w_qkv, None, "none", [], "") if op else F.linear(h, w_qkv)
            outs = []
            for s0, rows, width, mask in bounds:
                n = rows * width
                seg = qkv[s0:s0 + n].view(rows, width, -1)
                r = rot[s0:s0 + n].view(rows, width, 1, d // 2)
                q = self._rope(seg[..., : self.q_size], r, H)
                k = self._rope(seg[..., self.q_size:self.q_size + self.kv_size], r, KV)
                v = seg[..., self.q_size + self.kv_size:].view(rows, width, KV, d).transpose(1, 2)
                o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scaling, enable_gqa=H != KV)
                outs.append(o.transpose(1, 2).reshape(n, self.q_size))
            o = outs[0] if len(outs) == 1 else torch.cat(outs)
            if op:
                x = op.binary(o, x, w_o, None, "add")
                h = F.rms_norm(x, (D,), w_post, self.eps)
                act = op.binary(h, op(h, w_gate, None, "swish", [], ""), w_up, None, "mul")
                x = op.binary(act, x, w_down, None, "add")
            else:
                x = x + F.linear(o, w_o)
                h = F.rms_norm(x, (D,), w_post, self.eps)
                act = F.silu(F.linear(h, w_gate)).mul_(F.linear(h, w_up))
                x = x + F.linear(act, w_down)
        return self.body.norm(x)

    def _rope(self, t, rot, heads):
        """(B, L, heads*d) interleaved pairs -> rotated (B, heads, L, d) in ``t``'s dtype."""
        torch = self.torch
        B, L, _ = t.shape
        c = torch.view_as_complex(t.float().reshape(B, L, heads, self.head_dim // 2, 2))
        return torch.view_as_real(c * rot).reshape(B, L, heads, self.head_dim).to(t.dtype).transpose(1, 2)
