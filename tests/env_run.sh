#!/usr/bin/env bash
# Starts NP copies of a program as a job without a launcher does (a shell loop, a container
# orchestrator): each with RANK, WORLD_SIZE, LOCAL_RANK and EMBER_MASTER_ADDR/EMBER_MASTER_PORT,
# where rank 0 serves the store the ranks meet at. No mpirun, no MPI.
#   env_run.sh NP BINARY [--] [program args...]   (the "--" as mpi_run.sh takes it)
# The ranks' output is passed through, each line prefixed "[rank R] " as it comes. Exit status:
# the first rank to fail, else 0. Once one rank failed the others get a grace period to fail on
# their own (a Gloo peer sees the connection close), then SIGTERM (their handler names what they
# were in, as under mpirun), then SIGKILL.
# EMBER_JOB_ID is unique per run, so a rank that reaches another test's store on a reused port is
# refused by name instead of joining it; rank 0 taking a port already in use is retried on another.
set -uo pipefail
np="$1"
binary="$2"
shift 2
[ "${1:-}" = "--" ] && shift
export EMBER_COLLECTIVE_TIMEOUT="${EMBER_COLLECTIVE_TIMEOUT:-120}"
export EMBER_NUM_THREADS="${EMBER_NUM_THREADS:-1}"
export EMBER_DISTRIBUTED_DEBUG="${EMBER_DISTRIBUTED_DEBUG:-0}"
# As tests/mpi_run.sh: each rank emulates every device it is told of, at 512 MB each under ASan's shadow.
export EMBER_EMULATED_GPU_MEMORY="${EMBER_EMULATED_GPU_MEMORY:-512M}"
export EMBER_MASTER_ADDR=127.0.0.1 WORLD_SIZE="$np"
unset MASTER_ADDR MASTER_PORT OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE SLURM_PROCID
work="$(mktemp -d "${TEST_TMPDIR:-/tmp}/env_run.XXXXXX")"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2> /dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'for pid in "${pids[@]}"; do kill -TERM "$pid" 2> /dev/null; done' TERM INT

free_port() {  # a port no one listens on, below the kernel's ephemeral range
  local port
  for _ in $(seq 100); do
    port=$((20000 + RANDOM % 12000))
    (exec 3<> "/dev/tcp/127.0.0.1/$port") 2> /dev/null || break
  done
  echo "$port"
}

for attempt in 1 2 3; do
  export EMBER_MASTER_PORT="$(free_port)" EMBER_JOB_ID="env_run.$$.$attempt.$RANDOM"
  pids=()
  declare -A rank_of=()
  for ((r = 0; r < np; ++r)); do
    (
      export RANK=$r LOCAL_RANK=$r
      exec "$binary" "$@" > >(sed -u "s/^/[rank $r] /") 2> >(sed -u "s/^/[rank $r] /" | tee "$work/rank$r.err" >&2)
    ) &
    pids[$r]=$!
    rank_of[$!]=$r
  done
  # Whether any of `running` is alive, polled up to $1 tenths of a second (an exited rank is a
  # zombie until waited for, which kill -0 would still find).
  wait_alive() {
    for _ in $(seq "$1"); do
      local alive=0 pid state
      for pid in "${running[@]}"; do
        state=$(awk '{ print $3 }' "/proc/$pid/stat" 2> /dev/null)
        [ -n "$state" ] && [ "$state" != Z ] && alive=1
      done
      [ $alive -eq 0 ] && return
      sleep 0.1
    done
  }
  running=("${pids[@]}")
  status=0
  while [ ${#running[@]} -gt 0 ]; do
    finished=""
    wait -n -p finished "${running[@]}"
    code=$?
    [ -n "$finished" ] || break
    rest=()
    for pid in "${running[@]}"; do [ "$pid" = "$finished" ] || rest+=("$pid"); done
    running=("${rest[@]}")
    [ "$code" -eq 0 ] || echo "env_run.sh: rank ${rank_of[$finished]} exited with status $code" >&2
    if [ "$code" -ne 0 ] && [ "$status" -eq 0 ]; then
      status=$code
      # The others fail on their own when a peer's connections close (within milliseconds); give
      # them three seconds, then TERM (their handler names what they were in), then KILL.
      wait_alive 30
      for pid in "${running[@]}"; do kill -TERM "$pid" 2> /dev/null; done
      wait_alive 20
      for pid in "${running[@]}"; do kill -KILL "$pid" 2> /dev/null; done
      wait 2> /dev/null
      break
    fi
  done
  # Only a port taken between the check and rank 0's bind is retried; any other failure is the result.
  if [ "$status" -ne 0 ] && grep -q "the port is taken" "$work/rank0.err" 2> /dev/null; then
    echo "env_run.sh: port $EMBER_MASTER_PORT was taken; retrying on another" >&2
    continue
  fi
  exit "$status"
done
exit "$status"
