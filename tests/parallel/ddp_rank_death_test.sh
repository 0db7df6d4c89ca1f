#!/usr/bin/env bash
# Rank 1 of 2 is SIGKILLed during a DDP backward (ddp_rank_death_main.cc); rank 0, the survivor, must
# exit non-zero and name the collective it was in, with its sequence number, group and shape.
#   ddp_rank_death_test.sh RUNNER BINARY launcher-kills [BACKEND]   mpirun's SIGTERM ends rank 0
#   ddp_rank_death_test.sh RUNNER BINARY timeout [BACKEND]          a launcher that leaves survivors
#     running (mpirun --enable-recovery here; srun without --kill-on-bad-exit behaves alike): the
#     collective timeout ends rank 0 (over NCCL the communicator sees the death first and names it)
#   ddp_rank_death_test.sh RUNNER BINARY stall nccl|gloo            rank 1 stays alive but stops
#     issuing collectives: the collective timeout ends rank 0
#   ddp_rank_death_test.sh RUNNER BINARY peer-dies gloo             no launcher (tests/env_run.sh):
#     Gloo's connection to rank 1 closes, and the wait in rank 0's backward raises naming rank 1
# BACKEND is mpi (default), nccl (the binary built for emulated GPUs, run with EMBER_BACKEND=nccl)
# or gloo (run by tests/env_run.sh with EMBER_BACKEND=gloo).
# WRAPPER (a fifth argument) is ddp (default), stage2 (ShardedDataParallel: the survivor is in a
# gradient reduce-scatter) or stage3 (in a unit's all-gather).
# Each rank's stderr goes to its own file, so the check sees what rank 0 wrote even where mpirun
# drops a dying job's output.
set -uo pipefail
runner="$1"; binary="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"; mode="$3"; backend="${4:-mpi}"
wrapper="${5:-ddp}"
work="$(mktemp -d "${TEST_TMPDIR:-/tmp}/ddp_death.XXXXXX")"
# The timeout mode's wrapper outlives the rank to record its exit status: with --enable-recovery
# mpirun exits 0 even after a rank called MPI_Abort. (mpirun's SIGTERM must reach the rank itself,
# hence the exec in the other mode.)
if [ "$mode" = timeout ]; then
  printf '#!/bin/sh\n"%s" %s %s 2> "%s/rank${OMPI_COMM_WORLD_RANK:-$RANK}.err"\necho $? > "%s/rank${OMPI_COMM_WORLD_RANK:-$RANK}.status"\n' \
    "$binary" "$mode" "$wrapper" "$work" "$work" > "$work/rank.sh"
else
  # In `stall` mode the silent rank 1 keeps a long timeout: its watchdog over the collectives it
  # posted before stopping raced rank 0's (once, on a slow machine in delay mode, it fired first and
  # aborted the communicator under rank 0), and the test is about rank 0's.
  slow=""
  [ "$mode" = stall ] && slow='[ "${OMPI_COMM_WORLD_RANK:-$RANK}" = 1 ] && export EMBER_COLLECTIVE_TIMEOUT=120\n'
  printf "#!/bin/sh\n${slow}"'exec "%s" %s %s 2> "%s/rank${OMPI_COMM_WORLD_RANK:-$RANK}.err"\n' "$binary" "$mode" "$wrapper" \
    "$work" > "$work/rank.sh"
fi
chmod +x "$work/rank.sh"
# The bucket all-reduce, as each backend describes it (MPI posts it non-blocking inside DDP's
# OverlapScope; NCCL queues every collective on its stream).
case "$wrapper" in
  ddp) collective='all_reduce #[0-9]+ \((avg|sum)\) on WORLD, float32 \[[0-9]+\]' ;;
  stage2) collective='reduce_scatter_tensor #[0-9]+ \((avg|sum)\) on WORLD, float32 \[[0-9]+\]' ;;
  stage3) collective='all_gather_into_tensor #[0-9]+ on WORLD, float32 \[[0-9]+\]' ;;
  *) echo "unknown wrapper $wrapper"; exit 2 ;;
esac
[ "$backend" = mpi ] && collective="$collective"', non-blocking \(inside an OverlapScope\)'
timed_out=' did not complete within 5.0 s \(EMBER_COLLECTIVE_TIMEOUT\)'
min_elapsed=0
case "$mode/$backend" in
  launcher-kills/*)
    export EMBER_COLLECTIVE_TIMEOUT=300  # far beyond the limit below: the timeout cannot be what ends it
    launcher_args=(); limit=60
    expected="^\[rank 0\] ember: terminated while in $collective"
    # NCCL's communicator also sees the peer die: the watchdog's line may come before mpirun's SIGTERM.
    [ "$backend" = nccl ] && expected="^\[rank 0\] ember: (terminated while in $collective|$collective failed: )"
    ;;
  timeout/mpi)
    export EMBER_COLLECTIVE_TIMEOUT=5
    launcher_args=(--enable-recovery); limit=90; min_elapsed=5
    expected="^\[rank 0\] ember: $collective$timed_out"
    ;;
  timeout/nccl)
    # The emulated NCCL fails the waiting all-reduce as soon as the peer's process is gone: the
    # watchdog names the failure, or a line naming what was in flight ends the rank.
    export EMBER_COLLECTIVE_TIMEOUT=5
    launcher_args=(--enable-recovery); limit=90
    expected="^\[rank 0\] ember: (terminated while in $collective|$collective( failed: .*exited|$timed_out))"
    ;;
  peer-dies/gloo)
    export EMBER_COLLECTIVE_TIMEOUT=300
    launcher_args=(); limit=60
    expected="rank 0 of WORLD: $collective failed: (the connection to rank 1 broke|rank 1 is gone)"
    ;;
  stall/nccl | stall/gloo)
    export EMBER_COLLECTIVE_TIMEOUT=5
    launcher_args=(); limit=90; min_elapsed=5
    expected="^\[rank 0\] ember: $collective$timed_out"
    ;;
  *) echo "unknown mode $mode for backend $backend"; exit 2 ;;
esac
start=$(date +%s)
"$runner" 2 "$work/rank.sh" "${launcher_args[@]}" > "$work/mpirun.out" 2>&1
status=$?
elapsed=$(( $(date +%s) - start ))
echo "--- mpirun (exit $status after ${elapsed}s):"; cat "$work/mpirun.out"
echo "--- rank 0 stderr:"; cat "$work/rank0.err"
if [ "$mode" = timeout ]; then
  [ -s "$work/rank0.status" ] && [ "$(cat "$work/rank0.status")" -ne 0 ] \
    || { echo "FAIL: rank 0 exited with status '$(cat "$work/rank0.status" 2>/dev/null)', expected non-zero"; exit 1; }
else
  [ $status -ne 0 ] || { echo "FAIL: the job exited 0"; exit 1; }
fi
[ $elapsed -ge $min_elapsed ] || { echo "FAIL: ended after ${elapsed}s, before the 5 s timeout"; exit 1; }
[ $elapsed -lt $limit ] || { echo "FAIL: took ${elapsed}s (limit ${limit}s)"; exit 1; }
grep -Eq "$expected" "$work/rank0.err" || { echo "FAIL: rank 0 did not name its collective: expected $expected"; exit 1; }
echo "PASS: the survivor named its collective ($mode, ${elapsed}s)"
