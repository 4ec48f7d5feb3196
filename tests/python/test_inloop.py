"""MAC-Attention in a model's forward pass (mactune.inloop): a tiny random model of tinylm's
architecture built here, and the real tinylm where its file exists."""

import math

import numpy as np
import pytest

import mactune
from mactune import inloop
from conftest import SOURCE_DIR, TINYLM

TINY = inloop.Config(vocab=256, n_layers=2, d_model=128, n_heads=4, n_kv_heads=2, head_dim=64,
                     ffn_hidden=192, rope_theta=10000.0)


def numpy_forward(model, tokens):
    """An independent float64 forward of the same architecture: the oracle for the loop."""
    c, w = model.config, {k: v.astype(np.float64) for k, v in model.w.items()}
    T = len(tokens)

    def norm(x, g):
        return x / np.sqrt(np.mean(x * x, -1, keepdims=True) + c.norm_eps) * g

    def rot(x):  # [T, H, D]
        D = x.shape[-1]
        inv = c.rope_theta ** (-np.arange(0, D, 2) / D)
        ang = np.arange(T)[:, None, None] * np.concatenate([inv, inv])
        return x * np.cos(ang) + np.concatenate([-x[..., D // 2:], x[..., :D // 2]], -1) * np.sin(ang)

    x = w["emb.weight"][tokens]
    G = c.n_heads // c.n_kv_heads
    for i in range(c.n_layers):
        p = f"blocks.{i}."
        h = norm(x, w[p + "attn_norm.weight"])
        q = rot((h @ w[p + "attn.wq.weight"].T).reshape(T, c.n_heads, c.head_dim))
        k = rot((h @ w[p + "attn.wk.weight"].T).reshape(T, c.n_kv_heads, c.head_dim))
        v = (h @ w[p + "attn.wv.weight"].T).reshape(T, c.n_kv_heads, c.head_dim)
        s = np.einsum("thd,shd->hts", q, np.repeat(k, G, 1)) / math.sqrt(c.head_dim)
        s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        o = np.einsum("hts,shd->thd", a, np.repeat(v, G, 1)).reshape(T, -1)
        x = x + o @ w[p + "attn.wo.weight"].T
        h = norm(x, w[p + "mlp_norm.weight"])
        g1, g3 = h @ w[p + "mlp.w1.weight"].T, h @ w[p + "mlp.w3.weight"].T
        x = x + (g1 / (1 + np.exp(-g1)) * g3) @ w[p + "mlp.w2.weight"].T
    return norm(x, w["norm.weight"]) @ w["head.weight"].T


def tokens(n, seed=0):
    rng = np.random.default_rng(seed)
    motifs = rng.integers(0, 256, size=(5, 16))
    return motifs[rng.integers(0, 5, size=n // 16 + 1)].reshape(-1)[:n]


@pytest.fixture(scope="module")
def model():
    return inloop.Model.random(TINY, seed=3)


def test_full_attention_in_the_loop_matches_numpy(model):
    toks = tokens(96)
    want = numpy_forward(model, toks)
    engine = model.forward(toks, inloop.EngineAttention(TINY.rope_theta))
    plain = model.forward(toks, inloop.full_attention(TINY.rope_theta))
    for got in (engine, plain):
        assert np.abs(got - want).max() < 1e-4 * np.abs(want).max()


class RowwiseModel(inloop.Model):
    """The model with its projections computed one position at a time, as forward_tokenwise
    computes them. A batched matmul rounds differently from a one-row one (BLAS picks other
    kernels, and which depends on the CPU), and a query that moves by one ulp can cross the
    match threshold and flip a hit; the comparison below is of the loop's order, so both
    orders get bit-identical projections."""

    def qkv(self, layer, x):
        rows = [super(RowwiseModel, self).qkv(layer, x[i:i + 1]) for i in range(len(x))]
        return tuple(np.concatenate(parts) for parts in zip(*rows))

    def finish_block(self, layer, x, o):
        return np.concatenate([super(RowwiseModel, self).finish_block(layer, x[i:i + 1],
                                                                      o[i:i + 1])
                               for i in range(len(x))])


def test_layer_by_layer_equals_token_by_token(model):
    toks = tokens(80)
    model = RowwiseModel(model.w, model.config)
    mac = mactune.MacParams(K=32, r=8, tau=0.2, min_context=0)
    att = inloop.EngineAttention(TINY.rope_theta, mac)
    layered = model.forward(toks, att)
    sessions = [att.session(4, 2, 64, 80) for _ in range(TINY.n_layers)]
    tokenwise = model.forward_tokenwise(toks, sessions)
    assert np.abs(layered - tokenwise).max() <= 1e-5 * np.abs(layered).max()
    assert inloop.pooled(att.stats)["hit_rate"] > 0


def test_fidelity_measures(model):
    toks = tokens(128)
    off, on = (mactune.MacParams(K=32, r=8, tau=t, min_context=0)
               for t in (1.0, 0.2))
    rows = inloop.evaluate(model, toks, [off, on])
    # tau >= 1: no hit, full attention (the MAC path's own arithmetic: fp32 roundoff apart).
    assert rows[0]["hit_rate"] == 0 and rows[0]["skip_ratio"] == 0
    assert rows[0]["kl_max"] < 1e-9 and rows[0]["top1"] == 1.0
    assert rows[0]["bpb"] == pytest.approx(rows[0]["bpb_ref"], abs=1e-6)
    # Reuse changes the predictions: positive KL, hits and skipped KV.
    assert rows[1]["hit_rate"] > 0.1 and rows[1]["skip_ratio"] > 0
    assert rows[1]["kl_mean"] > 1e-6 and rows[1]["kl_max"] >= rows[1]["kl_mean"]
    # bits per byte is the mean -log2 p(next token), checked by hand.
    ref = model.forward(toks, inloop.EngineAttention(TINY.rope_theta))
    lp = inloop.log_softmax(ref)
    assert rows[1]["bpb_ref"] == pytest.approx(
        -np.mean([lp[t, toks[t + 1]] for t in range(len(toks) - 1)]) / math.log(2))


def test_weights_are_checked():
    w = inloop.Model.random(TINY).w
    del w["blocks.1.mlp.w2.weight"]
    with pytest.raises(ValueError, match="blocks.1.mlp.w2.weight"):
        inloop.Model(w, TINY)


@pytest.mark.skipif(not TINYLM.exists(), reason=f"no model file at {TINYLM}")
def test_real_tinylm():
    m = inloop.Model.from_file(TINYLM)
    assert (m.config.n_layers, m.config.n_heads, m.config.n_kv_heads) == (4, 8, 2)
    text = (SOURCE_DIR / "docs" / "design.md").read_bytes()[:512]  # written after training
    toks = list(text)
    rows = inloop.evaluate(m, toks, [mactune.MacParams(K=256, r=64, tau=1.0,
                                                       min_context=0)])
    # A trained model: far better than a unigram model (about 5 bits per byte on such text).
    assert 1.5 < rows[0]["bpb_ref"] < 4.0, rows[0]
    assert rows[0]["kl_max"] < 1e-9
    want = numpy_forward(m, toks[:128])
    got = m.forward(toks[:128], inloop.EngineAttention(m.config.rope_theta))
    assert np.abs(got - want).max() < 1e-3 * np.abs(want).max()
