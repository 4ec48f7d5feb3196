"""Values checked where they enter from Python (issue 30): one-line errors naming the argument,
never nanobind's multi-line overload listing, std::bad_cast, a leak, or silently wrong answers."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import mactune
from conftest import TRACES, random_values


def options(batch=1, threads=1):
    return mactune.cpu.SessionOptions(
        shape=mactune.Problem(batch=batch, q_heads=8, kv_heads=2, head_dim=64, dtype="f32",
                              page_size=16),
        mac=mactune.MacParams(K=32, r=8, min_context=0),
        engine=mactune.cpu.EngineConfig(threads=threads), max_context=256)


def one_line(excinfo):
    text = str(excinfo.value)
    assert "\n" not in text, text
    return text


def test_a_list_where_an_array_is_expected_is_one_line(rng):
    s = mactune.cpu.Session(options())
    rid = s.add_request()
    k = random_values(rng, (2, 64))
    with pytest.raises(mactune.InputError) as e:
        s.step(rid, [[0.5] * 64] * 8, k, k)
    msg = one_line(e)
    assert msg.startswith("q: expected a float32 array") and "numpy.asarray" in msg
    with pytest.raises(mactune.InputError) as e:
        s.prefill(rid, random_values(rng, (1, 8, 64)), (1, 2), k[None])
    assert one_line(e).startswith("k: expected a float32 array")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_steps_with_nan_or_inf_inputs_are_refused(rng, bad):
    s = mactune.cpu.Session(options())
    rid = s.add_request()
    q = random_values(rng, (8, 64))
    k = random_values(rng, (2, 64))
    v = random_values(rng, (2, 64))
    q[3, 17] = bad
    with pytest.raises(mactune.InputError) as e:
        s.step(rid, q, k, v)
    assert "q: " in one_line(e) and "at [3, 17]" in str(e.value)
    v[1, 2] = bad
    with pytest.raises(mactune.InputError) as e:
        s.prefill(rid, random_values(rng, (1, 8, 64)), k[None], v[None])
    assert "v: " in one_line(e) and "at [0, 1, 2]" in str(e.value)
    assert s.length(rid) == 0  # nothing was appended


def test_too_many_threads_are_refused_by_name():
    with pytest.raises(mactune.InputError) as e:
        mactune.cpu.Session(options(threads=600))
    assert "threads = 600: at most" in one_line(e)


def test_trace_of_bytes_path_opens_and_bad_types_are_one_line():
    path = str(TRACES / "text_1k.safetensors")
    t = mactune.Trace(path.encode())
    assert t.layers
    with pytest.raises(TypeError) as e:
        mactune.Trace(3)
    assert "bad_cast" not in one_line(e)
    with pytest.raises(mactune.InputError) as e:
        mactune.Trace(b"/nonexistent/x.safetensors")
    assert "bad_cast" not in one_line(e)


def test_replay_lists_are_checked():
    path = TRACES / "text_1k.safetensors"
    with pytest.raises(mactune.InputError) as e:
        mactune.replay(path, K=[64, 64])
    assert "K: 64 is listed twice" in one_line(e)
    with pytest.raises(mactune.InputError) as e:
        mactune.replay(path, layers=[])
    assert "layers: an empty list" in one_line(e)
    with pytest.raises(mactune.InputError) as e:
        mactune.calibrate(path, max_err=0.1, taus=[0.5, 0.5])
    assert "tau 0.5 is listed twice" in one_line(e)


SHAPE = dict(q_heads=8, kv_heads=2, head_dim=64, dtype="bf16", page_size=16)


@pytest.mark.parametrize("context, hit, what", [
    (-5, 0.5, "context: -5"),
    (0, 0.5, "context: 0"),
    (1024, float("nan"), "expected_hit_rate: nan"),
    (1024, 2.0, "expected_hit_rate: 2"),
    (1024, -0.1, "expected_hit_rate: -0.1"),
])
def test_select_refuses_what_no_engine_asks(context, hit, what):
    d = mactune.Dispatcher()
    with pytest.raises(ValueError) as e:
        d.select(mactune.Problem(batch=1, **SHAPE), context, hit)
    assert one_line(e).startswith(what)
    with pytest.raises(ValueError) as e:  # a field out of its table's range: at assignment
        mactune.Problem(batch=0, **SHAPE)
    assert one_line(e).startswith("Problem.batch: value 0 is out of range")
    with pytest.raises(ValueError) as e:  # fields that do not go together: at select
        d.select(mactune.Problem(batch=1, **dict(SHAPE, kv_heads=3)), 1024, 0.5)
    assert one_line(e).startswith("problem: kv_heads = 3 does not divide q_heads = 8")
    assert d.select(mactune.Problem(batch=1, **SHAPE), 1024, 1.0).source == "fallback"


def test_dispatcher_with_a_warn_callback_on_a_bad_path_does_not_leak(tmp_path):
    # A callback that holds the Dispatcher (a cycle through C++) and one that raises: at exit,
    # nanobind reports any instance still alive ("leaked"); there must be none.
    script = textwrap.dedent(f"""
        import mactune
        lines, holder = [], {{}}
        d = mactune.Dispatcher({str(tmp_path / 'missing.json')!r},
                               warn=lambda l, h=holder: lines.append(l))
        holder["d"] = d  # the callback, if kept, would hold the Dispatcher: a cycle
        assert len(lines) == 1 and "refused" in lines[0], lines
        d2 = mactune.Dispatcher(b{str(tmp_path / 'missing.json')!r}, warn=lines.append)
        try:
            mactune.Dispatcher("/nonexistent.json", warn=3)
        except mactune.InputError as e:
            assert "warn: expected a callable" in str(e)
        else:
            raise SystemExit("warn=3 accepted")
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "leaked" not in r.stderr, r.stderr
