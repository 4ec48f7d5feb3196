"""mactune.Dispatcher from Python: tables emitted by `mactune tune`, written here, refused."""

import json
import subprocess

import pytest

import mactune

TINY_SPEC = """name: tiny
device: {backend: cpu}
kernels:
  cpu: {chunk_tokens: [64, 128], threads: 1}
mac: {K: 64, r: 32}
workload:
  batch: [1, 2]
  context: [256, 512]
  q_heads: 8
  kv_heads: 2
  head_dim: 64
  dtype: bf16
  hit_rate: [0, 1]
  lag: uniform(1,16)
constraints: [r < context]
measure: {warmup: 1, min_samples: 3, max_samples: 3, noise: 0.5, time_cap: 1, mode: hot, interleave: point}
output: {db: tiny.db, dispatch: tiny.json, report: rep-tiny}
"""

SHAPE = dict(q_heads=8, kv_heads=2, head_dim=64, dtype="bf16", page_size=16)


def test_select_from_an_emitted_table(cli, tmp_path):
    (tmp_path / "tiny.yaml").write_text(TINY_SPEC)
    r = subprocess.run([cli, "tune", "tiny.yaml"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    path = tmp_path / "tiny.json"
    d = mactune.Dispatcher(path)  # checked against this CPU, as a serving engine would
    assert d.refusal == "" and d.backend == "cpu"
    table = json.loads(path.read_text())
    assert d.table == table
    for batch, context in [(1, 256), (2, 512)]:
        for hit in [0.0, 1.0]:
            c = d.select(mactune.Problem(batch=batch, **SHAPE), context, hit)
            assert c.source == "table" and isinstance(c.entry, int)
            e = table["entries"][c.entry]
            assert e["batch"][0] <= batch and (e["batch"][1] is None or batch <= e["batch"][1])
            assert c.full.instance == e["full"]["instance"]
            assert c.full.params == e["full"]["params"]
            mac_wins = e["min_hit_rate"] is not None and hit >= e["min_hit_rate"]
            assert c.use_mac == mac_wins
            if c.use_mac:
                assert isinstance(c.mac, mactune.MacChoice)
                assert (c.mac.instance, c.mac.K, c.mac.r) == (
                    e["mac"]["instance"], e["mac"]["K"], e["mac"]["r"])
                assert c.instance == c.mac.instance
                p = c.mac.mac_params(mactune.MacParams(min_context=0))
                assert (p.K, p.r, p.min_context) == (64, 32, 0)
            else:
                assert c.mac is None and c.instance == c.full.instance
            assert c.describe().startswith("mac " if c.use_mac else "full ")


def own_table(mac_instance, full_instance, fingerprint):
    entry = {"shape": {"head_dim": 64, "q_heads": 8, "kv_heads": 2, "dtype": "bf16",
                       "page_size": 16},
             "batch": [1, 4], "context": [1024, None],
             "full": {"instance": full_instance, "params": {"chunk_tokens": 256}},
             "mac": {"instance": mac_instance, "K": 512, "r": 256, "tau": 0.6,
                     "params": {"chunk_tokens": 128, "block_rows": 16, "threads": 2,
                                "isa": "auto", "scale": 0.5, "fast": True, "pick": "newest",
                                "min_context": 512}},
             "min_hit_rate": 0.85, "note": "written by the test"}
    return {"schema": "mactune.dispatch/1",
            "device": {"backend": "cpu", "name": "this CPU", "fingerprint": fingerprint},
            "generated": {"version": "0.1.0", "git_revision": "test", "source_database": "-",
                          "time": "2026-12-01T00:00:00Z"},
            "entries": [entry]}


def cpu_names():
    names = [i.name for i in mactune.cpu.instances() if "hd64" in i.name and i.name.endswith("bf16")]
    mac = next(n for n in names if n.startswith("mac_"))
    return mac, mac.replace("mac_", "full_", 1)


def test_typed_choice_and_fallback(tmp_path):
    mac, full = cpu_names()
    path = tmp_path / "t.json"
    path.write_text(json.dumps(own_table(mac, full, mactune.cpu_fingerprint().digest())))
    d = mactune.Dispatcher(path)
    assert d.refusal == ""
    c = d.select(mactune.Problem(batch=2, **SHAPE), 32768, 0.9)
    assert c.use_mac and c.source == "table" and c.entry == 0 and c.min_hit_rate == 0.85
    p = c.mac.mac_params()  # the session settings the table measured with
    assert (c.mac.tau, p.tau, p.K, p.r) == (0.6, 0.6, 512, 256)
    assert (p.pick, p.min_context) == ("newest", 512)
    assert c.mac.params == {"chunk_tokens": 128, "block_rows": 16, "threads": 2, "isa": "auto",
                            "scale": 0.5, "fast": True, "pick": "newest", "min_context": 512}
    assert type(c.mac.params["chunk_tokens"]) is int and type(c.mac.params["fast"]) is bool
    below = d.select(mactune.Problem(batch=2, **SHAPE), 32768, 0.5)
    assert not below.use_mac and below.instance == full and below.min_hit_rate == 0.85
    # Outside every bucket: the fallback / full attention. A NaN hit rate is a caller's bug:
    # refused by name (tests/python/test_values.py).
    out = d.select(mactune.Problem(batch=8, **SHAPE), 32768, 1.0)
    assert out.source == "fallback" and out.entry is None and not out.use_mac
    assert out.instance.startswith("full_cpu_")


def test_refused_tables_warn_once_and_fall_back(tmp_path):
    mac, full = cpu_names()
    path = tmp_path / "other.json"
    path.write_text(json.dumps(own_table(mac, full, "0123456789abcdef")))
    lines = []
    d = mactune.Dispatcher(path, warn=lines.append)
    assert len(lines) == 1 and lines[0].startswith(f"dispatch table '{path}' refused")
    assert "another device" in lines[0] and d.refusal == lines[0]
    assert d.table is None
    assert d.select(mactune.Problem(batch=1, **SHAPE), 65536, 1.0).source == "fallback"
    # Accepted when the device check is off (tools reading other machines' tables).
    assert mactune.Dispatcher(path, check_device=False).refusal == ""
    # Malformed text and missing files are refused, never raised.
    bad = mactune.Dispatcher.from_text('{"schema": "mactune.dispatch/1", "entries": 3}',
                                       "bad.json", warn=lines.append)
    assert "bad.json" in bad.refusal and len(lines) == 2
    missing = mactune.Dispatcher(tmp_path / "nope.json", warn=lines.append)
    assert "nope.json" in missing.refusal
    assert mactune.Dispatcher().select(mactune.Problem(**SHAPE), 100, 1.0).source == "fallback"
