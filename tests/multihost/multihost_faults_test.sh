#!/usr/bin/env bash
# Faults of a job spread over 2 hosts x 2 ranks (ResNet-20 under DDP, mpirun --hostfile, MPI over
# TCP between network-namespace hosts):
#   host-dies  every rank of host h1 SIGKILLed mid-epoch: the job ends non-zero within the
#              collective timeout, mpirun naming the host, the survivors naming their collective;
#   link-cut   h1's link pulled (ip link set eth0 down) during the all-reduces: the same, no hang
#              past the timeout, and h1's own processes end too;
#   lossy      1% of the frames dropped each way and 100 Mbit/s: training completes with a
#              checkpoint byte-identical to the clean run's, slower (both times printed).
# multihost_faults_test.sh HOSTS_SH MPI_RUN TRAIN MODE
set -uo pipefail
HOSTS_SH="$1"; MPI_RUN="$2"; TRAIN="$3"; mode="$4"
source "$(dirname "$0")/multihost_lib.sh"
export EMBER_COLLECTIVE_TIMEOUT=10
require_hosts 2 2

run() {  # NAME TRAIN_FLAGS...: 4 ranks over the 2 hosts, in the background ($job)
  local name="$1"
  shift
  host_mpirun -np 4 -x EMBER_NUM_THREADS -x EMBER_KERNEL_SELECT -x EMBER_COLLECTIVE_TIMEOUT "$TRAIN" \
    "${train_flags[@]}" "$@" > "$work/$name.txt" 2>&1 &
  job=$!
}

# Until rank 0 has logged STEPS steps, at most 60 s.
wait_for_steps() {
  local steps="$1" file="$2"
  for _ in $(seq 600); do
    [ "$(grep -c '^epoch 1/.* step ' "$file")" -ge "$steps" ] && return 0
    kill -0 "$job" 2> /dev/null || { cat "$file"; fail "the job ended before step $steps"; }
    sleep 0.1
  done
  cat "$file"
  fail "no step $steps within 60 s"
}

# The job ended non-zero within LIMIT seconds of the fault, and its output names what it must.
expect_failure() {
  local name="$1" fault_at="$2" limit="$3" rc seconds
  wait "$job"
  rc=$?
  seconds=$(elapsed "$fault_at")
  cat "$work/$name.txt"
  [ $rc -ne 0 ] || fail "$name: the job exited 0 after the fault"
  awk -v s="$seconds" -v l="$limit" 'BEGIN { exit !(s <= l) }' ||
    fail "$name: the job ended ${seconds} s after the fault, more than the ${limit} s allowed"
  grep -q 'node h1' "$work/$name.txt" || fail "$name: nothing names host h1"
  # Both ranks of h0 name the collective they were in (a bucket's all-reduce, or DDP's broadcast
  # of buffers before a forward): ended by mpirun (SIGTERM), or by their own collective timeout.
  for r in 0 1; do
    grep -q "^\[rank $r\] ember: \(terminated while in [a-z_]* #[0-9]* \|[a-z_]* #[0-9]* .* did not complete within\)" \
      "$work/$name.txt" || fail "$name: rank $r (host h0) does not name the collective it was in"
  done
  echo "$name: exit $rc, ${seconds} s after the fault"
}

case "$mode" in
  host-dies)
    run host_dies --synthetic-size 16384 --epochs 1
    wait_for_steps 3 "$work/host_dies.txt"
    fault_at=$(now)
    # The ranks, not the host's daemon: mpirun learns it from that daemon.
    for pid in $(ip netns pids "${EMBER_NETNS_PREFIX}h1"); do
      [ "$(readlink "/proc/$pid/exe")" = "$(readlink -f "$TRAIN")" ] && kill -KILL "$pid"
    done
    expect_failure host_dies "$fault_at" "$EMBER_COLLECTIVE_TIMEOUT"
    grep -q 'process rank [23] with PID [0-9]* on node h1 exited on signal 9' "$work/host_dies.txt" ||
      fail "mpirun does not say a rank of h1 was killed"
    ;;
  link-cut)
    run link_cut --synthetic-size 16384 --epochs 1
    wait_for_steps 3 "$work/link_cut.txt"
    fault_at=$(now)
    host_link 1 down
    # The collective timeout, and the keepalives (5 s) that tell mpirun h1 is gone, with slack
    # for a loaded machine.
    expect_failure link_cut "$fault_at" $((EMBER_COLLECTIVE_TIMEOUT + 10))
    grep -q 'lost communication with a remote daemon' "$work/link_cut.txt" ||
      grep -q 'did not complete within' "$work/link_cut.txt" || fail "neither mpirun nor a rank saw the link go"
    for _ in $(seq 100); do
      [ -z "$(ip netns pids "${EMBER_NETNS_PREFIX}h1")" ] && break
      sleep 0.1
    done
    left=$(ip netns pids "${EMBER_NETNS_PREFIX}h1" | xargs -r ps -o comm= -p | tr '\n' ' ')
    [ -z "$left" ] || fail "host h1, cut off, still runs: $left"
    ;;
  lossy)
    flags=(--synthetic-size 768 --epochs 1 --max-steps 8)
    start=$(now)
    run clean "${flags[@]}" --checkpoint-dir "$work/clean"
    wait "$job" || { cat "$work/clean.txt"; fail "the clean run exited $?"; }
    clean_s=$(elapsed "$start")
    host_impair 0 1 100mbit && host_impair 1 1 100mbit || fail "could not make the link lossy"
    start=$(now)
    run lossy "${flags[@]}" --checkpoint-dir "$work/lossy"
    wait "$job" || { cat "$work/lossy.txt"; fail "the run over the lossy link exited $?"; }
    lossy_s=$(elapsed "$start")
    cat "$work/lossy.txt"
    dropped=0
    for i in 0 1; do
      d=$(ip netns exec "${EMBER_NETNS_PREFIX}h$i" nft list table netdev emh_impair | sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
      dropped=$((dropped + ${d:-0}))
    done
    [ "$dropped" -gt 0 ] || fail "the lossy link dropped no frame"
    cmp "$work/clean/epoch-1.safetensors" "$work/lossy/epoch-1.safetensors" ||
      fail "the run over the lossy link ended with another checkpoint"
    echo "lossy: the same checkpoint; 8 steps + evaluation in ${lossy_s} s against ${clean_s} s on a clean link ($dropped frames dropped)"
    ;;
  *) fail "unknown mode $mode" ;;
esac
echo "PASS: $mode"
