#!/usr/bin/env bash
# tools/launch on 2 hosts x 1 rank (network namespaces; an MLP on Fashion-MNIST, 2 epochs, a
# mid-epoch checkpoint every 50 steps):
#   restart    h1's rank SIGKILLed in epoch 2 (of 2) with --max-restarts 2: the job restarts once from
#              the newest checkpoint at 2 processes and completes, its test accuracy within 0.01
#              of an uninterrupted run's; the restart is in metrics.jsonl and a TensorBoard event;
#   min-hosts  the same with --min-hosts 1 and h1's namespace removed: the restart leaves h1 out,
#              resumes the epoch at 1 process (the rest of its examples dealt over the new world),
#              and completes within 0.03 of the uninterrupted accuracy;
#   final      bad flags (exit 2) and a missing dataset (exit 66) are not restarted.
# launch_test.sh HOSTS_SH MPI_RUN TRAIN LAUNCH
set -uo pipefail
HOSTS_SH="$1"; MPI_RUN="$2"; TRAIN="$3"; LAUNCH="$4"
source "$(dirname "$0")/multihost_lib.sh"
export EMBER_COLLECTIVE_TIMEOUT=20
flags=(--model mlp --epochs 2 --batch-size 128 --threads 1 --workers 0 --deterministic --progress lines
  --log-every 10 --checkpoint-every 50)
require_hosts 2 1
hosts_mpi_env

accuracy() { sed -n 's/^train: test_accuracy=\([0-9.]*\) .*/\1/p' "$1" | tail -1; }
within() { awk -v a="$1" -v b="$2" -v d="$3" 'BEGIN { x = a - b; if (x < 0) x = -x; exit !(a != "" && x <= d) }'; }

# The uninterrupted run, through the launcher too.
host_run 0 "$LAUNCH" --hostfile "$HOSTS_HOSTFILE" -- "$TRAIN" "${flags[@]}" --checkpoint-dir "$work/ref" \
  > "$work/ref.txt" 2>&1 || { cat "$work/ref.txt"; fail "the uninterrupted run exited $?"; }
reference=$(accuracy "$work/ref.txt")
echo "uninterrupted: test accuracy $reference"

# Kills h1's rank once rank 0 has logged step STEP of epoch 2 (after the checkpoint at step 300).
kill_in_epoch_2() {
  local out="$1" step="$2"
  for _ in $(seq 1200); do
    grep -q "^epoch 2/2 step $step/" "$out" && break
    sleep 0.05
  done
  grep -q "^epoch 2/2 step $step/" "$out" || { cat "$out"; fail "no step $step of epoch 2 logged"; }
  for pid in $(ip netns pids "${EMBER_NETNS_PREFIX}h1"); do
    [ "$(readlink "/proc/$pid/exe")" = "$(readlink -f "$TRAIN")" ] && kill -KILL "$pid"
  done
}

# --- restart on the same hosts
host_run 0 "$LAUNCH" --max-restarts 2 --backoff 0.5 --hostfile "$HOSTS_HOSTFILE" -- "$TRAIN" "${flags[@]}" \
  --checkpoint-dir "$work/restart" --log-dir "$work/restart_log" > "$work/restart.txt" 2>&1 &
job=$!
kill_in_epoch_2 "$work/restart.txt" 80
wait $job || { cat "$work/restart.txt"; fail "the restarted job exited $?"; }
cat "$work/restart.txt" | grep -v '^epoch .* step '
grep -q '^launch: restart 1 of 2 at .*: 2 processes on h0, h1, from the checkpoint at step 300$' "$work/restart.txt" ||
  fail "no restart at 2 processes from the step-300 checkpoint"
! grep -q 'restart 2 of 2' "$work/restart.txt" || fail "restarted twice"
grep -q '^resumed from .*/last.safetensors (epoch 1, step 300)$' "$work/restart.txt" ||
  fail "the restart did not resume from last.safetensors at step 300"
got=$(accuracy "$work/restart.txt")
within "$got" "$reference" 0.01 || fail "test accuracy $got after the restart, $reference uninterrupted"
grep -q '"kind":"restart","step":300,.*"restart":1,"max_restarts":2,"cause":"exit status 137 (signal 9: Killed)","world_size":2' \
  "$work/restart_log/metrics.jsonl" || { cat "$work/restart_log/metrics.jsonl"; fail "no restart record in metrics.jsonl"; }
grep -q '"kind":"resume","step":300' "$work/restart_log/metrics.jsonl" || fail "the resumed run's record is missing"
cat "$work/restart_log"/events.out.tfevents.* | grep -aq 'launch/restart' || fail "no restart event for TensorBoard"
echo "restart: test accuracy $got (uninterrupted $reference)"

# --- h1 gone for good: the job goes on at 1 process
host_run 0 "$LAUNCH" --max-restarts 2 --min-hosts 1 --backoff 0.5 --probe-timeout 10 --hostfile "$HOSTS_HOSTFILE" \
  -- "$TRAIN" "${flags[@]}" --checkpoint-dir "$work/shrink" > "$work/shrink.txt" 2>&1 &
job=$!
kill_in_epoch_2 "$work/shrink.txt" 80
host_remove 1
wait $job || { cat "$work/shrink.txt"; fail "the job exited $? after losing h1"; }
cat "$work/shrink.txt" | grep -v '^epoch .* step '
grep -q '^launch: restart 1 of 2 at .*: 1 process on h0 (h1 left out: no answer), from the checkpoint at step 300$' \
  "$work/shrink.txt" || fail "the restart did not leave h1 out"
grep -q "^resumed from .*last.safetensors (epoch 1, step 300), saved by 2 processes at 235 steps per epoch: 16640 examples of epoch 2 done, the rest dealt over 1; step 599 at this run's 469 steps per epoch\$" \
  "$work/shrink.txt" || fail "epoch 2 did not resume after its 16640 examples (65 steps x 128 x 2 ranks) at 1 process"
grep -q 'processes=1$' "$work/shrink.txt" || fail "the job did not finish at 1 process"
got=$(accuracy "$work/shrink.txt")
within "$got" "$reference" 0.03 || fail "test accuracy $got on 1 host after the loss, $reference uninterrupted"
echo "min-hosts: test accuracy $got (uninterrupted $reference)"

# --- failures a restart cannot mend
"$LAUNCH" --max-restarts 2 --backoff 0 --np 2 -- "$TRAIN" --model nope --checkpoint-dir "$work/bad" > "$work/bad.txt" 2>&1
rc=$?
cat "$work/bad.txt"
[ $rc -eq 2 ] || fail "bad flags: the launcher exited $rc, expected 2"
grep -q 'not restarting: bad flags' "$work/bad.txt" || fail "bad flags: no word that it does not restart"
! grep -q '^launch: restart' "$work/bad.txt" || fail "bad flags were restarted"
"$LAUNCH" --max-restarts 2 --backoff 0 --np 2 -- "$TRAIN" --data cifar10 --data-dir "$work/no-such-dir" \
  --checkpoint-dir "$work/nodata" > "$work/nodata.txt" 2>&1
rc=$?
cat "$work/nodata.txt"
[ $rc -eq 66 ] || fail "missing dataset: the launcher exited $rc, expected 66"
grep -q 'not restarting: the dataset is missing' "$work/nodata.txt" || fail "missing dataset: no word that it does not restart"
! grep -q '^launch: restart' "$work/nodata.txt" || fail "a missing dataset was restarted"
echo "PASS"
