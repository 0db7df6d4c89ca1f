#!/usr/bin/env bash
# Rank 1 of 2 is SIGKILLed during a DDP backward (ddp_rank_death_main.cc); rank 0, the survivor, must
# exit non-zero and name the collective it was in, with its sequence number, group and shape.
#   ddp_rank_death_test.sh RUNNER BINARY launcher-kills   mpirun's SIGTERM ends rank 0
#   ddp_rank_death_test.sh RUNNER BINARY timeout          a launcher that leaves survivors running
#     (mpirun --enable-recovery here; srun without --kill-on-bad-exit behaves alike): the collective
#     timeout ends rank 0
# Each rank's stderr goes to its own file, so the check sees what rank 0 wrote even where mpirun
# drops a dying job's output.
set -uo pipefail
runner="$1"; binary="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"; mode="$3"
work="$(mktemp -d "${TEST_TMPDIR:-/tmp}/ddp_death.XXXXXX")"
# The timeout mode's wrapper outlives the rank to record its exit status: with --enable-recovery
# mpirun exits 0 even after a rank called MPI_Abort. (mpirun's SIGTERM must reach the rank itself,
# hence the exec in the other mode.)
if [ "$mode" = timeout ]; then
  printf '#!/bin/sh\n"%s" 2> "%s/rank$OMPI_COMM_WORLD_RANK.err"\necho $? > "%s/rank$OMPI_COMM_WORLD_RANK.status"\n' \
    "$binary" "$work" "$work" > "$work/rank.sh"
else
  printf '#!/bin/sh\nexec "%s" 2> "%s/rank$OMPI_COMM_WORLD_RANK.err"\n' "$binary" "$work" > "$work/rank.sh"
fi
chmod +x "$work/rank.sh"
case "$mode" in
  launcher-kills)
    export EMBER_COLLECTIVE_TIMEOUT=300  # far beyond the limit below: the timeout cannot be what ends it
    launcher_args=(); limit=60
    expected='^\[rank 0\] ember: terminated while in all_reduce #[0-9]+ \((avg|sum)\) on WORLD, float32 \[[0-9]+\], non-blocking \(inside an OverlapScope\)'
    ;;
  timeout)
    export EMBER_COLLECTIVE_TIMEOUT=5
    launcher_args=(--enable-recovery); limit=90
    expected='^\[rank 0\] ember: all_reduce #[0-9]+ \((avg|sum)\) on WORLD, float32 \[[0-9]+\], non-blocking \(inside an OverlapScope\) did not complete within 5.0 s \(EMBER_COLLECTIVE_TIMEOUT\)'
    ;;
  *) echo "unknown mode $mode"; exit 2 ;;
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
  [ $elapsed -ge 5 ] || { echo "FAIL: ended after ${elapsed}s, before the 5 s timeout"; exit 1; }
else
  [ $status -ne 0 ] || { echo "FAIL: the job exited 0"; exit 1; }
fi
[ $elapsed -lt $limit ] || { echo "FAIL: took ${elapsed}s (limit ${limit}s)"; exit 1; }
grep -Eq "$expected" "$work/rank0.err" || { echo "FAIL: rank 0 did not name its collective: expected $expected"; exit 1; }
echo "PASS: the survivor named its collective ($mode, ${elapsed}s)"
