"""The in-loop fidelity tools on a tiny random model (no model file, no gguf): the runner's
exact-prefix shortcut, per-layer schedules, the calibration family, schedules written and read
back through the C++ serializer, GGUF-style traces read by the project's reader, and the
frontier report."""

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import mactune
from mactune import calibrate_inloop, fidelity, frontier, inloop, record_gguf

TINY = inloop.Config(vocab=256, n_layers=3, d_model=128, n_heads=6, n_kv_heads=2, head_dim=64,
                     ffn_hidden=192, rope_theta=100000.0)
T, START = 192, 96


def motif_tokens(n, seed=0):
    rng = np.random.default_rng(seed)
    motifs = rng.integers(0, 256, size=(4, 12))
    return [int(t) for t in motifs[rng.integers(0, 4, size=n // 12 + 1)].reshape(-1)[:n]]


@pytest.fixture(scope="module")
def model():
    return inloop.Model.random(TINY, seed=5)


@pytest.fixture(scope="module")
def runner(model):
    win = fidelity.Window("motifs", motif_tokens(T), "test", "")
    return fidelity.Runner(model, win)


def mac(tau, **kw):
    return mactune.MacParams(K=64, r=16, tau=tau, min_context=START, **kw)


def test_exact_prefix_shortcut_equals_the_plain_forward(model, runner):
    """Positions below start come from the reference; the suffix must be what the plain
    layer-by-layer forward with MAC from min_context = start computes."""
    att = inloop.EngineAttention(TINY.rope_theta, mac(0.3))
    want = model.hidden(runner.win.tokens, att)[START:]
    got = runner.hidden(mac(0.3), START, inloop.EngineAttention(TINY.rope_theta, mac(0.3)))
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
    assert inloop.pooled(att.stats)["hit_rate"] > 0.2


def test_tau_one_is_the_reference_and_reuse_is_not(runner):
    off = runner.run(mac(1.0), START)
    assert off["hit_rate"] == 0 and off["skip_ratio"] == 0 and off["kl_max"] < 1e-6
    assert off["positions"] == T - START
    on = runner.run(mac(0.3), START, per_layer=True)
    assert on["hit_rate"] > 0.2 and on["skip_ratio"] > 0.05 and on["kl_mean"] > 1e-7
    assert [l["layer"] for l in on["layers"]] == [0, 1, 2]


def test_min_context_is_the_start(runner):
    """Whatever min_context the settings carry, the run decides from `start`: no hit below."""
    row = runner.run(mac(0.3), START + 40)
    early = runner.run(mac(0.3), START)
    assert row["positions"] == T - START - 40 and row["hit_rate"] > 0
    assert row["skip_ratio"] != early["skip_ratio"]


def test_per_layer_schedule(runner):
    sched = {0: mac(0.3), 1: None, 2: mac(1.0)}
    row = runner.run(sched, START, per_layer=True)
    by = {l["layer"]: l for l in row["layers"]}
    assert by[0]["hit_rate"] > 0.2 and by[1]["hit_rate"] == 0 and by[2]["hit_rate"] == 0
    assert row["skip_ratio"] == pytest.approx(by[0]["skip_ratio"] / 3, rel=1e-6)
    # Unlisted layers run full attention; layer 0 sees the same inputs either way.
    only0 = runner.run({0: mac(0.3)}, START)
    assert only0["skip_ratio"] == row["skip_ratio"]


def test_calibration_family_and_search(runner):
    base = mac(0.45)
    probes = calibrate_inloop.probe(runner, [0.3, 0.6, 0.9], base, START, log=lambda s: None)
    for p in probes.values():
        assert set(p["layers"]) == {0, 1, 2}
        for L in p["layers"].values():
            assert 0 <= L["skip_ratio"] < 1 and L["err_mse"] >= 0
    # lam 0: every layer reuses at its largest skip; a huge price: no MAC anywhere.
    free = calibrate_inloop.choose(probes, 0.0)
    assert all(t is not None for t in free.values())
    assert all(t is None for t in calibrate_inloop.choose(probes, 1e12).values())
    lams = calibrate_inloop.breakpoints(probes)
    assert lams == sorted(lams) and all(x > 0 for x in lams)
    n_mac = [sum(t is not None for t in calibrate_inloop.choose(probes, lam).values())
             for lam in [0.0] + [x * 1.0001 for x in lams]]
    assert n_mac == sorted(n_mac, reverse=True)  # a higher price never adds reuse
    res = calibrate_inloop.calibrate(runner, base, START, [0.3, 0.6, 0.9], max_kl=1.0,
                                     min_top1=0.0, log=lambda s: None)
    assert res["chosen"] is not None and res["chosen"]["row"]["skip_ratio"] > 0
    tight = calibrate_inloop.calibrate(runner, base, START, [0.3], max_kl=0.0, min_top1=1.0,
                                       log=lambda s: None)
    assert tight["chosen"] is None or tight["chosen"]["row"]["kl_mean"] == 0.0


def test_reference_cache(model, runner, tmp_path):
    """A second runner of the same window reads the reference back; another window does not."""
    win = fidelity.Window("motifs", runner.win.tokens, "test", "ab" * 32)
    first = fidelity.Runner(model, win, cache=tmp_path)
    again = fidelity.Runner(model, win, cache=tmp_path)
    assert not first.reference_cached and again.reference_cached
    assert np.array_equal(again.h_ref, runner.h_ref)
    assert all(np.array_equal(a, b) for a, b in zip(again.ref_x, runner.ref_x))
    a, b = again.run(mac(0.3), START), runner.run(mac(0.3), START)
    a.pop("seconds"), b.pop("seconds")
    assert a == b
    other = fidelity.Window("motifs", motif_tokens(T, seed=1), "test", "cd" * 32)
    assert not fidelity.Runner(model, other, cache=tmp_path).reference_cached
    assert len(list(tmp_path.glob("reference-*.npy"))) == 2


def test_search_predicts_from_the_nearest_point():
    """KL scales with the summed error, 1 - top1 with its square root, from the nearest
    measured point; the family runs from reuse everywhere to MAC nowhere."""
    kl, top1 = calibrate_inloop.predict([(1e-3, 0.01, 0.96), (1e-1, 0.5, 0.7)], 4e-3)
    assert kl == pytest.approx(0.04) and top1 == pytest.approx(1 - 0.04 * 2)
    assert calibrate_inloop.predict([(1e-3, 0.01, 0.96)], 0.0) == (0.0, 1.0)

    def probe(skips, errs):
        return {"kl_mean": 0.0, "top1": 1.0, "layers": {
            l: {"skip_ratio": s, "err_mse": e} for l, (s, e) in enumerate(zip(skips, errs))}}
    probes = {0.5: probe([0.6, 0.5], [0.1, 0.01]), 0.8: probe([0.2, 0.3], [0.001, 0.001])}
    fam = calibrate_inloop.family(probes)
    assert fam[0]["pick"] == {0: 0.5, 1: 0.5} and fam[-1]["pick"] == {0: None, 1: None}
    assert [f["skip"] for f in fam] == sorted((f["skip"] for f in fam), reverse=True)
    assert fam[0]["err"] == pytest.approx(0.11) and fam[-1]["err"] == 0


def test_calibration_reuses_its_probes(runner, tmp_path, monkeypatch):
    """--probes: the search runs on the probes of an earlier run, with no probe pass."""
    base = mac(0.45)
    probes = calibrate_inloop.probe(runner, [0.3, 0.9], base, START, log=lambda s: None)
    monkeypatch.setattr(calibrate_inloop, "probe", lambda *a, **k: pytest.fail("probed"))
    res = calibrate_inloop.calibrate(runner, base, START, [0.3, 0.9], max_kl=1.0,
                                     min_top1=0.0, log=lambda s: None, probes=probes)
    assert res["chosen"] is not None and len(res["tried"]) >= 1
    # The budget of no error at all: only MAC nowhere is predicted within it.
    tight = calibrate_inloop.calibrate(runner, base, START, [0.3, 0.9], max_kl=0.0,
                                       min_top1=1.0, log=lambda s: None, probes=probes)
    assert tight["chosen"] is None or tight["chosen"]["row"]["skip_ratio"] == 0


def test_schedule_written_and_read_back(tmp_path):
    layers = {0: mac(0.6, accept_eps=0.2), 3: mac(1.0)}
    path = tmp_path / "s.yaml"
    text = mactune.schedule_yaml(layers, measured={0: {"skip_ratio": 0.25, "err_mse": 1e-3}},
                                 metric="inloop_kl_mean", max_err=0.01,
                                 traces=[("prose tokens 0..4096", "ab" * 32)],
                                 comment="test schedule\ntwo lines", output=path)
    assert path.read_text() == text and text.startswith("#")
    back = mactune.load_schedule(path)
    assert back["layers"] == layers
    assert back["measured"][0]["skip_ratio"] == 0.25
    assert back["calibration"]["metric"] == "inloop_kl_mean"
    assert back["calibration"]["traces"][0]["sha256"] == "ab" * 32
    with pytest.raises(mactune.InputError, match="layer 5 has no entry"):
        mactune.schedule_yaml(layers, measured={5: {"x": 1.0}})
    with pytest.raises(mactune.InputError):
        mactune.schedule_yaml({0: mactune.MacParams(K=0)})


def test_recorded_trace_replays(tmp_path, model):
    path = tmp_path / "t.safetensors"
    toks = motif_tokens(128)
    record_gguf.record(model, toks, path, layers=[0, 2], o_ref=True,
                       extra_metadata={"source_doc": "motifs"})
    tr = mactune.Trace(path)
    assert tr.layers == [0, 2] and tr.metadata["recorded_by"] == "mactune.record_gguf"
    # The stored q/k/v are the model's: layer 0 of the plain forward.
    q, k, v = model.qkv(0, model.w["emb.weight"][np.asarray(toks)])
    got = tr.load_layer(0)
    assert np.array_equal(got["q_pre"], q) and np.array_equal(got["v"], v)
    doc = mactune.replay(path, tau=[1.0, 0.3], K=64, r=16, min_context=32)
    assert all(l["full_vs_ref_max"] < 1e-4 for l in doc["layers"])
    assert doc["layers"][0]["hit_rate"] == 0 and doc["layers"][1]["hit_rate"] > 0
    with pytest.raises(ValueError, match="layers \\[7\\]"):
        record_gguf.record(model, toks, tmp_path / "x.safetensors", layers=[7])
    assert not (tmp_path / "x.safetensors").exists()


def test_frontier_report(tmp_path):
    def row(rule, skip, kl, top1=0.99, **kw):
        return {"text": "prose", "tokens": 4096, "setting": "every", "rule": rule,
                "point": {"K": 512, "r": 256, "tau": 1 - skip, "pick": "nearest",
                          "accept_eps": 1.0}, "schedule": "", "skip_ratio": skip,
                "kl_mean": kl, "kl_p99": kl * 5, "top1": top1, "hit_rate": skip * 2,
                "bpb_ref": 5.9, "bpb": 5.91, "seconds": 1, **kw}
    rows = [row("global tau", 0.1, 0.004), row("global tau", 0.3, 0.03),
            row("global tau", 0.5, 0.2), row("eps gate", 0.2, 0.008)]
    again = dict(rows[1], kl_mean=0.02)  # measured twice: the later row counts
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows + [again]))
    assert len(frontier.load_rows(tmp_path)) == 4
    assert frontier.load_rows(tmp_path)[1]["kl_mean"] == 0.02
    assert frontier.best_within(rows[:3], 0.01)["skip_ratio"] == 0.1
    assert frontier.best_within(rows[:3], 0.05)["skip_ratio"] == 0.3
    assert frontier.best_within(rows[:3], 0.001) is None
    frontier.main(["report", "--out", str(tmp_path)])
    md = (tmp_path / "frontier.md").read_text()
    assert "| prose | 4096 | every | global tau | 0.100" in md
    assert ("- prose, 4096 tokens, every: at KL <= 0.01: eps gate (K 512, r 256, tau 0.8), "
            "skip 0.200, top-1 0.990; at KL <= 0.05: global tau (K 512, r 256, tau 0.7), "
            "skip 0.300") in md
    ET.fromstring((tmp_path / "frontier.svg").read_text())  # well-formed
    with pytest.raises(SystemExit, match="no rows"):
        frontier.main(["report", "--out", str(tmp_path / "empty")])


def test_frontier_group_hits_points():
    # group_hits is in a point only when set, so rows measured before the rule keep their keys
    # (a resumed sweep does not measure them again), and it reaches the engine's MacParams.
    plain, grouped = frontier._mac(tau=0.7), frontier._mac(tau=0.7, group=True)
    assert "group_hits" not in plain
    assert frontier.mac_params(grouped).group_hits is True
    assert frontier.mac_params(plain).group_hits is False
    assert all(p.get("group_hits") for p in frontier.PLANS["full"]["group hits"])
    row = {"text": "prose", "tokens": 4096, "setting": "every", "rule": "group hits",
           "point": grouped, "schedule": ""}
    assert frontier._label(row) == "K 512, r 256, tau 0.7, group_hits"
    assert frontier._key(row) != frontier._key(dict(row, point=plain))
