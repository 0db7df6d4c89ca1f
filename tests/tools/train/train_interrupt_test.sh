#!/usr/bin/env bash
# Ctrl-C during tiny LeNet runs (train_interrupt_test.sh TRAIN RUNS). First while the training
# thread is blocked writing its progress to a full pipe: no line may be lost (a SIGINT handler on
# that thread made the write fail with EINTR, and stdio dropped the line). Then at RUNS random
# moments: one SIGINT each, to a random thread of the process (the kernel hands a process's
# signal to any thread not blocking it), after a random delay once the first step is done, so
# inside a forward, a backward, an optimizer step, a loader worker's prefetch (runs alternate
# --workers 0 and 2), a log write, an evaluation or a checkpoint write (epochs of 3 steps, each
# evaluated and checkpointed). Every run must exit with status 130 having saved an
# interrupted.safetensors that a --resume loads (model, optimizer, schedule, loader position), and
# leave no temporary file.
set -uo pipefail
train="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
runs="$2"
work="${TEST_TMPDIR:-$(mktemp -d)}/train_interrupt"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
pid=""
# Whether the run is still going, from the shell's job table: the pid of a run that has ended may
# already be another process's (pids wrap quickly on a busy machine), so nothing is sent to it
# unless its job is still running.
alive() { [[ " $(jobs -rp | tr '\n' ' ') " == *" $pid "* ]]; }
# Nothing outlives the test: a run still going when the script ends is killed.
trap '[ -n "$pid" ] && alive && kill -KILL "$pid"; cd / && rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# wait_for_exit SECONDS: waits for the run $pid to end (killing it after SECONDS); its status.
wait_for_exit() {
  for _ in $(seq $(($1 * 10))); do alive || break; sleep 0.1; done
  alive && kill -KILL "$pid"
  wait "$pid"
  local status=$?
  pid=""
  return $status
}
# The progress of file $1 as "E/S" for step S of epoch E and "E:" for its end-of-epoch line.
progress() { sed -n 's|^epoch \([0-9]*\)/[0-9]* step \([0-9]*\)/3 .*|\1/\2|p; s|^epoch \([0-9]*\)/[0-9]*: .*|\1:|p' "$1" | tr '\n' ' '; }
# What progress() gives for a run stopped by Ctrl-C after global step $1: each step's line, and the
# end line of each epoch finished before it (the epoch of the stopping step is not evaluated).
expected_progress() { awk -v last="$1" 'BEGIN { for (s = 1; s <= last; ++s) { e = int((s - 1) / 3) + 1; printf "%d/%d ", e, s - 3 * (e - 1); if (s % 3 == 0 && s < last) printf "%d: ", e } }'; }

# 96 examples in 3 steps of 32 per epoch, 19 test examples; epochs enough never to finish.
tiny=(--model lenet --data synthetic --synthetic-size 96 --batch-size 32 --threads 1 --epochs 100000
      --progress lines --log-every 1 --deterministic)

# The full pipe: all but 1 KB of it filled beforehand, so the training thread blocks writing a
# progress line within a few steps; the SIGINT arrives while it waits there.
mkfifo pipe
exec 4<> pipe 3< pipe 5> pipe 4>&-
timeout 10 sh -c "head -c 64511 /dev/zero | tr '\\0' x; echo" >&5
"$train" "${tiny[@]}" --workers 0 --checkpoint-dir pipe_ck > pipe 2>&1 3<&- 5>&- &
pid=$!
exec 5>&-
for _ in $(seq 600); do [[ "$(cat "/proc/$pid/wchan" 2> /dev/null)" == *pipe_write ]] && break; alive || break; sleep 0.1; done
alive || fail "the run writing to a full pipe ended early: $(timeout 5 cat <&3)"
kill -INT "$pid"
sleep 1  # for the SIGINT to reach the thread before the pipe is drained (else its write just ends)
cat <&3 > pipe.txt &
drain=$!
wait_for_exit 120
status=$?
wait $drain
exec 3<&-
grep -v '^x*$' pipe.txt > piped.txt
[ $status -eq 130 ] || fail "the run writing to a full pipe exited $status after SIGINT: $(cat piped.txt)"
step="$(sed -n 's/^interrupted at step \([0-9]*\); checkpoint saved.*/\1/p' piped.txt)"
[ -n "$step" ] || fail "the run writing to a full pipe did not save at a step: $(cat piped.txt)"
[ "$(progress piped.txt)" = "$(expected_progress "$step")" ] ||
  fail "progress lines were lost at the Ctrl-C: printed $(progress piped.txt)(saved at step $step)"
echo "full pipe: SIGINT while blocked writing, every progress line up to step $step printed"

# Seconds, as a fraction in [0, limit), drawn from bash's RANDOM.
random_delay() { awk -v r="$RANDOM" -v limit="$1" 'BEGIN { printf "%.3f", r / 32768 * limit }'; }
seed="${EMBER_INTERRUPT_SEED:-$(($(date +%s%N) % 32768))}"  # not $$: a sandbox's pids repeat
RANDOM=$seed
echo "seed $seed (EMBER_INTERRUPT_SEED=$seed repeats these delays and threads)"
for run in $(seq "$runs"); do
  workers=$((run % 2 * 2))
  out="run$run.txt"
  rm -rf ck logs
  "$train" "${tiny[@]}" --workers $workers --log-dir logs --checkpoint-dir ck > "$out" 2>&1 &
  pid=$!
  for _ in $(seq 600); do grep -q "step 1/" "$out" 2> /dev/null && break; alive || break; sleep 0.1; done
  grep -q "step 1/" "$out" || fail "run $run (--workers $workers) did not start: $(cat "$out")"
  sleep "$(random_delay 0.6)"
  alive || fail "run $run (--workers $workers) ended before its SIGINT: $(grep -v '^epoch .* step ' "$out")"
  threads=(/proc/$pid/task/*)
  thread="${threads[$((RANDOM % ${#threads[@]}))]##*/}"
  # A thread may have ended since the listing (a loader worker at the end of an epoch): then the
  # process. An id is this process's thread while it is listed under the process.
  if [ -e "/proc/$pid/task/$thread" ]; then kill -INT "$thread" 2> /dev/null || kill -INT "$pid"; else kill -INT "$pid"; fi
  wait_for_exit 60
  status=$?
  where="run $run (--workers $workers, SIGINT to thread $thread of ${#threads[@]})"
  [ $status -eq 130 ] || fail "$where exited $status, expected 130: $(grep -v '^epoch .* step ' "$out")"
  step="$(sed -n 's/^interrupted at step \([0-9]*\); checkpoint saved.*/\1/p' "$out")"
  [ -n "$step" ] && [ -f ck/interrupted.safetensors ] || fail "$where saved no checkpoint: $(grep -v '^epoch .* step ' "$out")"
  leftovers="$(cd ck && ls | grep -v '^\(interrupted\|best\|epoch-[0-9]*\)\.safetensors$')"
  [ -z "$leftovers" ] || fail "$where left in its checkpoint directory: $leftovers"
  # A resume loads and checks every part of the checkpoint, then has nothing to train.
  "$train" "${tiny[@]}" --workers $workers --checkpoint-dir ck --resume ck/interrupted.safetensors --max-steps "$step" \
    > resume.txt 2>&1 || fail "$where: resuming its checkpoint exited $?: $(cat resume.txt)"
  grep -q "^resumed from ck/interrupted.safetensors (epoch [0-9]*, step $step)$" resume.txt &&
    grep -q "^nothing to train: the checkpoint is at step $step," resume.txt ||
    fail "$where: resuming its checkpoint: $(cat resume.txt)"
  echo "$where: saved at step $step"
  rm -f "$out"
done
echo "PASS"
