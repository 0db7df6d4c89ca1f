#!/usr/bin/env bash
# //tools/bench:pipeline --quick on 4 emulated GPUs: both tables print, the summary line ends the
# output, the bubble is near theory everywhere (within 0.1: a smoke test, run beside other tests and
# under ASan, where each action's own work grows against its 20 ms wait; the tight bound, 0.05, is
# pipeline_schedule_test's), at p = 4, m = 8 1F1B's stages hold at most p / m = half of GPipe's
# micro-batches (checked as <= 0.6), and the auto grid ran (its figures are timings of a loaded
# machine here: only their range is checked; the bench's targets are read off a quiet run).
set -uo pipefail
bench="$1"
fail() { echo "FAIL: $*"; exit 1; }
out="$(EMBER_EMULATED_GPUS=4 EMBER_EMULATED_GPU_MEMORY=512M "$bench" --quick --action-ms 20 2>&1)" ||
  fail "the bench exited $?: $out"
echo "$out"
grep -q '^bubble (idle fraction)' <<<"$out" || fail "no bubble table"
grep -q '^stored activations per device' <<<"$out" || fail "no memory table"
grep -q '^auto (Schedule::kAuto)' <<<"$out" || fail "no auto table"
last="$(tail -n 1 <<<"$out")"
summary='^bench pipeline: bubble_err_max=([0-9.]+) 1f1b_mem_ratio=([0-9.]+) emulated=1 '
summary+='auto_within_5pct=([0-9.]+) sim_err_max=([0-9.]+)$'
[[ "$last" =~ $summary ]] || fail "the last line is not the summary: $last"
awk -v e="${BASH_REMATCH[1]}" -v r="${BASH_REMATCH[2]}" -v f="${BASH_REMATCH[3]}" \
  'BEGIN { exit !(e <= 0.1 && r > 0 && r <= 0.6 && f >= 0 && f <= 1) }' ||
  fail "bubble error ${BASH_REMATCH[1]}, memory ratio ${BASH_REMATCH[2]} or auto share ${BASH_REMATCH[3]} out of bounds"
echo PASS
