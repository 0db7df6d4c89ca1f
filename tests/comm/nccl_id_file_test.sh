#!/usr/bin/env bash
# EMBER_BACKEND=nccl without mpirun or MPI: two processes started by hand (RANK/WORLD_SIZE/
# LOCAL_RANK) meet through EMBER_NCCL_ID_FILE and pass the NCCL cases; rank 0 removes the file
# once both joined. A rank whose rank 0 never writes it ends with a message, not a hang.
#   nccl_id_file_test.sh BINARY
set -uo pipefail
binary="$1"
work="$(mktemp -d "${TEST_TMPDIR:-/tmp}/nccl_id.XXXXXX")"
export EMBER_BACKEND=nccl EMBER_EMULATED_GPUS=2 WORLD_SIZE=2 EMBER_NCCL_ID_FILE="$work/nccl.id"
export EMBER_COLLECTIVE_TIMEOUT=60
for r in 1 0; do  # rank 1 first: it must wait for the file
  RANK=$r LOCAL_RANK=$r "$binary" > "$work/rank$r.out" 2>&1 &
  pids[$r]=$!
done
status=0
for r in 0 1; do wait "${pids[$r]}" || { echo "FAIL: rank $r exited non-zero:"; cat "$work/rank$r.out"; status=1; }; done
[ $status -eq 0 ] || exit 1
grep -q "All tests passed" "$work/rank0.out" || { echo "FAIL: rank 0 did not pass"; cat "$work/rank0.out"; exit 1; }
[ ! -e "$EMBER_NCCL_ID_FILE" ] || { echo "FAIL: the id file was left behind"; exit 1; }
ls "$work" | grep -q 'nccl.id.tmp' && { echo "FAIL: a temporary id file was left behind"; exit 1; }

# Rank 1 alone: rank 0 never writes the file.
start=$(date +%s)
output="$(EMBER_COLLECTIVE_TIMEOUT=2 RANK=1 LOCAL_RANK=1 "$binary" 2>&1)"
code=$?
[ $code -ne 0 ] || { echo "FAIL: a lone rank 1 exited 0"; exit 1; }
[ $(( $(date +%s) - start )) -lt 30 ] || { echo "FAIL: a lone rank 1 took too long"; exit 1; }
# (Catch wraps the message; its first line is enough.)
echo "$output" | grep -q "comm::init: rank 1 waited EMBER_COLLECTIVE_TIMEOUT for rank 0 to write" ||
  { echo "FAIL: no message naming the file:"; echo "$output"; exit 1; }
echo PASS
