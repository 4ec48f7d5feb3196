"""mactune.replay / calibrate take every MAC setting by its name in MacParams' field table
(kernels/problem.h, exposed as mactune.MacParams.FIELDS), as the CLI's flags do: each row is a
keyword that reaches the run (the returned document echoes the settings each point ran with),
checked by its row; an unknown keyword is refused in one line. The tests walk the rows, so a
new row is covered here without editing this file."""

import json
import subprocess

import numpy as np
import pytest

import mactune
from conftest import TRACES, random_values, repetitive_queries
from mactune import tensorfile
from test_fields import outside

ROWS = mactune.MacParams.FIELDS
NAMES = [row["name"] for row in ROWS]
REPLAY_AXES = ("K", "r", "tau")
CALIBRATE_AXES = {"K": "K", "r": "r", "accept_eps": "accept_eps", "tau": "taus"}


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    """A tiny decode trace (96 steps, 4/2 heads, D 64) whose queries repeat, so MAC hits."""
    rng = np.random.default_rng(20261203)
    steps, q_heads, kv_heads, dim = 96, 4, 2, 64
    path = tmp_path_factory.mktemp("trace") / "tiny.safetensors"
    tensorfile.save(path, {
        "layer0.q_pre": repetitive_queries(rng, steps, 1, q_heads, dim)[:, 0].copy(),
        "layer0.k_pre": random_values(rng, (steps, kv_heads, dim)),
        "layer0.v": random_values(rng, (steps, kv_heads, dim)),
    }, {"rope_theta": "10000"})
    return path


def one_line(e):
    text = str(e.value)
    assert "\n" not in text, text
    return text


def runnable(row, current):
    """Values of the row other than `current` that a run on the tiny trace takes: every other
    choice, the other boolean, a small number near the bottom of the range."""
    t = row["type"]
    if t == "boolean":
        return [not current]
    if t == "choice":
        return [c for c in row["choices"] if c != current]
    if t == "integer":
        lo = int(row["lo"]) + (1 if row["lo_open"] else 0)
        return [next(v for v in (lo + 1, lo + 2) if v != current)]
    if t == "real":
        lo, hi = row["lo"], min(row["hi"], row["lo"] + 1.0)
        return [next(v for v in (lo + (hi - lo) / 2, lo + (hi - lo) / 4) if v != current)]
    pytest.fail(f"{row['name']}: a {t} row; say here which value of it a replay runs")


def settings(entry):
    return {name: entry[name] for name in NAMES}


def test_defaults_are_macparams_own_but_min_context_0(trace):
    # Today's defaults (K 512, r 256, tau 0.45, pick nearest, min_context 0, ...): MacParams'
    # own (the table's), but min_context 0, with which a trace replays from its first step.
    want = {row["name"]: row["default"] for row in ROWS}
    want["min_context"] = 0
    [entry] = mactune.replay(trace)["layers"]
    assert settings(entry) == want
    cal = mactune.calibrate(trace, max_err=1.0, taus=[0.5])["layers"][0]
    assert settings(cal["points"][0]) == {**want, "tau": 0.5}


@pytest.mark.parametrize("row", ROWS, ids=NAMES)
def test_every_row_is_a_replay_keyword_that_reaches_the_run(trace, row):
    name = row["name"]
    [base] = mactune.replay(trace)["layers"]
    for v in runnable(row, base[name]):
        [entry] = mactune.replay(trace, **{name: v})["layers"]
        assert entry[name] == v, (name, v)
        assert settings(entry) == {**settings(base), name: v}, name  # and nothing else moved
        if name in REPLAY_AXES:  # an axis also takes a list: one point per value, in order
            doc = mactune.replay(trace, **{name: [v, base[name]]})
            assert [e[name] for e in doc["layers"]] == [v, base[name]], name


@pytest.mark.parametrize("row", ROWS, ids=NAMES)
def test_every_row_is_a_calibrate_keyword_that_reaches_the_run(trace, row):
    name = row["name"]
    keyword = CALIBRATE_AXES.get(name, name)
    fixed = {"taus": [0.5]} if name != "tau" else {}
    base = mactune.calibrate(trace, max_err=1.0, **fixed)["layers"][0]["points"][0]
    for v in runnable(row, base[name]):
        layer = mactune.calibrate(trace, max_err=1.0, **{**fixed, keyword: v})["layers"][0]
        [point] = layer["points"]
        assert point[name] == v, (name, v)
        assert settings(point) == {**settings(base), name: v}, name
        assert layer["chosen"][name] == v, name  # the pick: every point meets max_err 1
        if name in CALIBRATE_AXES:
            layer = mactune.calibrate(trace, max_err=1.0,
                                      **{**fixed, keyword: [v, base[name]]})["layers"][0]
            assert [p[name] for p in layer["points"]] == [v, base[name]], name


def cli_text(v):
    return str(v).lower() if isinstance(v, bool) else str(v)


def without_times(doc):
    return {k: without_times(v) if isinstance(v, dict) else
            [without_times(x) for x in v] if isinstance(v, list) else v
            for k, v in doc.items() if k not in ("seconds", "path")}


@pytest.mark.parametrize("row", ROWS, ids=NAMES)
def test_every_keyword_runs_as_its_cli_flag_does(cli, trace, tmp_path, row):
    # The same row, set through Python and through `mactune replay --NAME` (cli/field_flags.h),
    # gives the same document.
    name = row["name"]
    [base] = mactune.replay(trace)["layers"]
    for v in runnable(row, base[name]):
        got = mactune.replay(trace, **{name: v})
        out = tmp_path / "r.json"
        flag = "--" + name.replace("_", "-")
        r = subprocess.run([cli, "replay", "--trace", str(trace), f"{flag}={cli_text(v)}",
                            "--json", str(out)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert without_times(got) == without_times(json.loads(out.read_text())), name


def test_the_engine_runs_the_settings_given(trace):
    # Not only echoed: a setting changes what the engine does.
    free = mactune.replay(TRACES / "text_1k.safetensors", K=256, r=64)["layers"][0]
    grouped = mactune.replay(TRACES / "text_1k.safetensors", K=256, r=64,
                             group_hits=True)["layers"][0]
    assert free["group_mixed_rate"] > 0 and grouped["group_mixed_rate"] == 0
    assert grouped["hit_rate"] < free["hit_rate"]
    loose = mactune.replay(trace, K=32, r=8, rectify="subtract")["layers"][0]
    tight = mactune.replay(trace, K=32, r=8, rectify="subtract",
                           subtract_guard=0.999)["layers"][0]
    assert tight["guard_fires"] > loose["guard_fires"]
    late = mactune.replay(trace, min_context=64)["layers"][0]
    assert late["eligible_steps"] == 96 - 64


@pytest.mark.parametrize("row", ROWS, ids=NAMES)
def test_a_bad_value_is_one_line_naming_the_keyword(trace, row):
    name = row["name"]
    for fn, keyword, extra in [(mactune.replay, name, {}),
                               (mactune.calibrate, CALIBRATE_AXES.get(name, name),
                                {"max_err": 1.0})]:
        for v in outside(row):
            with pytest.raises(mactune.InputError) as e:
                fn(trace, **extra, **{keyword: v})
            assert one_line(e).startswith(f"{fn.__name__}: {keyword}: "), (keyword, v)


def test_bad_values_say_why():
    with pytest.raises(mactune.InputError) as e:
        mactune.replay("never-read.safetensors", subtract_guard=0)
    assert one_line(e) == ("replay: subtract_guard: value 0 is out of range (subtract_guard "
                           "must be in (0, 1))")
    with pytest.raises(mactune.InputError) as e:
        mactune.replay("never-read.safetensors", pick="oldest")
    assert one_line(e) == ("replay: pick: unknown pick rule 'oldest' (expected nearest, newest or "
                           "normalized)")
    with pytest.raises(mactune.InputError) as e:
        mactune.replay("never-read.safetensors", summary_dtype="f16")
    assert one_line(e) == "replay: summary_dtype: 'f16' is not one of bf16 or f32"
    with pytest.raises(mactune.InputError) as e:
        mactune.calibrate("never-read.safetensors", max_err=1.0, group_hits=1)
    assert one_line(e) == "calibrate: group_hits: expected True or False, got int 1"
    with pytest.raises(mactune.InputError) as e:
        mactune.replay("never-read.safetensors", r=[64, 0])
    assert one_line(e).startswith("replay: r: value 0 is out of range")
    with pytest.raises(mactune.InputError) as e:
        mactune.replay("never-read.safetensors", tau=[])
    assert "replay: tau: an empty list" in one_line(e)
    with pytest.raises(mactune.InputError) as e:
        mactune.replay("never-read.safetensors", K=b"\x02")  # bytes are not a list of ints
    assert one_line(e).startswith("replay: K: expected an integer, got bytes")


@pytest.mark.parametrize("fn, extra, others", [
    (mactune.replay, {}, ["layers", "kv_dtype", "engine", "threads", "baseline", "rope_theta"]),
    (mactune.calibrate, {"max_err": 1.0},
     ["max_err", "metric", "against_ref", "layers", "kv_dtype", "engine", "threads",
      "rope_theta", "output"]),
])
def test_an_unknown_keyword_is_one_line_listing_the_accepted_ones(fn, extra, others):
    with pytest.raises(mactune.InputError) as e:
        fn("never-read.safetensors", subtract_gaurd=0.5, **extra)
    text = one_line(e)
    assert text.startswith(f"{fn.__name__}: unknown keyword 'subtract_gaurd' (keywords: "), text
    listed = text[text.index("(keywords: ") + len("(keywords: "):-1].split(", ")
    mac = [CALIBRATE_AXES.get(n, n) if fn is mactune.calibrate else n for n in NAMES]
    assert listed == others + mac


def test_calibrate_takes_tau_as_the_tables_name_of_taus(trace):
    a = mactune.calibrate(trace, max_err=1.0, taus=[0.5, 0.7])
    b = mactune.calibrate(trace, max_err=1.0, tau=[0.5, 0.7])
    assert [p["tau"] for p in b["layers"][0]["points"]] == [0.5, 0.7]
    assert a["layers"][0]["chosen"] == b["layers"][0]["chosen"]
    with pytest.raises(mactune.InputError) as e:
        mactune.calibrate(trace, max_err=1.0, taus=[0.5], tau=[0.7])
    assert one_line(e) == "calibrate: taus and tau name the same setting"
    every = mactune.calibrate(trace, max_err=1.0, taus=None)  # None: the default grid
    assert len(every["layers"][0]["points"]) == len(mactune.calibrate(trace, max_err=1.0)[
        "layers"][0]["points"]) > 5


def test_numpy_values_are_taken_as_their_python_values(trace):
    doc = mactune.replay(trace, K=np.int64(64), tau=np.array([0.3, 0.6]),
                         accept_eps=np.float32(0.5), group_hits=np.bool_(True))
    assert [(e["K"], e["tau"], e["accept_eps"], e["group_hits"]) for e in doc["layers"]] == [
        (64, 0.3, 0.5, True), (64, 0.6, 0.5, True)]


def test_the_signature_and_docstring_list_every_row_with_its_default():
    for fn, keyword in [(mactune.replay, lambda n: n),
                        (mactune.calibrate, lambda n: CALIBRATE_AXES.get(n, n))]:
        doc = fn.__doc__
        signature = doc.splitlines()[0]
        for row in ROWS:
            k = keyword(row["name"])
            assert f"\n  {k}: {row['help']}" in doc, (fn.__name__, k)
            default = 0 if k == "min_context" else row["default"]
            shown = "None" if k == "taus" else repr(default)
            assert f" {k}: " in signature, (fn.__name__, k, signature)
            segment = signature.split(f" {k}: ")[1].split(", ")[0]
            assert segment.endswith(f" = {shown}"), (fn.__name__, k, segment)
