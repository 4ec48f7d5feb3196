"""mactune.record on tiny random transformers models (no download): the recorded trace passes
the project's reader and replays with the CPU engine to the model's own outputs."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (CI has none: the PyPI "
                            "wheel needs several GB of CUDA libraries)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import mactune  # noqa: E402
from mactune import tensorfile  # noqa: E402
from mactune.record import Recorder, record  # noqa: E402

T = 160


def tiny(kind, **extra):
    common = dict(vocab_size=256, hidden_size=256, intermediate_size=512, num_hidden_layers=3,
                  num_attention_heads=8, num_key_value_heads=2, head_dim=64,
                  max_position_embeddings=1024, initializer_range=0.15)
    common.update(extra)
    if kind == "llama":
        cfg = transformers.LlamaConfig(**common)
        cls = transformers.LlamaForCausalLM
    elif kind == "mistral":
        cfg = transformers.MistralConfig(sliding_window=None, **common)
        cls = transformers.MistralForCausalLM
    elif kind == "qwen2":
        cfg = transformers.Qwen2Config(**common)
        cls = transformers.Qwen2ForCausalLM
    elif kind == "qwen3":
        if not hasattr(transformers, "Qwen3Config"):
            pytest.skip("this transformers has no Qwen3")
        cfg = transformers.Qwen3Config(**common)
        cls = transformers.Qwen3ForCausalLM
    torch.manual_seed(0)
    return cls(cfg).eval()


def ids(seed=1):
    g = torch.Generator().manual_seed(seed)
    # A repetitive byte stream (a few motifs), so that MAC has something to match.
    motifs = torch.randint(0, 256, (6, 12), generator=g)
    order = torch.randint(0, 6, (T // 12 + 1,), generator=g)
    return motifs[order].reshape(1, -1)[:, :T]


@pytest.mark.parametrize("kind,theta", [("llama", 10000.0), ("llama", 500000.0),
                                        ("mistral", 1e6), ("qwen2", 1e6), ("qwen3", 1e6)])
def test_recorded_trace_replays_to_the_models_outputs(tmp_path, kind, theta):
    extra = {"rope_parameters": {"rope_type": "default", "rope_theta": theta}}
    model = tiny(kind, **extra)
    path = record(model, ids(), tmp_path / f"{kind}.safetensors")
    trace = mactune.Trace(path)  # the project's validating reader
    assert trace.layers == [0, 1, 2] and trace.rope_theta == theta
    layer = trace.load_layer(1)
    assert layer["q_pre"].shape == (T, 8, 64) and layer["k_pre"].shape == (T, 2, 64)
    # Full attention by the CPU engine (f32) and the exact fp64 attention reproduce the model's
    # outputs within fp32 roundoff: a wrong RoPE base, head mapping or scale is off by > 1e-2.
    # (1e-4 on the worst pair is the traces README's bound for float32 recomputation.)
    base = mactune.replay(path, baseline=True)
    for entry in base["layers"]:
        assert entry["full_vs_ref_max"] < 1e-4, entry
        assert entry["rel_err_vs_ref"]["max"] < 1e-4, entry
        assert entry["rel_err_vs_ref"]["p50"] < 2e-6, entry
    # So does MAC with hits off; with hits on it reuses, and its error is what replay reports.
    off = mactune.replay(path, tau=1.0)
    assert all(e["rel_err_vs_ref"]["max"] < 1e-4 for e in off["layers"])
    on = mactune.replay(path, K=64, r=8, tau=0.3)
    assert max(e["hit_rate"] for e in on["layers"]) > 0


def test_records_generate_with_a_kv_cache(tmp_path):
    model = tiny("llama")
    prompt = ids()[:, :40]
    with Recorder(model, layers=[0, 2]) as rec, torch.no_grad():
        out = model.generate(prompt, max_new_tokens=24, do_sample=False)
    path = rec.save(tmp_path / "gen.safetensors")
    # The prompt's 40 positions in one call, then one position per new token (the last
    # generated token is never fed back).
    tensors, meta = tensorfile.load(path)
    n = out.shape[1] - 1
    assert tensors["layer0.q_pre"].shape == (n, 8, 64) and meta["layers_included"] == "0,2"
    # Teacher-forcing the same tokens gives the same trace (to roundoff).
    forced = record(model, out[:, :n], tmp_path / "forced.safetensors", layers=[0, 2])
    t2, _ = tensorfile.load(forced)
    for name in ("layer2.q_pre", "layer2.k_pre", "layer2.v", "layer2.o_ref"):
        assert np.abs(tensors[name] - t2[name]).max() < 1e-4 * np.abs(t2[name]).max(), name
    assert mactune.replay(path, baseline=True)["layers"][0]["full_vs_ref_max"] < 1e-4
    # The model is as it was: attention implementation restored, no hooks left.
    assert model.config._attn_implementation != "mactune_record"
    assert not any(m._forward_hooks for m in model.modules())


def test_scaled_rope_is_refused(tmp_path):
    model = tiny("llama", rope_parameters={"rope_type": "linear", "factor": 4.0,
                                           "rope_theta": 10000.0})
    with pytest.raises(ValueError, match="RoPE is not rotate-half RoPE"):
        record(model, ids(), tmp_path / "x.safetensors")
    assert model.config._attn_implementation != "mactune_record"
