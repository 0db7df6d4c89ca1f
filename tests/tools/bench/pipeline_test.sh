#!/usr/bin/env bash
# //tools/bench:pipeline --quick on 4 emulated GPUs: both tables print, the summary line ends the
# output, the bubble is near theory everywhere (within 0.1: a smoke test, run beside other tests and
# under ASan, where each action's own work grows against its 20 ms wait; the tight bound, 0.05, is
# pipeline_schedule_test's), and at p = 4, m = 8 1F1B's stages hold at most p / m = half of GPipe's
# micro-batches (checked as <= 0.6).
set -uo pipefail
bench="$1"
fail() { echo "FAIL: $*"; exit 1; }
out="$(EMBER_EMULATED_GPUS=4 EMBER_EMULATED_GPU_MEMORY=512M "$bench" --quick --action-ms 20 2>&1)" ||
  fail "the bench exited $?: $out"
echo "$out"
grep -q '^bubble (idle fraction)' <<<"$out" || fail "no bubble table"
grep -q '^stored activations per stage' <<<"$out" || fail "no memory table"
last="$(tail -n 1 <<<"$out")"
[[ "$last" =~ ^bench\ pipeline:\ bubble_err_max=([0-9.]+)\ 1f1b_mem_ratio=([0-9.]+)\ emulated=1$ ]] ||
  fail "the last line is not the summary: $last"
awk -v e="${BASH_REMATCH[1]}" -v r="${BASH_REMATCH[2]}" 'BEGIN { exit !(e <= 0.1 && r > 0 && r <= 0.6) }' ||
  fail "bubble error ${BASH_REMATCH[1]} or memory ratio ${BASH_REMATCH[2]} out of bounds"
echo PASS
