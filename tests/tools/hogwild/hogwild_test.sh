#!/usr/bin/env bash
# tools/hogwild on the real Fashion-MNIST: one worker in-process (the baseline), then 2 and 4 worker
# processes with the same total budget. Each multi-process accuracy must be within 2 points of the
# baseline, and above what one worker reaches with only its share of the budget: the workers'
# updates all land in the one shared model, which the parent evaluates. Both well above chance.
# After each run no worker is left alive and nothing new is in /dev/shm (the segments are memfds).
# Bad flags: exit status 2 with a message naming the flag.
# hogwild_test.sh HOGWILD
set -uo pipefail
hogwild="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
binary="$(readlink -f "$hogwild")"
work="${TEST_TMPDIR:-$(mktemp -d)}/hogwild"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
  fail "Fashion-MNIST is missing: run tools/setup (it installs the Debian package dataset-fashion-mnist)"

# 313 steps of 64 for one process: a few seconds a run, also under ASan (the MLP's GEMMs run in
# oneDNN, which is not instrumented). A smaller budget is too short for 4 workers: at 10,000
# examples (40 steps each) they ended 2.3 points below one process.
examples=20000

# /dev/shm less what tests running beside this one may create there meanwhile: Open MPI's
# shared-memory transport (Ember itself names nothing there).
shm_entries() { ls -A /dev/shm 2>/dev/null | grep -Ev 'vader|pmix|ompi|sm_segment' | sort; }
live_workers() {
  for p in /proc/[0-9]*; do [ "$(readlink "$p/exe" 2>/dev/null)" = "$binary" ] && echo "${p#/proc/}"; done
}

# run NAME ARGS...: the binary's summary line in $output; a non-zero exit, a survivor or a new
# /dev/shm entry fails the test.
run() {
  local name="$1"; shift
  local before
  before="$(shm_entries)"
  output="$("$hogwild" "$@" 2>&1)"
  local status=$?
  echo "$output"
  [ $status -eq 0 ] || fail "$name exited $status"
  local survivors
  survivors="$(live_workers)"
  [ -z "$survivors" ] || fail "$name left processes of the binary running: $survivors"
  local new
  new="$(comm -13 <(echo "$before") <(shm_entries))"
  [ -z "$new" ] || fail "$name left new entries in /dev/shm: $new"
}
accuracy() {
  sed -n "s/^hogwild: workers=$1 examples=$2 test_accuracy=\([0-9.]*\) train_seconds=[0-9.]*$/\1/p" <<<"$output"
}
# at_least A B MARGIN: A >= B + MARGIN.
at_least() { awk -v a="$1" -v b="$2" -v m="$3" 'BEGIN { exit !(a != "" && b != "" && a >= b + m) }'; }
within() { awk -v a="$1" -v b="$2" -v d="$3" 'BEGIN { x = a - b; if (x < 0) x = -x; exit !(a != "" && b != "" && x <= d) }'; }

# --help, and bad flags: a message on stderr naming the flag, exit status 2, nothing trained.
"$hogwild" --help > help.txt || fail "--help exited $?"
for flag in workers examples batch-size lr momentum model seed data-dir; do
  grep -q -- "^  --$flag[ {]" help.txt || fail "--help does not document --$flag"
done
expect_usage_error() {
  local want="$1"; shift
  "$hogwild" "$@" > out.txt 2> err.txt
  local status=$?
  [ $status -eq 2 ] || fail "'$*' exited $status, expected 2"
  grep -qF -- "$want" err.txt || fail "'$*': stderr lacks '$want': $(cat err.txt)"
  [ ! -s out.txt ] || fail "'$*' printed to stdout: $(cat out.txt)"
}
expect_usage_error "hogwild: unknown flag --bogus (see --help)" --bogus
expect_usage_error "hogwild: --workers: expected at least 1, got 0" --workers 0
expect_usage_error "hogwild: --examples: expected at least one per worker (4), got 3" --workers 4 --examples 3
expect_usage_error "hogwild: --model: expected one of {mlp, lenet}, got 'resnet20'" --model resnet20
expect_usage_error "hogwild: --lr: expected a finite number, got 'fast'" --lr fast

run "the single-process run" --workers 1 --examples $examples
single=$(accuracy 1 $examples)
run "the 2-worker run" --workers 2 --examples $examples
two=$(accuracy 2 $examples)
run "the 4-worker run" --workers 4 --examples $examples
four=$(accuracy 4 $examples)
run "one worker's share of 2" --workers 1 --examples $((examples / 2))
half=$(accuracy 1 $((examples / 2)))
run "one worker's share of 4" --workers 1 --examples $((examples / 4))
quarter=$(accuracy 1 $((examples / 4)))
echo "test accuracy: 1 worker $single, 2 workers $two, 4 workers $four; one worker on 1/2 of the budget $half, on 1/4 $quarter"

at_least "$single" 0.7 0 || fail "the single-process run reached $single, expected above 0.7 (chance is 0.1)"
at_least "$two" 0.7 0 || fail "the 2-worker run reached $two, expected above 0.7"
at_least "$four" 0.7 0 || fail "the 4-worker run reached $four, expected above 0.7"
within "$two" "$single" 0.02 || fail "2 workers reached $two, more than 2 points from one process's $single"
within "$four" "$single" 0.02 || fail "4 workers reached $four, more than 2 points from one process's $single"
at_least "$two" "$half" 0.01 || fail "2 workers reached $two, not above one worker's share alone ($half): updates were lost"
at_least "$four" "$quarter" 0.01 || fail "4 workers reached $four, not above one worker's share alone ($quarter): updates were lost"
echo "PASS"
