#!/usr/bin/env bash
# tools/bench/allreduce, briefly: --backend nccl at 2 ranks on emulated cuda:0 and cuda:1 prints a
# row per size up to 1 MB and its ratio line; --backend mpi still does; one rank with
# EMBER_BACKEND=nccl runs without MPI at all (MPI_Init could not start: its components are hidden),
# as on a GPU host that has no Open MPI.
# allreduce_test.sh RUNNER ALLREDUCE
set -uo pipefail
runner="$1"; bench="$2"
fail() { echo "FAIL: $*"; exit 1; }
number='[0-9]+\.[0-9]+'
rows() { grep -cE "^ +[0-9]+ +$number +$number +$number +$number +$number\$" <<<"$1"; }

# run NAME COMMAND...: its output in $output, echoed; a non-zero exit fails the test.
run() {
  local name="$1"; shift
  output="$("$@" 2>&1)"
  local status=$?
  echo "$output"
  [ $status -eq 0 ] || fail "$name exited $status"
}

run "--backend nccl" "$runner" 2 "$bench" -x EMBER_EMULATED_GPUS=2 -- --backend nccl --max-bytes 1048576 --trials 3
grep -q 'Ember ProcessGroup vs raw ncclAllReduce, 2 ranks' <<<"$output" || fail "no nccl header"
grep -q '^emulated devices:' <<<"$output" || fail "the header does not say the devices are emulated"
[ "$(rows "$output")" -eq 5 ] || fail "expected 5 rows (4 KB to 1 MB)"
grep -qE "^bench allreduce: backend=nccl ranks=2 emulated=1 busbw_vs_nccl_min_1mb=$number\$" <<<"$output" ||
  fail "no nccl ratio line"

run "--backend mpi" "$runner" 2 "$bench" -- --max-bytes 1048576 --trials 1
[ "$(rows "$output")" -eq 5 ] || fail "expected 5 rows from --backend mpi"
grep -qE "^bench allreduce: ranks=2 busbw_vs_mpi_min_1mb=$number\$" <<<"$output" || fail "no mpi ratio line"

# Outside mpi_run.sh, so its LeakSanitizer suppressions (Open MPI's libraries are loaded, if unused)
# are passed here.
supp="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-ember}/tests/lsan_mpi.supp"
[ -f "$supp" ] && export LSAN_OPTIONS="suppressions=$supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
run "one rank" env EMBER_BACKEND=nccl EMBER_EMULATED_GPUS=1 OMPI_MCA_mca_base_component_path=/nonexistent \
  "$bench" --backend nccl --max-bytes 16384 --trials 1
grep -q '^one rank' <<<"$output" || fail "one rank is not said"
[ "$(rows "$output")" -eq 2 ] || fail "expected 2 rows at one rank"
grep -qE "^bench allreduce: backend=nccl ranks=1 emulated=1 busbw_vs_nccl_min_1mb=nan\$" <<<"$output" ||
  fail "no ratio line at one rank"
echo PASS
