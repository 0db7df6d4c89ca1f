#!/usr/bin/env bash
# A collective that never completes must end the job within the timeout (here 5 s), with a
# message naming the collective, its sequence number, the group and the tensor; never a hang.
set -uo pipefail
runner="$1"; binary="$2"
export EMBER_COLLECTIVE_TIMEOUT=5
start=$(date +%s)
output="$("$runner" 2 "$binary" 2>&1)"
status=$?
elapsed=$(( $(date +%s) - start ))
echo "$output"
[ $status -ne 0 ] || { echo "FAIL: the job exited 0"; exit 1; }
[ $elapsed -lt 60 ] || { echo "FAIL: took ${elapsed}s"; exit 1; }
echo "$output" | grep -q "\[rank 0\] ember: all_reduce #1 (sum) on WORLD, float32 \[3, 4\] did not complete within 5.0 s" \
  || { echo "FAIL: no timeout message naming the collective"; exit 1; }
echo "PASS: job ended after ${elapsed}s with exit status $status"
