# shellcheck shell=bash disable=SC2154
# scripts/gpu-check.sh --dry-run (sourced by it): every rule of the lease checked on the build
# machine, on a prepared bundle, with no GPU. It fails when
#   - a binary is missing, needs a shared library outside glibc, or the MANIFEST lacks the glibc
#     version the bundle needs; a section the script names is not in the binary;
#   - a part's step caps exceed its budget, or the two calls with their machine starts and idle
#     waits exceed one lease (the time plan is printed);
#   - the device flow of either part, run here with $OUT in a temporary folder, records a step
#     as failed or timed out, records a skip without a reason, records a GPU step as ok while
#     no GPU is usable, misses a step, or leaves more than 8 files, a file over 16 MiB, more
#     than 64 MiB, or a path too deep or oddly named under $OUT;
#   - the report, fed the real binary's and the real peer's --dry records (the same sections
#     and shapes a lease measures, placeholder numbers) and the steps of part 1, finds a record
#     lacking a key it reads or a kind it renders without records (--strict), or accepts a
#     record with a key removed; a grid shape has no peer shape;
#   - the tree + bundle + carried wheels exceed 64 MiB.

dry_run() {  # dry_run BUNDLE
  local bundle=$1 bad=0 b lib tmp
  fail() { echo "gpu-check --dry-run: FAIL: $*" >&2; bad=1; }
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpu-dry.XXXXXX")
  # 1. The bundle: complete and self-sufficient.
  for b in "${bins[@]}"; do
    [[ -x $bundle/$b ]] || { fail "$b missing from $bundle"; continue; }
    for lib in $(readelf -d "$bundle/$b" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      [[ $lib =~ $allowed_libs ]] || fail "$b needs $lib, which a GPU image without dev packages lacks"
    done
    ldd "$bundle/$b" 2>&1 | grep -q "not found" && fail "$b: ldd finds an unresolved library"
  done
  local glibc
  glibc=$(sed -n 's/^glibc_required: //p' "$bundle/MANIFEST" 2>/dev/null)
  [[ $glibc =~ ^[0-9]+\.[0-9]+ ]] || fail "the MANIFEST names no glibc version (got '${glibc}')"
  [[ -s $bundle/plan.jsonl ]] || fail "no plan.jsonl (the grid's shapes) in $bundle"
  "$bundle/mactune_gpu_check" list | grep -q . || fail "mactune_gpu_check list lists no instance"
  local have s
  have=$("$bundle/mactune_gpu_check" sections | awk '{print $1}')
  for s in copy grid check match instances ring pages sanitize ncu ncu_match; do
    grep -qx "$s" <<<"$have" || fail "gpu-check.sh names section $s, which mactune_gpu_check lacks"
  done
  # 2. The time plan: each part inside its budget, both calls inside one lease.
  local part n sum plan_text="" total=0
  for part in 1 2; do
    sum=${cap_s[env]}
    for n in $(part_steps "$part" ""); do sum=$((sum + ${cap_s[$n]})); done
    ((sum <= ${budget_s[$part]} - tail_s)) ||
      fail "part $part: step caps sum to $sum s (> ${budget_s[$part]} - $tail_s s)"
    ((${call_timeout_s[$part]} >= ${budget_s[$part]} + tail_s && ${call_timeout_s[$part]} <= 600)) ||
      fail "part $part: timeout_s ${call_timeout_s[$part]} must be in [budget + $tail_s, 600]"
    plan_text+="  part $part: start <= ${start_s} s + run <= ${call_timeout_s[$part]} s (budget ${budget_s[$part]} s, caps $sum s) + idle ${idle_s} s"$'\n'
    total=$((total + start_s + ${call_timeout_s[$part]} + idle_s))
  done
  ((total <= lease_s)) || fail "both calls need up to $total s (> the lease's $lease_s s)"
  # 3. The device flow of each part here: states and what it leaves under $OUT.
  local usable=0 out took summary=""
  "$bundle/mactune_gpu_check" probe >/dev/null 2>&1 && usable=1
  for part in 1 2; do
    out=$tmp/out$part
    local t0=$SECONDS steps
    mapfile -t steps < <(part_steps "$part" "")
    (OUT=$out device "$bundle" "$part" "${steps[@]}") >"$tmp/flow$part.log" 2>&1
    took=$((SECONDS - t0))
    grep -q "==== gpu-check part $part" "$tmp/flow$part.log" ||
      fail "part $part printed no summary ($tmp/flow$part.log)"
    python3 - "$out/steps.jsonl" "$usable" env "${steps[@]}" <<'PY' || bad=1
import json, sys
path, usable, want = sys.argv[1], sys.argv[2] == "1", sys.argv[3:]
try:
    steps = [json.loads(x) for x in open(path) if x.strip()]
except (OSError, ValueError) as e:
    sys.exit(f"gpu-check --dry-run: FAIL: {path}: {e}")
bad = []
names = [s["name"] for s in steps]
if names != want:
    bad.append(f"steps recorded {names}, expected {want}")
for s in steps:
    if s["state"] in ("failed", "timed out"):
        bad.append(f"{s['name']} {s['state']}: {s['detail']}")
    if s["state"] == "skipped" and not s["detail"].strip():
        bad.append(f"{s['name']} skipped without a reason")
    if s["state"] == "ok" and not usable and s["name"] not in ("env", "sass"):
        bad.append(f"{s['name']} is ok with no usable GPU here: a skip read as a pass")
for b in bad:
    print(f"gpu-check --dry-run: FAIL: part steps: {b}", file=sys.stderr)
sys.exit(1 if bad else 0)
PY
    local files total_b=0 count=0 f size
    files=$(cd "$out" && find . -type f | sed 's|^\./||')
    for f in $files; do
      count=$((count + 1))
      size=$(stat -c %s "$out/$f")
      total_b=$((total_b + size))
      ((size <= 16 * 1024 * 1024)) || fail "part $part: \$OUT/$f is $size bytes (> 16 MiB)"
      [[ $f =~ ^([A-Za-z0-9._-]+/){0,2}[A-Za-z0-9._-]+$ ]] || fail "part $part: \$OUT/$f: too deep or odd characters"
    done
    ((count <= 8)) || fail "part $part leaves $count files under \$OUT (> 8)"
    ((total_b <= 64 * 1024 * 1024)) || fail "part $part: \$OUT holds $total_b bytes (> 64 MiB)"
    for f in logs.tar.gz steps.jsonl results.md results.json; do
      [[ -f $out/$f ]] || fail "part $part: \$OUT/$f not written"
    done
    summary+="  part $part here: ${took} s, \$OUT $count files, $total_b bytes"$'\n'
  done
  # 4. The report on the real programs' dry records.
  local dry=$tmp/dry
  mkdir -p "$dry"
  "$bundle/mactune_gpu_check" run "$dry/results.jsonl" --dry >"$dry/binary.log" 2>&1 ||
    fail "mactune_gpu_check run --dry failed ($dry/binary.log)"
  python3 "$root/scripts/gpu_peer.py" --dry "$bundle/plan.jsonl" "$dry/peer.jsonl" >/dev/null ||
    fail "gpu_peer.py --dry failed"
  python3 "$root/scripts/gpu_report.py" --strict "$dry/report" "$dry/results.jsonl" \
    "$dry/peer.jsonl" "$tmp/out1/steps.jsonl" >/dev/null 2>"$dry/report.err" ||
    fail "gpu_report.py --strict on the dry records: $(cat "$dry/report.err")"
  python3 - "$dry/results.jsonl" "$dry/peer.jsonl" "$dry/cut.jsonl" <<'PY' || bad=1
import json, sys
res = [json.loads(x) for x in open(sys.argv[1])]
peer = {(r["context"], r["batch"], r["group"]) for r in map(json.loads, open(sys.argv[2]))
        if r["kind"] == "peer"}
grid = {(r["context"], r["batch"], r["group"]) for r in res
        if r["kind"] == "row" and r["section"] == "grid"}
if grid != peer:
    sys.exit(f"gpu-check --dry-run: FAIL: grid shapes {sorted(grid - peer)} have no peer shape, "
             f"peer shapes {sorted(peer - grid)} no grid row")
cut = next(r for r in res if r["kind"] == "row")
del cut["mac_ms"]
with open(sys.argv[3], "w") as f:
    f.write("\n".join(json.dumps(r) for r in res) + "\n")
PY
  python3 "$root/scripts/gpu_report.py" "$dry/cut" "$dry/cut.jsonl" >/dev/null 2>&1 &&
    fail "gpu_report.py accepted a row without mac_ms: a renamed key would print as a number"
  # 5. What travels: tracked + untracked-not-ignored files, shared/, the bundle, carried wheels.
  local tree carried=0 bsize travel
  tree=$(cd "$root" && git ls-files -z -co --exclude-standard | xargs -0 -r stat -c %s 2>/dev/null |
    awk '{s += $1} END {print s + 0}')
  [[ -d $root/shared ]] && tree=$((tree + $(du -sb "$root/shared" | cut -f1)))
  bsize=$(du -sb "$bundle" | cut -f1)
  [[ -d $root/.whl ]] && carried=$(du -sb "$root/.whl" | cut -f1)
  travel=$((tree + bsize + carried))
  ((travel <= 64 * 1024 * 1024)) || fail "tree $tree + bundle $bsize + wheels $carried = $travel bytes (> 64 MiB)"
  mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
  echo "gpu-check --dry-run: bundle $bundle: ${#bins[@]} binaries, $(mb "$bsize") MiB, glibc $glibc," \
    "$("$bundle/mactune_gpu_check" list | wc -l) instances; travels $(mb "$travel") MiB (tree" \
    "$(mb "$tree") + bundle $(mb "$bsize") + wheels $(mb "$carried")) of 64 MiB"
  echo "time plan (one lease, $lease_s s): up to $total s"
  printf '%s' "$plan_text" "$summary"
  if ((show)); then
    echo "---- the steps:"
    for n in "${lease_steps[@]}"; do
      printf '  %-15s part %s, cap %3s s: %s\n' "$n" "${part_of[$n]/0/1 and 2}" "${cap_s[$n]}" "${what_of[$n]}"
    done
    for part in 1 2; do echo "---- part $part here:"; sed -n '/^====/,$p' "$tmp/flow$part.log"; done
    echo "---- the report of the dry records (placeholder numbers):"
    cat "$dry/report/results.md"
  fi
  rm -rf "$tmp"
  ((bad == 0)) && echo "gpu-check --dry-run: every rule holds"
  return $bad
}
