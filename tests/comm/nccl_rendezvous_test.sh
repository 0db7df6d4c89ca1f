#!/usr/bin/env bash
# EMBER_BACKEND=nccl without mpirun or MPI: two processes started by hand (RANK/WORLD_SIZE/
# LOCAL_RANK) meet and pass the NCCL cases, the NCCL id reaching rank 1 either
#   file:  through EMBER_NCCL_ID_FILE (rank 0 removes it once both joined), or
#   store: through the TCP store rank 0 serves at EMBER_MASTER_ADDR/EMBER_MASTER_PORT.
# Rank 1 starts first and must wait for rank 0. A rank 1 whose rank 0 never comes ends with a
# message naming the file or the store, not a hang; with the store, PyTorch's MASTER_ADDR without
# RANK is an error asking for it.
#   nccl_rendezvous_test.sh file|store BINARY
set -uo pipefail
mode="$1"
binary="$2"
work="$(mktemp -d "${TEST_TMPDIR:-/tmp}/nccl_rendezvous.XXXXXX")"
trap 'rm -rf "$work"' EXIT
export EMBER_BACKEND=nccl EMBER_EMULATED_GPUS=2 WORLD_SIZE=2 EMBER_COLLECTIVE_TIMEOUT=60
unset EMBER_NCCL_ID_FILE EMBER_MASTER_ADDR EMBER_MASTER_PORT MASTER_ADDR MASTER_PORT
if [ "$mode" = file ]; then
  export EMBER_NCCL_ID_FILE="$work/nccl.id"
  lone_message="comm::init: rank 1 waited EMBER_COLLECTIVE_TIMEOUT for rank 0 to write"
else
  # A port no one listens on: random below the kernel's ephemeral range, until a connect fails.
  for _ in $(seq 100); do
    port=$((20000 + RANDOM % 12000))
    (exec 3<> "/dev/tcp/127.0.0.1/$port") 2> /dev/null || break
  done
  export EMBER_MASTER_ADDR=127.0.0.1 EMBER_MASTER_PORT=$port
  lone_message="rank 1 could not reach the store at 127.0.0.1:$port"
fi
for r in 1 0; do
  RANK=$r LOCAL_RANK=$r "$binary" > "$work/rank$r.out" 2>&1 &
  pids[$r]=$!
  sleep 0.5
done
status=0
for r in 0 1; do wait "${pids[$r]}" || { echo "FAIL: rank $r exited non-zero:"; cat "$work/rank$r.out"; status=1; }; done
[ $status -eq 0 ] || exit 1
for r in 0 1; do
  grep -q "All tests passed" "$work/rank$r.out" || { echo "FAIL: rank $r did not pass"; cat "$work/rank$r.out"; exit 1; }
done
if [ "$mode" = file ]; then
  [ ! -e "$EMBER_NCCL_ID_FILE" ] || { echo "FAIL: the id file was left behind"; exit 1; }
  ls "$work" | grep -q 'nccl.id.tmp' && { echo "FAIL: a temporary id file was left behind"; exit 1; }
fi

# Rank 1 alone: rank 0 never comes.
start=$(date +%s)
output="$(EMBER_COLLECTIVE_TIMEOUT=2 RANK=1 LOCAL_RANK=1 "$binary" 2>&1)"
code=$?
[ $code -ne 0 ] || { echo "FAIL: a lone rank 1 exited 0"; exit 1; }
[ $(( $(date +%s) - start )) -lt 30 ] || { echo "FAIL: a lone rank 1 took too long"; exit 1; }
# (Catch wraps the message; its first line is enough.)
echo "$output" | grep -q "$lone_message" || { echo "FAIL: no message naming the $mode:"; echo "$output"; exit 1; }

if [ "$mode" = store ]; then
  output="$(env -u WORLD_SIZE -u EMBER_MASTER_ADDR -u EMBER_MASTER_PORT MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$binary" 2>&1)"
  [ $? -ne 0 ] || { echo "FAIL: MASTER_ADDR without RANK exited 0"; exit 1; }
  echo "$output" | grep -q "MASTER_ADDR/MASTER_PORT is set, so the ranks meet at a store" ||
    { echo "FAIL: no message asking for RANK and WORLD_SIZE:"; echo "$output"; exit 1; }
fi
echo PASS
