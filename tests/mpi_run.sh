#!/usr/bin/env bash
# Runs a test binary under mpirun: mpi_run.sh NP BINARY [extra mpirun args...] [-- program args...].
# Every run gets private Open MPI session/shared-memory directories: Bazel's sandbox gives each
# test the same PID namespace layout, and concurrent mpiruns would otherwise collide in /tmp.
set -euo pipefail
np="$1"
binary="$2"
shift 2
mpirun_args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do mpirun_args+=("$1"); shift; done
[ $# -gt 0 ] && shift  # the "--"
session="$(mktemp -d "${TEST_TMPDIR:-/tmp}/mpi.XXXXXX")"
trap 'rm -rf "$session"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export EMBER_COLLECTIVE_TIMEOUT="${EMBER_COLLECTIVE_TIMEOUT:-120}"
export EMBER_NUM_THREADS="${EMBER_NUM_THREADS:-1}"
export EMBER_DISTRIBUTED_DEBUG="${EMBER_DISTRIBUTED_DEBUG:-0}"
# Under --config=asan: Open MPI's own allocations that live until exit are not Ember's leaks
# (lsan_mpi.supp names its libraries). The ranks check for leaks just before MPI_Finalize
# (comm/mpi/runtime.cc), while those libraries are loaded. Components that MPI_Init opens, probes
# and unloads again leave allocations no suppression can name (their module is gone), so the ones
# these tests never use are not opened: PSM/PSM2/OFI (InfiniPath, Omni-Path, libfabric networks)
# and the monitoring wrappers; the point-to-point layer is ob1 over shared memory or TCP, as it
# would be here anyway.
supp="${TEST_SRCDIR:+$TEST_SRCDIR/${TEST_WORKSPACE:-ember}/tests}"
supp="${supp:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}/lsan_mpi.supp"
export LSAN_OPTIONS="suppressions=${supp}${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export OMPI_MCA_pml="${OMPI_MCA_pml:-ob1}" OMPI_MCA_mtl="${OMPI_MCA_mtl:-^psm,psm2,ofi}"
export OMPI_MCA_coll="${OMPI_MCA_coll:-^monitoring}" OMPI_MCA_osc="${OMPI_MCA_osc:-^monitoring}"
# Every rank emulates all the devices it is told of (and uses one): under ASan each emulated
# device's memory costs resident shadow, 4 ranks x 4 devices x the default 4 GB came to 4.5 GB per
# rank, and two such tests at once were killed by the OOM killer on a 24 GB machine.
export EMBER_EMULATED_GPU_MEMORY="${EMBER_EMULATED_GPU_MEMORY:-512M}"
# What a test target's env may set for its ranks (the backend, the emulated devices), forwarded
# only when set: -x of an unset variable is an error on some Open MPI versions.
forwarded=()
for name in EMBER_BACKEND EMBER_EMULATED_GPUS EMBER_EMULATED_GPU_MEMORY EMBER_EMU_DELAY EMBER_EMU_NCCL_CHUNK_BYTES; do
  if [ -n "${!name+set}" ]; then forwarded+=(-x "$name"); fi
done
exec mpirun -np "$np" --oversubscribe --bind-to none \
  --mca orte_tmpdir_base "$session" --mca btl_vader_backing_directory "$session" \
  -x EMBER_COLLECTIVE_TIMEOUT -x EMBER_NUM_THREADS -x EMBER_DISTRIBUTED_DEBUG -x LSAN_OPTIONS \
  "${forwarded[@]}" "${mpirun_args[@]}" "$binary" "$@"
