"""The Python tools' MAC flags come from MacParams' field table (mactune.macflags): every row
is a flag of mactune.calibrate_inloop (tau and min_context by the command's own spellings),
its value reaches the MacParams the command runs with and nothing else moves, a value the row
refuses is one line naming the flag, and mactune.frontier's plan points are MacParams through
the same rows. The tests walk the rows, so a new row is covered with no edit here."""

import argparse
import math

import pytest

import mactune
from mactune import calibrate_inloop, frontier, macflags
from test_replay_fields import runnable

ROWS = macflags.rows()
NAMES = [r["name"] for r in ROWS]
# The rows calibrate_inloop sets by its own flags: the swept taus and the first measured step.
OWN = {"tau": ("--taus", "0.5,0.7"), "min_context": ("--start", "512")}


def parse(*argv):
    return calibrate_inloop.build_parser().parse_args(["-o", "x.yaml", *argv])


def settings(p: mactune.MacParams):
    return {n: getattr(p, n) for n in NAMES}


def test_rows_are_the_table():
    assert NAMES == [r["name"] for r in mactune.MacParams.FIELDS if r["python"]]
    assert {"K", "r", "tau", "pick", "accept_eps", "group_hits"} <= set(NAMES)


def test_defaults_are_the_tables_but_start():
    base = macflags.params(parse(), min_context=1024)
    assert settings(base) == {**settings(mactune.MacParams()), "min_context": 1024}


@pytest.mark.parametrize("row", ROWS, ids=NAMES)
def test_every_row_is_a_calibrate_flag_that_reaches_its_params(row):
    name = row["name"]
    a0 = parse()
    base = macflags.params(a0, min_context=a0.start)
    if name in OWN:  # the command's own spelling, and the table's name as its alias
        flag, text = OWN[name]
        for spelling in (flag, macflags.flag_of(name)):
            a = parse(spelling, text)
            got = a.taus if name == "tau" else macflags.params(a, min_context=a.start)
            assert (got == text) if name == "tau" else (got.min_context == int(text)), spelling
        return
    for v in runnable(row, getattr(base, name)):
        argv = ([macflags.flag_of(name)] if v is True else
                ["--no-" + macflags.flag_of(name)[2:]] if v is False else
                [macflags.flag_of(name), str(v)])
        a = parse(*argv)
        got = macflags.params(a, min_context=a.start)
        assert getattr(got, name) == v, (name, v)
        assert settings(got) == {**settings(base), name: v}, name  # and nothing else moved


def refused_texts(row):
    """Flag texts the row refuses: just past each end of its range, a name not among the
    choices, a fraction for an integer."""
    t = row["type"]
    if t == "choice":
        return ["not-a-choice"]
    out = []
    lo, hi = row["lo"], row["hi"]
    step = 1 if t == "integer" else 1e-3
    if math.isfinite(lo):
        out.append(lo if row["lo_open"] else lo - step)
    if math.isfinite(hi) and hi < 2 ** 62:
        out.append(hi if row["hi_open"] else hi + step)
    out = [str(int(v)) if t == "integer" else repr(float(v)) for v in out]
    return out + (["1.5"] if t == "integer" else ["x"])


@pytest.mark.parametrize("row", [r for r in ROWS if r["type"] != "boolean"
                                 and r["name"] not in OWN], ids=lambda r: r["name"])
def test_every_refused_value_is_one_line_naming_the_flag(row, capsys):
    flag = macflags.flag_of(row["name"])
    texts = refused_texts(row)
    assert texts, row["name"]
    for text in texts:
        with pytest.raises(SystemExit) as e:
            parse(flag, text)
        assert e.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert err.startswith("python -m mactune.calibrate_inloop: error: argument " + flag), \
            (flag, text, err)
        assert text in err or row["name"] in err, (flag, text, err)


def test_a_mistyped_value_says_what_was_expected(capsys):
    with pytest.raises(SystemExit):
        parse("--K", "lots")
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "argument --K" in err and "expected an integer, got 'lots'" in err, err


def test_the_parser_rejects_a_row_it_does_not_know():
    with pytest.raises(SystemExit):
        parse("--k", "5")  # not a row: names are the table's, case and all


@pytest.mark.parametrize("row", ROWS, ids=NAMES)
def test_every_row_reaches_a_frontier_point(row):
    name = row["name"]
    base = frontier.mac_params(frontier._mac())
    assert settings(base) == settings(mactune.MacParams())  # the plan's defaults: the table's
    for v in runnable(row, getattr(base, name)):
        got = frontier.mac_params({**frontier._mac(), name: v})
        assert getattr(got, name) == v, name
        assert settings(got) == {**settings(base), name: v}, name


def test_a_frontier_point_with_an_unknown_key_is_refused():
    with pytest.raises(ValueError, match="unknown setting 'eps'"):
        frontier.mac_params({**frontier._mac(), "eps": 0.5})


def test_plan_points_keep_their_keys():
    # rows.jsonl keys a measured point by its dict: the plans' points keep today's keys.
    for pts in frontier.PLANS.values():
        for pts_of_rule in pts.values():
            for p in pts_of_rule:
                assert set(p) - {"group_hits"} == {"K", "r", "tau", "pick", "accept_eps"}, p
    assert frontier._mac(tau=0.6) == {"K": 512, "r": 256, "tau": 0.6, "pick": "nearest",
                                      "accept_eps": 1.0}


def test_flags_added_twice_are_refused():
    ap = argparse.ArgumentParser()
    macflags.add(ap)
    with pytest.raises(argparse.ArgumentError):
        macflags.add(ap)
