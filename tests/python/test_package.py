"""The package itself: exports, type stubs, the CUDA module of a CUDA build."""

import ast
import pathlib

import numpy as np
import pytest

import mactune


def test_exports_and_build_info():
    for name in mactune.__all__:
        assert hasattr(mactune, name), name
    assert mactune.__version__ == mactune.build_info["version"]
    assert (mactune.cuda is not None) == mactune.build_info["cuda"]
    names = {i.name for i in mactune.instances()}
    assert {i.name for i in mactune.cpu.instances()} <= names


def test_type_stubs_describe_the_module():
    stub = pathlib.Path(mactune.__file__).with_name("_mactune.pyi")
    tree = ast.parse(stub.read_text())  # valid Python
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    for c in ("Problem", "MacParams", "Dispatcher", "Choice", "StepResult", "Trace"):
        assert c in classes, c
        assert ast.get_docstring(classes[c]), f"{c} has no docstring"
    funcs = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert {"replay", "calibrate", "cpu_fingerprint", "instances"} <= funcs


def test_structs_round_trip():
    m = mactune.MacParams(K=256, r=64, tau=0.3, pick="newest",
                          summary_dtype="bf16", accept_eps=0.5)
    d = m.to_dict()
    assert d["pick"] == "newest" and d["summary_dtype"] == "bf16"
    assert mactune.MacParams(**d) == m and mactune.MacParams() != m
    o = mactune.cpu.SessionOptions(mac=m, forced=mactune.ForcedHits(coherence="per-group"))
    assert o.to_dict()["forced"]["coherence"] == "per-group"
    o.mac.tau = 0.7  # nested fields are the C++ struct's, by reference
    assert o.mac.tau == 0.7
    assert mactune.Problem(q_heads=32, kv_heads=8).group_size == 4
    assert "kv_heads = 3 does not divide" in mactune.Problem(q_heads=8, kv_heads=3).validate()


@pytest.mark.skipif(mactune.cuda is None, reason="not a CUDA build")
def test_cuda_session_without_a_gpu_raises_the_reason():
    why = mactune.cuda.gpu_status()
    if not why:
        pytest.skip("a GPU is usable here: the CUDA session runs (tests/cuda cover it)")
    opt = mactune.cuda.SessionOptions(
        shape=mactune.Problem(batch=1, q_heads=8, kv_heads=2, head_dim=64), max_context=1024)
    with pytest.raises(mactune.Error) as e:
        mactune.cuda.Session(opt)
    assert str(e.value) and "\n" not in str(e.value)
    assert not isinstance(e.value, mactune.InputError)


def test_cuda_session_steps_torch_cuda_tensors_in_place():
    if mactune.cuda is None or mactune.cuda.gpu_status():
        pytest.skip("no CUDA build or no usable GPU here")
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    shape = mactune.Problem(batch=2, q_heads=8, kv_heads=2, head_dim=128, dtype="bf16")
    mac = mactune.MacParams(K=32, r=4, tau=0.5, min_context=0)
    host = mactune.cuda.Session(shape=shape, mac=mac, max_context=256)
    dev = mactune.cuda.Session(shape=shape, mac=mac, max_context=256)
    ids = [host.add_request(), host.add_request()]
    assert [dev.add_request(), dev.add_request()] == ids
    rng = np.random.default_rng(5)
    motifs = rng.uniform(-1, 1, (3, 2, 8, 128)).astype(np.float32)
    stream = torch.cuda.current_stream().cuda_stream
    hits = 0
    for t in range(48):
        q = np.ascontiguousarray(motifs[t % 3] + 0.01 * rng.standard_normal((2, 8, 128)),
                                 np.float32)
        k, v = (rng.uniform(-1, 1, (2, 2, 128)).astype(np.float32) for _ in range(2))
        want = host.step(ids, q, k, v)
        qt, kt, vt = (torch.from_numpy(x).cuda() for x in (q, k, v))
        out = torch.full_like(qt, float("nan"))
        got = dev.step(ids, qt, kt, vt, out=out, stream=stream)
        assert got.out is out
        assert np.array_equal(out.cpu().numpy(), want.out)
        assert np.array_equal(got.hit, want.hit)
        hits += int(want.hit.sum())
    assert hits > 0
    with pytest.raises(mactune.InputError, match="out"):
        dev.step(ids, qt, kt, vt)
