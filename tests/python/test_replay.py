"""mactune.replay / calibrate / Trace: the same fields as the CLI's --json documents."""

import json
import subprocess

import numpy as np
import pytest

import mactune
from conftest import TRACES

TRACE = TRACES / "text_1k.safetensors"


def strip(doc, keys=("seconds", "path")):
    """The document without wall times and file paths (the only fields that differ)."""
    if isinstance(doc, dict):
        return {k: strip(v, keys) for k, v in doc.items() if k not in keys}
    if isinstance(doc, list):
        return [strip(v, keys) for v in doc]
    return doc


def test_replay_matches_the_cli_json(cli, tmp_path):
    got = mactune.replay(TRACE, K=512, r=[256, 64], tau=0.45)
    out = tmp_path / "r.json"
    r = subprocess.run([cli, "replay", "--trace", str(TRACE), "--K", "512", "--r", "256,64",
                        "--tau", "0.45", "--json", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    want = json.loads(out.read_text())
    assert strip(got) == strip(want)
    assert [p["r"] for p in got["layers"]] == [256, 64]
    first = got["layers"][0]
    # The figures docs/replay.md reports for this setting (CPU engine, f32).
    assert abs(first["hit_rate"] - 0.686) < 0.01 and first["rel_err"]["p99"] < 0.03
    assert first["full_vs_ref_max"] < 1e-5


def test_calibrate_matches_the_cli_json(cli, tmp_path):
    taus = [0.6, 0.9, 0.98]
    sched = tmp_path / "py.yaml"
    got = mactune.calibrate([TRACE], max_err=0.01, taus=taus, output=sched)
    out = tmp_path / "c.json"
    r = subprocess.run([cli, "calibrate", "--trace", str(TRACE), "--max-err", "0.01", "--taus",
                        ",".join(map(str, taus)), "-o", str(tmp_path / "cli.yaml"), "--json",
                        str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    want = json.loads(out.read_text())
    schedule = got.pop("schedule")
    assert strip(got) == strip(want)
    layer = got["layers"][0]
    assert layer["layer"] == 2 and len(layer["points"]) == 3
    assert layer["pick"] is not None and layer["points"][layer["pick"]]["within_budget"]
    assert layer["chosen"]["tau"] == layer["points"][layer["pick"]]["tau"]
    assert "format: mactune-layer-schedule" in schedule and sched.read_text().count("layer: 2")


def test_replay_errors_are_input_errors(tmp_path):
    with pytest.raises(mactune.InputError, match="nope.safetensors"):
        mactune.replay(tmp_path / "nope.safetensors")
    with pytest.raises(mactune.InputError, match="has no layer 7"):
        mactune.replay(TRACE, layers=[7])
    with pytest.raises(mactune.InputError, match="tau"):
        mactune.replay(TRACE, tau="high")
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{}")
    with pytest.raises(mactune.InputError, match="bad.safetensors"):
        mactune.Trace(bad)


def test_trace_reader():
    t = mactune.Trace(TRACE)
    assert t.layers == [2] and t.rope_theta == 10000.0 and len(t.sha256) == 64
    layer = t.load_layer(2)
    assert layer["q_pre"].shape == (1024, 8, 64) and layer["k_pre"].shape == (1024, 2, 64)
    assert layer["o_ref"].dtype == np.float32
    assert t.metadata["layers_included"] == "2"
