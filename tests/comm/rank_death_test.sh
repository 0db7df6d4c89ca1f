#!/usr/bin/env bash
# One rank dies (SIGKILL) mid-collective; the others must exit non-zero within the collective
# timeout, printing which collective they were in (over Gloo, a fourth argument "gloo": also that
# the connection to rank 1 broke; the ranks are started by tests/env_run.sh).
set -uo pipefail
runner="$1"; binary="$2"; np="$3"; backend="${4:-mpi}"
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
need=1
if [ "$backend" = gloo ]; then
  # Gloo's survivors see a connection close: the error their wait raises names the collective and
  # the peer, by the address Gloo names or, failing that, as a process of this host that is gone
  # (rank 1, or rank 0 for a survivor whose pending transfer was with rank 0 when it failed); one
  # stopped before that says what it was in. No launcher drops output here: both count.
  failed="rank [02] of WORLD: all_reduce #[0-9]+ \(avg\) on WORLD, float32 \[65536\] failed: "
  echo "$output" | grep -Eq "$failed(the connection to rank 1 broke|rank 1 is gone|ranks [0-9, and]*\b1\b[0-9, and]* are gone)" ||
    { echo "FAIL: no survivor named rank 1"; exit 1; }
  pattern="$pattern|$failed(the connection to rank [01] broke|ranks? [0-9, and]+ (is|are) gone)"
  need=2
fi
lines=$(echo "$output" | grep -Ec "$pattern")
[ "$lines" -ge "$need" ] || { echo "FAIL: $lines survivors said which collective they were in, expected $need"; exit 1; }
echo "PASS: survivors exited with status $status after ${elapsed}s; $lines of 2 survivor messages forwarded"
