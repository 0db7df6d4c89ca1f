#!/usr/bin/env bash
# What rank 0 waits for never completes: the job must end within the timeout (here 5 s) with a
# message naming it (its sequence number, group, tensor; peer and tag for send/recv); never a
# hang. timeout_test.sh RUNNER BINARY MODE EXPECTED (an extended regular expression).
set -uo pipefail
runner="$1"; binary="$2"; mode="$3"; expected="$4"
export EMBER_COLLECTIVE_TIMEOUT=5
start=$(date +%s)
output="$("$runner" 2 "$binary" -- "$mode" 2>&1)"
status=$?
elapsed=$(( $(date +%s) - start ))
echo "$output"
[ $status -ne 0 ] || { echo "FAIL: the job exited 0"; exit 1; }
[ $elapsed -lt 60 ] || { echo "FAIL: took ${elapsed}s"; exit 1; }
echo "$output" | grep -Eq "$expected" || { echo "FAIL: no timeout message matching: $expected"; exit 1; }
echo "PASS: job ended after ${elapsed}s with exit status $status"
