"""Reading Llama-family GGUF files (mactune.gguf_llama): tiny files written here with gguf's own
writer, in every tensor type the loader promises, and the one-line refusals of what the loop
cannot run. Needs `gguf` and `tokenizers` (scripts/setup.sh ci installs them)."""

import dataclasses

import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="gguf is not installed (scripts/setup.sh ci)")
pytest.importorskip("tokenizers", reason="tokenizers is not installed (scripts/setup.sh ci)")

from mactune import gguf_llama, inloop  # noqa: E402

Q = gguf.GGMLQuantizationType
CFG = inloop.Config(vocab=256, n_layers=2, d_model=64, n_heads=4, n_kv_heads=2, head_dim=32,
                    ffn_hidden=96, rope_theta=50000.0, norm_eps=1e-5)


def byte_vocab():
    """The 256 byte-level BPE symbols (GPT-2's byte-to-character map) and no merges."""
    from tokenizers import pre_tokenizers
    return sorted(pre_tokenizers.ByteLevel.alphabet())


def write_gguf(path, weights, qtype=Q.F32, arch="llama", extra=None, drop=(), add=None):
    """A GGUF of `weights` (inloop names, original row order) as llama.cpp's converter writes
    it: GGUF names, q/k rows permuted, 2-D tensors in `qtype`."""
    w = gguf.GGUFWriter(str(path), arch)
    c = CFG
    w.add_block_count(c.n_layers)
    w.add_context_length(512)
    w.add_embedding_length(c.d_model)
    w.add_feed_forward_length(c.ffn_hidden)
    w.add_head_count(c.n_heads)
    w.add_head_count_kv(c.n_kv_heads)
    w.add_key_length(c.head_dim)
    w.add_value_length(c.head_dim)
    w.add_rope_dimension_count(c.head_dim)
    w.add_rope_freq_base(c.rope_theta)
    w.add_layer_norm_rms_eps(c.norm_eps)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(byte_vocab())
    w.add_token_merges([])
    w.add_bos_token_id(0)
    for k, v in (extra or {}).items():
        (w.add_string if isinstance(v, str) else w.add_float32 if isinstance(v, float)
         else w.add_uint32)(k, v)
    names = {"emb.weight": "token_embd.weight", "norm.weight": "output_norm.weight",
             "head.weight": "output.weight"}
    for i in range(c.n_layers):
        for ours, theirs in (("attn_norm", "attn_norm"), ("attn.wq", "attn_q"),
                             ("attn.wk", "attn_k"), ("attn.wv", "attn_v"),
                             ("attn.wo", "attn_output"), ("mlp_norm", "ffn_norm"),
                             ("mlp.w1", "ffn_gate"), ("mlp.w3", "ffn_up"), ("mlp.w2", "ffn_down")):
            names[f"blocks.{i}.{ours}.weight"] = f"blk.{i}.{theirs}.weight"
    for ours, theirs in names.items():
        if theirs in drop:
            continue
        a = weights[ours]
        if ours.endswith("attn.wq.weight"):
            a = gguf_llama.permute(a, c.n_heads)
        elif ours.endswith("attn.wk.weight"):
            a = gguf_llama.permute(a, c.n_kv_heads)
        if a.ndim == 1 or qtype == Q.F32:
            w.add_tensor(theirs, np.ascontiguousarray(a, np.float32))
        elif qtype == Q.F16:
            w.add_tensor(theirs, a.astype(np.float16))
        else:
            w.add_tensor(theirs, gguf.quants.quantize(a, qtype), raw_dtype=qtype)
    for name, a in (add or {}).items():
        w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="module")
def weights():
    return inloop.Model.random(CFG, seed=11).w


@pytest.mark.parametrize("qtype", [Q.F32, Q.F16, Q.Q8_0, Q.Q4_0, Q.Q4_1])
def test_every_tensor_type_loads_in_original_order(tmp_path, weights, qtype):
    path = write_gguf(tmp_path / "m.gguf", weights, qtype)
    m = inloop.Model.from_gguf(path)
    assert m.config.norm_eps == pytest.approx(CFG.norm_eps, rel=1e-6)  # stored as float32
    assert dataclasses.replace(m.config, norm_eps=CFG.norm_eps) == CFG
    for name, want in weights.items():
        if want.ndim == 2 and qtype not in (Q.F32, Q.F16):
            # What the reader must give: the file's quantized values, rows unpermuted.
            want = gguf.quants.dequantize(gguf.quants.quantize(want, qtype), qtype)
        tol = {Q.F32: 0, Q.F16: 1e-3}.get(qtype, 1e-6)
        assert np.abs(m.w[name] - want).max() <= tol * max(1.0, np.abs(want).max()), name
    if qtype == Q.F32:  # the same model as the weights: the same logits
        toks = list(range(40, 90))
        att = inloop.full_attention(CFG.rope_theta)  # head_dim 32: not an engine shape
        want = inloop.Model(weights, CFG).forward(toks, att)
        assert np.array_equal(m.forward(toks, att), want)


def test_untied_and_tied_heads(tmp_path, weights):
    tied = inloop.Model.from_gguf(write_gguf(tmp_path / "t.gguf", weights,
                                             drop=("output.weight",)))
    assert tied.w["head.weight"] is tied.w["emb.weight"]
    untied = inloop.Model.from_gguf(write_gguf(tmp_path / "u.gguf", weights))
    assert np.array_equal(untied.w["head.weight"], weights["head.weight"])


def test_byte_level_tokenizer(tmp_path, weights):
    m = inloop.Model.from_gguf(write_gguf(tmp_path / "m.gguf", weights))
    text = "MAC-Attention: 2048 tokens, ünïcode.\n"
    ids = m.tokenizer.encode(text)
    assert len(ids) == len(text.encode())  # no merges: one token per byte
    assert m.tokenizer.decode(ids) == text


@pytest.mark.parametrize("extra, add, drop, message", [
    ({"llama.rope.scaling.type": "linear", "llama.rope.scaling.factor": 4.0}, None, (),
     "llama.rope.scaling.type is 'linear'.*scaled RoPE"),
    ({"llama.attention.sliding_window": 128}, None, (), "sliding_window is 128"),
    ({"llama.expert_count": 8}, None, (), "expert_count is 8"),
    ({}, {"rope_freqs.weight": np.ones(16, np.float32)}, (), "rope_freqs.weight"),
    ({}, {"blk.0.attn_q.bias": np.ones(128, np.float32)}, (), "blk.0.attn_q.bias"),
    ({}, None, ("blk.1.ffn_up.weight",), "no tensor 'blk.1.ffn_up.weight'"),
])
def test_what_cannot_run_is_refused_in_one_line(tmp_path, weights, extra, add, drop, message):
    path = write_gguf(tmp_path / "bad.gguf", weights, extra=extra, add=add, drop=drop)
    with pytest.raises(ValueError, match=message) as e:
        inloop.Model.from_gguf(path)
    assert "\n" not in str(e.value) and str(path) in str(e.value)


def test_other_architectures_are_refused(tmp_path, weights):
    path = write_gguf(tmp_path / "g.gguf", weights, arch="gemma")
    with pytest.raises(ValueError, match="general.architecture is 'gemma'"):
        inloop.Model.from_gguf(path)


def test_not_a_gguf_file(tmp_path):
    p = tmp_path / "x.gguf"
    p.write_bytes(b"not a gguf file at all" * 4)
    with pytest.raises(ValueError, match="not a GGUF file"):
        inloop.Model.from_gguf(p)
    with pytest.raises(ValueError, match="no such file"):
        inloop.Model.from_gguf(tmp_path / "missing.gguf")


def test_permutation_round_trip():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((6 * 8, 5))
    assert np.array_equal(gguf_llama.unpermute(gguf_llama.permute(w, 6), 6), w)
    # Head h, original row c * D/2 + i sits at GGUF row 2i + c.
    g = gguf_llama.permute(w, 6)
    assert np.array_equal(g[8 + 2 * 3 + 1], w[8 + 4 + 3])
