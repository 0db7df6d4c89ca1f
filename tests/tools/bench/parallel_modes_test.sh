#!/usr/bin/env bash
# tools/bench/parallel_modes --quick on 2 emulated devices: single, data_parallel and ddp (the bench
# re-launching itself under mpirun -np 2) each run and report images/s, peak memory and a finite
# loss; the output says the devices are emulated; after one update data_parallel's loss is ddp's
# (the same chunks, each normalised on its own device). At --devices 1, as on a one-GPU host
# without Open MPI (its components hidden), ddp is one worker started without mpirun, and all
# three modes run (one timed step, no warm-up) with the same loss.
# parallel_modes_test.sh PARALLEL_MODES
set -uo pipefail
bench="$1"
fail() { echo "FAIL: $*"; exit 1; }
export EMBER_EMULATED_GPUS=2 EMBER_EMULATED_GPU_MEMORY=512M EMBER_NUM_THREADS=1 EMBER_COLLECTIVE_TIMEOUT=120
# Open MPI's allocations that live until exit are not Ember's leaks (as tests/mpi_run.sh).
supp="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-ember}/tests/lsan_mpi.supp"
[ -f "$supp" ] && export LSAN_OPTIONS="suppressions=$supp:fast_unwind_on_malloc=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
number='[0-9]+\.[0-9]+'

# run NAME COMMAND...: its output in $output, echoed; a non-zero exit fails the test.
run() {
  local name="$1"; shift
  output="$("$@" 2>&1)"
  local status=$?
  echo "$output"
  [ $status -eq 0 ] || fail "$name exited $status"
}
value() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }
close() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-3 * (1 + a)) }'; }

# One untimed and one timed step per mode: the timed step's loss comes after one update, which
# data_parallel and ddp must have made alike.
run "--quick on 2 devices" "$bench" --quick --warmup 1 --steps 1
grep -q '^emulated devices (cuda/emu, EMBER_EMULATED_GPUS): .* this run only checks that each mode runs$' <<<"$output" ||
  fail "the output does not say the devices are emulated"
grep -q '^  \$ mpirun -np 2 ' <<<"$output" || fail "ddp was not launched under mpirun -np 2"
grep -qE "^single +cuda:0 +$number +1\.000 +$number +$number\$" <<<"$output" || fail "no single row"
grep -qE "^data_parallel +cuda:0-1 +$number +$number +$number/$number +$number\$" <<<"$output" ||
  fail "no data_parallel row with a peak per device"
grep -qE "^ddp +cuda:0-1, 2 processes +$number +$number +$number/$number +$number\$" <<<"$output" || fail "no ddp row"
line="$(grep '^bench parallel_modes: ' <<<"$output")"
[ "$(tail -1 <<<"$output")" = "$line" ] || fail "the bench line is not the last line"
keys="$(grep -o ' [a-z_]*=' <<<"$line" | tr -d ' =' | tr '\n' ' ')"
expected="devices emulated batch steps single_images_per_second data_parallel_images_per_second"
expected+=" ddp_images_per_second data_parallel_vs_single ddp_vs_single single_peak_mib data_parallel_peak_mib"
expected+=" ddp_peak_mib single_loss data_parallel_loss ddp_loss "
[ "$keys" = "$expected" ] || fail "unexpected keys in the bench line: $keys"
grep -q ' devices=2 emulated=1 batch=8 steps=1 ' <<<"$line" || fail "wrong devices, emulated, batch or steps: $line"
grep -q 'nan' <<<"$line" && fail "a mode did not run: $line"
close "$(value data_parallel_loss "$line")" "$(value ddp_loss "$line")" ||
  fail "data_parallel's loss $(value data_parallel_loss "$line") differs from ddp's $(value ddp_loss "$line")"

run "--devices 1" env OMPI_MCA_mca_base_component_path=/nonexistent "$bench" --quick --devices 1 --warmup 0 --steps 1
grep -q '^one device: ' <<<"$output" || fail "one device is not said"
grep -q '^  \$ env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 EMBER_BACKEND=nccl ' <<<"$output" ||
  fail "the one ddp worker was not started directly with NCCL alone"
line="$(tail -1 <<<"$output")"
grep -qE "^bench parallel_modes: devices=1 emulated=1 batch=8 steps=1 " <<<"$line" || fail "no bench line at one device"
grep -q 'nan' <<<"$line" && fail "a mode did not run at one device: $line"
close "$(value single_loss "$line")" "$(value data_parallel_loss "$line")" &&
  close "$(value single_loss "$line")" "$(value ddp_loss "$line")" ||
  fail "at one device the losses differ: $line"
echo PASS
