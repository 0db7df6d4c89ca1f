#!/usr/bin/env bash
# One rank dies (SIGKILL) mid-collective; the others must exit non-zero within the collective
# timeout, printing which collective they were in.
set -uo pipefail
runner="$1"; binary="$2"; np="$3"
export EMBER_COLLECTIVE_TIMEOUT=30
start=$(date +%s)
output="$("$runner" "$np" "$binary" 2>&1)"
status=$?
elapsed=$(( $(date +%s) - start ))
echo "$output"
[ $status -ne 0 ] || { echo "FAIL: the job exited 0"; exit 1; }
[ $elapsed -lt 45 ] || { echo "FAIL: took ${elapsed}s, more than the 30 s timeout allows"; exit 1; }
# Every survivor prints the line; mpirun may drop a rank's output while it tears the job down,
# so at least one must have come through.
pattern="\[rank [02]\] ember: (terminated while in all_reduce #[0-9]+ \(avg\) on WORLD, float32 \[65536\]|all_reduce #[0-9]+ \(avg\) on WORLD.*did not complete)"
lines=$(echo "$output" | grep -Ec "$pattern")
[ "$lines" -ge 1 ] || { echo "FAIL: no survivor said which collective it was in"; exit 1; }
echo "PASS: survivors exited with status $status after ${elapsed}s; $lines of 2 survivor messages forwarded"
