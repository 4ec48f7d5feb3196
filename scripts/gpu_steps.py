#!/usr/bin/env python3
"""The state of one step of scripts/gpu-check.sh, decided from what the step left behind, never
from its free text: its exit code, GoogleTest's XML reports (their skipped count and each skip's
own message), and the JSON-lines records a mactune program writes (a `skip` record says why it
skipped, an `error` record what failed). Appends one `step` record to STEPS and prints one line.

    gpu_steps.py record STEPS --name N --part P --rc RC --seconds S --limit L
                 [--gtest XML]... [--shards K] [--records JSONL] [--skip REASON]
                 [--expect FILE]... [--code RC=TEXT]...
    gpu_steps.py summary STEPS          the table of every step recorded so far
    gpu_steps.py failed STEPS           STEP,... to run again: failed, timed out, or skipped
                                        because the part's budget ran out (--deferred)

States: ok, skipped (with the reason), failed (with what failed), timed out. A step that exits 77
skipped (the reason comes from its last `skip` record); 124 and 137 are the timeout's own codes.
"""
import argparse
import json
import os
import sys
import xml.etree.ElementTree as ET

SKIP_RC = 77
TIMEOUT_RCS = (124, 137)


def read_records(path):
    """The JSON-lines records of `path` ([] when it does not exist); a torn last line (a kill
    mid-write) is dropped, a bad line elsewhere is an error record of its own."""
    if not path or not os.path.exists(path):
        return []
    out = []
    with open(path) as f:
        lines = f.read().split("\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except ValueError:
            if i < len(lines) - 1 and any(x.strip() for x in lines[i + 1:]):
                out.append({"kind": "error", "section": "records",
                            "what": f"{path}:{i + 1}: not JSON"})
    return out


def skip_message(text):
    """gtest writes `file:line\\nmessage`; the message is the reason."""
    lines = [x for x in (text or "").split("\n") if x.strip()]
    return lines[-1].strip() if lines else "no reason given"


def read_gtest(paths, shards):
    """Totals over GoogleTest XML reports: tests, failed, skipped, the failed tests' names, the
    distinct skip reasons with their counts, and the reports that are missing."""
    t = {"tests": 0, "failed": 0, "skipped": 0, "disabled": 0, "failures": [], "reasons": {},
         "missing": []}
    seen = 0
    for p in paths:
        try:
            root = ET.parse(p).getroot()
        except (OSError, ET.ParseError):
            t["missing"].append(os.path.basename(p))
            continue
        seen += 1
        for case in root.iter("testcase"):
            t["tests"] += 1
            if case.find("failure") is not None or case.find("error") is not None:
                t["failed"] += 1
                t["failures"].append(f"{case.get('classname')}.{case.get('name')}")
            sk = case.find("skipped")
            if sk is not None:
                t["skipped"] += 1
                why = skip_message(sk.get("message") or sk.text)
                t["reasons"][why] = t["reasons"].get(why, 0) + 1
            if case.get("status") == "notrun":
                t["disabled"] += 1
    for i in range(seen + len(t["missing"]), shards):
        t["missing"].append(f"shard {i}")
    return t


def reasons_text(reasons):
    return "; ".join(f"{why} (x{n})" if n > 1 else why for why, n in sorted(reasons.items()))


def decide(a):
    """(state, detail, counts) of the step described by the arguments."""
    codes = dict(c.split("=", 1) for c in a.code)
    records = read_records(a.records)
    skips = [r for r in records if r.get("kind") == "skip"]
    errors = [r for r in records if r.get("kind") == "error"]
    counts = {}
    if a.skip:
        return "skipped", a.skip, counts
    if a.rc in TIMEOUT_RCS:
        detail = f"killed at its {a.limit} s limit"
        if a.gtest:
            g = read_gtest(a.gtest, a.shards)
            counts = {k: g[k] for k in ("tests", "failed", "skipped")}
            detail += f"; {g['tests']} tests reported, {g['failed']} failed"
            if g["failures"]:
                detail += ": " + ", ".join(g["failures"][:8])
            if g["missing"]:
                detail += f"; no report from {', '.join(g['missing'])}"
        return "timed out", detail, counts
    if a.gtest:
        g = read_gtest(a.gtest, a.shards)
        counts = {k: g[k] for k in ("tests", "failed", "skipped")}
        passed = g["tests"] - g["failed"] - g["skipped"] - g["disabled"]
        text = f"{passed} passed, {g['failed']} failed, {g['skipped']} skipped"
        if g["reasons"]:
            text += f" ({reasons_text(g['reasons'])})"
        if g["failed"]:
            return "failed", text + ": " + ", ".join(g["failures"][:8]), counts
        if g["missing"]:
            return "failed", f"exit {a.rc}; no report from {', '.join(g['missing'])}", counts
        if a.rc != 0:
            return "failed", f"exit {a.rc}; {text}", counts
        if g["tests"] == 0:
            return "failed", "no test ran", counts
        if g["skipped"] == g["tests"]:
            return "skipped", reasons_text(g["reasons"]), counts
        return "ok", text, counts
    if a.rc == SKIP_RC:
        if skips:
            return "skipped", skips[-1].get("reason", "no reason given"), counts
        return "failed", f"exit {SKIP_RC} (skip) but no skip record in {a.records}", counts
    if a.rc != 0:
        what = codes.get(str(a.rc), f"exit {a.rc}")
        if errors:
            what += ": " + "; ".join(f"{e.get('section')}: {e.get('what')}" for e in errors[:4])
        return "failed", what, counts
    if errors:
        return "failed", "exit 0 but " + "; ".join(e.get("what", "") for e in errors[:4]), counts
    missing = [f for f in a.expect if not os.path.exists(f) or os.path.getsize(f) == 0]
    if missing:
        return "failed", "wrote no " + ", ".join(os.path.basename(f) for f in missing), counts
    n = sum(1 for r in records if r.get("kind") not in ("skip", "error", "env"))
    return "ok", (f"{n} records" if a.records else ""), counts


def line(r):
    text = f"{r['state']}" + (f": {r['detail']}" if r["detail"] else "")
    return f"{r['name']:<15} {r['seconds']:4d}s of {r['limit']:4d}s  {text}"


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("steps")
    rec.add_argument("--name", required=True)
    rec.add_argument("--part", type=int, required=True)
    rec.add_argument("--rc", type=int, default=0)
    rec.add_argument("--seconds", type=int, default=0)
    rec.add_argument("--limit", type=int, default=0)
    rec.add_argument("--gtest", action="append", default=[])
    rec.add_argument("--shards", type=int, default=1)
    rec.add_argument("--records")
    rec.add_argument("--skip")
    rec.add_argument("--expect", action="append", default=[])
    rec.add_argument("--code", action="append", default=[])
    rec.add_argument("--deferred", action="store_true")
    for name in ("summary", "failed"):
        sub.add_parser(name).add_argument("steps")
    a = ap.parse_args()
    steps = [r for r in read_records(a.steps) if r.get("kind") == "step"]
    if a.cmd == "summary":
        for r in steps:
            print(line(r))
        return 0
    if a.cmd == "failed":
        again = [r["name"] for r in steps if r["name"] != "env" and
                 (r["state"] in ("failed", "timed out") or r.get("deferred"))]
        print(",".join(dict.fromkeys(again)))
        return 0
    state, detail, counts = decide(a)
    r = {"kind": "step", "name": a.name, "part": a.part, "state": state, "detail": detail,
         "rc": a.rc, "seconds": a.seconds, "limit": a.limit, "deferred": a.deferred, **counts}
    with open(a.steps, "a") as f:
        f.write(json.dumps(r) + "\n")
    print(line(r), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
