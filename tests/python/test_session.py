"""mactune.cpu.Session from Python: the C++ session itself, bit for bit, on arrays seen in place."""

import math
import threading

import numpy as np
import pytest

import mactune
from mactune import _mactune
from conftest import random_values, repetitive_queries


def options(batch=3, kv_dtype="f32", mac_enabled=True, K=32, r=8, tau=0.5):
    return mactune.cpu.SessionOptions(
        shape=mactune.Problem(batch=batch, q_heads=8, kv_heads=2, head_dim=64, dtype=kv_dtype,
                              page_size=16),
        mac=mactune.MacParams(K=K, r=r, tau=tau, min_context=0),
        mac_enabled=mac_enabled, max_context=512)


def inputs(rng, steps, batch):
    q = repetitive_queries(rng, steps, batch, 8, 64)
    k = random_values(rng, (steps, batch, 2, 64))
    v = random_values(rng, (steps, batch, 2, 64))
    return q, k, v


@pytest.mark.parametrize("kv_dtype", ["f32", "bf16"])
def test_step_equals_the_cpp_session_bit_for_bit(rng, kv_dtype):
    opt = options(kv_dtype=kv_dtype)
    q, k, v = inputs(rng, 96, 3)
    want_out, want_hit = _mactune._testing.cpu_steps(opt, q, k, v)
    s = mactune.cpu.Session(opt)
    ids = [s.add_request() for _ in range(3)]
    got_out = np.full(want_out.shape, np.nan, np.float32)
    got_hit = np.zeros(want_hit.shape, bool)
    for t in range(q.shape[0]):
        r = s.step(ids, q[t], k[t], v[t])
        got_out[t] = r.out
        got_hit[t] = r.hit
    assert np.isfinite(got_out).all()
    assert np.array_equal(got_out.view(np.uint32), want_out.view(np.uint32))
    assert np.array_equal(got_hit, want_hit)
    # The stream exercises MAC: some heads hit, some do not.
    assert 0.2 < want_hit.mean() < 0.95, want_hit.mean()


def numpy_attention(q, k, v, theta=10000.0):
    """Causal GQA attention in float64 over positions 0..T-1: q [T, Hq, D], k, v [T, Hkv, D]."""
    from mactune.inloop import full_attention
    return full_attention(theta)(0, q, k, v)


def test_full_attention_matches_numpy(rng):
    T = 80
    q, k, v = (x[:, 0] for x in inputs(rng, T, 1))
    s = mactune.cpu.Session(options(batch=1, mac_enabled=False))
    got = s.prefill(s.add_request(), q, k, v).out
    want = numpy_attention(q, k, v)
    assert np.abs(got - want).max() < 1e-5 * np.abs(want).max()


def test_prefill_equals_step_by_step(rng):
    T = 70
    q, k, v = (x[:, 0] for x in inputs(rng, T, 1))
    a = mactune.cpu.Session(options(batch=1))
    b = mactune.cpu.Session(options(batch=1))
    ra = a.prefill(a.add_request(), q, k, v)
    ib = b.add_request()
    steps = [b.step(ib, q[t], k[t], v[t]) for t in range(T)]
    assert np.array_equal(ra.out, np.stack([r.out for r in steps]))
    assert np.array_equal(ra.hit, np.concatenate([r.hit for r in steps]))
    assert np.array_equal(ra.p, np.concatenate([r.p for r in steps]))
    assert ra.stats.hit_heads == sum(r.stats.hit_heads for r in steps) > 0
    assert ra.stats.kv_tokens_read == sum(r.stats.kv_tokens_read for r in steps)
    assert ra.hit.shape == (T, 8) and ra.group_mode.shape == (T, 2)
    assert a.length(0) == T


def test_arrays_are_seen_in_place(rng):
    s = mactune.cpu.Session(options(batch=1))
    rid = s.add_request()
    q, k, v = (x[0, 0] for x in inputs(rng, 1, 1))
    out = np.full((8, 64), np.nan, np.float32)
    q.setflags(write=False)  # read-only inputs are fine
    r = s.step(rid, q, k, v, out=out)
    assert r.out is out and np.isfinite(out).all()
    with pytest.raises(mactune.InputError, match=r"q: expected float32, got float64"):
        s.step(rid, q.astype(np.float64), k, v)
    with pytest.raises(mactune.InputError, match=r"k: expected shape \[2, 64\]"):
        s.step(rid, q, k[:1], v)
    with pytest.raises(mactune.InputError, match="C-contiguous"):
        s.step(rid, np.asfortranarray(np.stack([q, q], 1))[:, 0], k, v)
    with pytest.raises(mactune.InputError, match=r"out: expected shape"):
        s.step(rid, q, k, v, out=np.zeros((8, 32), np.float32))
    assert s.length(rid) == 1  # refused steps changed nothing


def test_errors_carry_the_one_line_message():
    with pytest.raises(mactune.InputError) as e:
        mactune.cpu.Session(shape=mactune.Problem(head_dim=96))
    assert "head_dim" in str(e.value) and "\n" not in str(e.value)
    assert isinstance(e.value, ValueError) and isinstance(e.value, mactune.Error)
    with pytest.raises(mactune.InputError, match="unknown field 'tua'"):
        mactune.MacParams(tua=0.3)
    with pytest.raises(mactune.InputError, match="unknown pick rule 'closest'"):
        mactune.MacParams(pick="closest")
    s = mactune.cpu.Session(options(batch=1))
    s.add_request()
    with pytest.raises(mactune.InputError, match="taken"):
        s.add_request()
    full = mactune.cpu.Session(options(batch=1, mac_enabled=False))
    with pytest.raises(mactune.InputError, match="no ring"):
        full.ring_entry(full.add_request(), 0, 0)


def test_ring_state_is_the_sessions(rng):
    T = 40
    q, k, v = (x[:, 0] for x in inputs(rng, T, 1))
    s = mactune.cpu.Session(options(batch=1, K=32, r=8))
    rid = s.add_request()
    s.prefill(rid, q, k, v)
    e = s.ring_entry(rid, 3, T - 1)
    assert e.pos == T - 1
    assert np.array_equal(e.q, q[T - 1, 3])  # pre-RoPE query, f32 KV: stored exactly
    assert math.isfinite(e.lse)
    ring = s.ring(rid, 3)
    assert ring["q"].shape == (32, 64) and ring["pos"].shape == (32,)
    assert sorted(ring["pos"].tolist()) == list(range(T - 32, T))
    for slot, pos in enumerate(ring["pos"]):
        assert pos % 32 == slot
        assert np.array_equal(ring["q"][slot], q[pos, 3])
    assert s.ring_entry(rid, 3, 0).pos == 32  # slot 0 now holds position 32
    kk, vv = s.read_kv(rid, 1, 5)
    assert np.array_equal(vv, v[5, 1])


def forced_session(forced):
    """A batch-2 session (K 64, r 16) with `forced`, two requests of 256 tokens, and one
    step's q, k, v."""
    opt = options(batch=2, K=64, r=16)
    opt.forced = forced
    s = mactune.cpu.Session(opt)
    ids = [s.add_request() for _ in range(2)]
    for i in ids:
        s.prefill_synthetic(i, 256, seed=7)
    rng = np.random.default_rng(3)
    q, k, v = (x[0] for x in inputs(rng, 1, 2))
    return s, ids, (q, k, v)


def test_forced_hits():
    s, ids, (q, k, v) = forced_session(mactune.ForcedHits(enabled=True, hit_rate=1.0))
    r = s.step(ids, q, k, v, advance=False)
    assert r.hit.all() and r.stats.hit_rate == 1.0
    assert (r.p >= 256 - 64).all() and (r.p < 256).all()
    s.set_forced(mactune.ForcedHits(enabled=True, hit_rate=0.5))
    r = s.step(ids, q, k, v)
    assert r.hit.sum() == 8  # exact quota: half of 2 x 8 heads
    assert [s.length(i) for i in ids] == [257, 257]


def test_forced_skip_ratio_is_exact_to_the_token():
    s, ids, (q, k, v) = forced_session(
        mactune.ForcedHits(enabled=True, quota="skip-ratio", skip_ratio=0.9))
    r = s.step(ids, q, k, v, advance=False)
    total = r.stats.kv_tokens_total
    assert total == 2 * 2 * 257
    assert total - r.stats.kv_tokens_read == round(0.9 * total)  # 925 of 1028 tokens skipped
    assert r.stats.groups_mixed == 0
    with pytest.raises(ValueError):
        mactune.ForcedHits(quota="skip")


def test_torch_cpu_tensors_through_dlpack(rng):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    s = mactune.cpu.Session(options(batch=1))
    rid = s.add_request()
    q, k, v = (x[0, 0] for x in inputs(rng, 1, 1))
    out = torch.full((8, 64), float("nan"))
    s.step(rid, torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v), out=out)
    ref = mactune.cpu.Session(options(batch=1))
    want = ref.step(ref.add_request(), q, k, v).out
    assert np.array_equal(out.numpy(), want)


def test_step_releases_the_gil(rng):
    # Another Python thread runs while a long step runs in C++ (and only then, if it did not).
    opt = options(batch=1, mac_enabled=False)
    opt.max_context = 1 << 16
    s = mactune.cpu.Session(opt)
    rid = s.add_request()
    s.prefill_synthetic(rid, 60000, seed=1)
    q, k, v = (x[0, 0] for x in inputs(rng, 1, 1))
    ticks = []
    stop = threading.Event()
    t = threading.Thread(target=lambda: [ticks.append(1) for _ in iter(stop.is_set, True)])
    t.start()
    during = 0
    for _ in range(5):
        before = len(ticks)
        s.step(rid, q, k, v, advance=False)
        during += len(ticks) - before
    stop.set()
    t.join()
    assert during > 1000, during
