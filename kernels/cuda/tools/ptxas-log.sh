#!/usr/bin/env bash
# CUDA compiler launcher: runs the compile command given after LOGDIR and keeps its
# `-Xptxas -v` report in LOGDIR/<object file name>.ptxas.log (tests/cuda checks those reports
# for spills and stack frames). Other compiler output (warnings, errors) passes through.
set -u
logdir=$1
shift
out=""
prev=""
for a in "$@"; do
  [[ $prev == "-o" ]] && out=$a
  prev=$a
done
mkdir -p "$logdir"
log="$logdir/$(basename "${out:-unknown}").ptxas.log"
"$@" 2>"$log.tmp"
rc=$?
grep -v -E '^ptxas info|^ {4}[0-9]+ bytes (stack frame|spill)|^ {4}Function properties' "$log.tmp" >&2
mv -f "$log.tmp" "$log"
exit $rc
