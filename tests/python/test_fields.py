"""The Python classes of the described structs against their C++ field tables
(kernels/fields.h, exposed as CLASS.FIELDS): every row is an attribute of the same name that
keeps its default, takes every value in its range and choices through attributes, keywords and
to_dict(), and refuses the values just outside; the names of earlier releases warn."""

import math
import warnings

import pytest

import mactune


def described():
    out = [mactune.Problem, mactune.MacParams, mactune.ForcedHits, mactune.cpu.EngineConfig]
    if hasattr(mactune, "cuda"):
        out.append(mactune.cuda.EngineConfig)
    return out


def inside(row):
    """Values the row takes (the ends of its range, a middle one; every choice)."""
    t = row["type"]
    if t == "boolean":
        return [True, False]
    if t == "choice":
        return list(row["choices"])
    if t == "instance":
        return ["", "attend_cuda_hd128_g8_t64_s2_bf16"]
    if t == "text":
        return []
    lo, hi = row["lo"], row["hi"]
    if t == "integer":
        lo = int(lo) + (1 if row["lo_open"] else 0)
        hi = min(int(hi) - (1 if row["hi_open"] else 0), 1 << 40) if math.isfinite(hi) else 1 << 20
        return [lo, (lo + hi) // 2, hi]
    lo_v = lo + 1e-3 if row["lo_open"] else lo
    hi_v = (hi - 1e-3 if row["hi_open"] else hi) if math.isfinite(hi) else 1e6
    return [lo_v, (lo_v + hi_v) / 2, hi_v]


def outside(row):
    """Values the row refuses: just past each end of its range, a name not among the choices,
    a value of another type."""
    t = row["type"]
    if t == "boolean":
        return [1, "true"]
    if t in ("choice", "instance"):
        return [7] + (["not-a-choice"] if t == "choice" else ["Bad Name"])
    if t == "text":
        return [7]
    out = ["1"]
    lo, hi = row["lo"], row["hi"]
    if math.isfinite(lo):
        out.append(lo if row["lo_open"] else (lo - 1 if t == "integer" else lo - 1e-3))
    if math.isfinite(hi) and hi < 2 ** 62:
        out.append(hi if row["hi_open"] else (hi + 1 if t == "integer" else hi + 1e-3))
    if t == "integer":
        out.append(1.5)
    return [int(v) if t == "integer" and isinstance(v, float) and v == int(v) else v for v in out]


@pytest.mark.parametrize("cls", described(), ids=lambda c: c.__qualname__)
def test_every_row_is_an_attribute_with_its_default(cls):
    rows = cls.FIELDS
    assert rows, cls
    value = cls()
    shown = value.to_dict()
    for row in rows:
        if not row["python"]:
            continue
        assert getattr(value, row["name"]) == row["default"], row["name"]
        assert shown[row["name"]] == row["default"], row["name"]
        assert row["help"] in getattr(cls, row["name"]).__doc__


@pytest.mark.parametrize("cls", described(), ids=lambda c: c.__qualname__)
def test_values_in_range_round_trip_and_others_are_refused(cls):
    for row in cls.FIELDS:
        if not row["python"]:
            continue
        name = row["name"]
        for v in inside(row):
            a = cls()
            setattr(a, name, v)
            assert getattr(a, name) == v, (name, v)
            b = cls(**{name: v})
            assert b == a and getattr(b, name) == v, (name, v)
            assert cls(**a.to_dict()) == a, (name, v)
        for v in outside(row):
            a = cls()
            with pytest.raises(ValueError) as e:
                setattr(a, name, v)
            assert f"{cls.__name__}.{name}:" in str(e.value), (name, v, str(e.value))
            assert getattr(a, name) == row["default"]  # a refused value changes nothing
            with pytest.raises(ValueError):
                cls(**{name: v})


def test_the_names_are_the_specs_and_old_ones_warn():
    m = mactune.MacParams(K=512, r=128)
    assert (m.K, m.r) == (512, 128)
    assert [r["name"] for r in mactune.MacParams.FIELDS][:2] == ["K", "r"]
    assert "dtype" in mactune.Problem().to_dict() and "kv_dtype" not in mactune.Problem().to_dict()
    with pytest.warns(DeprecationWarning, match="ring_capacity is deprecated: use K"):
        old = mactune.MacParams(ring_capacity=512, band=128)
    assert old == m
    with pytest.warns(DeprecationWarning, match="band is deprecated: use r"):
        assert m.band == 128
    with pytest.warns(DeprecationWarning, match="kv_dtype is deprecated: use dtype"):
        p = mactune.Problem(kv_dtype="f16")
    assert p.dtype == "f16"
    with pytest.warns(DeprecationWarning):
        p.kv_dtype = "bf16"
    assert p.dtype == "bf16"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new names never warn
        mactune.MacParams(K=64, r=16, tau=0.5).to_dict()
        mactune.Problem(dtype="f32").dtype


def test_one_chunk_knob_name_on_both_engines():
    assert mactune.cpu.EngineConfig(chunk_tokens=64).chunk_tokens == 64
    if not hasattr(mactune, "cuda"):
        pytest.skip("no CUDA build: mactune.cuda is absent")
    e = mactune.cuda.EngineConfig(chunk_tokens=64)
    assert e.chunk_tokens == 64 and "chunk_tokens" in e.to_dict()
    with pytest.warns(DeprecationWarning, match="min_chunk is deprecated: use chunk_tokens"):
        old = mactune.cuda.EngineConfig(min_chunk=64)
    assert old == e
