#!/usr/bin/env bash
# tools/train --device cuda under mpirun -np 2 on emulated GPUs: each rank trains LeNet on
# cuda:LOCAL_RANK, DDP's gradients going over NCCL (the MPI backend refuses CUDA tensors, so a run
# that trains went over NCCL), and after 2 steps its test loss is the CPU DDP run's (same ranks,
# batches and seed; gradients over MPI); so is a run with NCCL alone (EMBER_BACKEND=nccl, where a
# CPU tensor reaching a collective fails). Under --amp fp16 with a scale that overflows float16's
# gradients, the ranks' scaler, bound to their group, skips every step, halving the scale (1e30 is
# 1.00000002e+30 in float32), and the weights, never stepped with an inf, give a finite loss.
# train_cuda_mpirun_test.sh RUNNER TRAIN
set -uo pipefail
runner="$1"; train="$2"
fail() { echo "FAIL: $*"; exit 1; }
# 64 examples / 2 ranks / batch 16 = 2 steps, then the 12 test examples, 6 per rank.
tiny=(--model lenet --data synthetic --synthetic-size 64 --batch-size 16 --threads 1 --workers 0 --epochs 1
      --progress lines --log-every 1)

# run NAME COMMAND...: its output in $output, echoed; a non-zero exit fails the test.
run() {
  local name="$1"; shift
  output="$("$@" 2>&1)"
  local status=$?
  echo "$output"
  [ $status -eq 0 ] || fail "$name exited $status"
}

run "the CPU run" "$runner" 2 "$train" -- "${tiny[@]}" --device cpu
cpu="$output"
run "the CUDA run" "$runner" 2 "$train" -x EMBER_EMULATED_GPUS=2 -- "${tiny[@]}" --device cuda
gpu="$output"
grep -q "^train: lenet .*, cuda:0; 2 processes .*, gradients over NCCL$" <<<"$gpu" ||
  fail "the header does not say cuda:0 with gradients over NCCL"
grep -q "gradients over MPI$" <<<"$cpu" || fail "the CPU run's header does not say MPI"
grep -qE '^train: test_accuracy=.* steps=2 processes=2$' <<<"$gpu" || fail "the CUDA run did not end after 2 steps"
run "the CUDA run with EMBER_BACKEND=nccl" "$runner" 2 "$train" -x EMBER_EMULATED_GPUS=2 -x EMBER_BACKEND=nccl -- \
  "${tiny[@]}" --device cuda
nccl="$output"
run "the CUDA run with --amp fp16" "$runner" 2 "$train" -x EMBER_EMULATED_GPUS=2 -- "${tiny[@]}" --device cuda \
  --amp fp16 --amp-init-scale 1e30
fp16="$output"
grep -q "gradients over NCCL; autocast to float16, gradient scaler$" <<<"$fp16" || fail "the fp16 header"
grep -qE "^epoch 1/1 step 1/2 loss [0-9]+\.[0-9]+ \(avg [0-9.]+\) scale 5.00000008e\+29 " <<<"$fp16" &&
  grep -qE "^epoch 1/1 step 2/2 loss [0-9]+\.[0-9]+ \(avg [0-9.]+\) scale 2.50000004e\+29 " <<<"$fp16" ||
  fail "the scale did not halve at each step"

loss() { sed -n 's/^train: .*test_loss=\([0-9.]*\) .*/\1/p' <<<"$1"; }
cpu_loss=$(loss "$cpu") gpu_loss=$(loss "$gpu") nccl_loss=$(loss "$nccl") fp16_loss=$(loss "$fp16")
[ -n "$cpu_loss" ] && [ -n "$gpu_loss" ] && [ -n "$nccl_loss" ] && [ -n "$fp16_loss" ] ||
  fail "no finite test loss in a summary line"
close() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 2e-4 * (1 + a)) }'; }
close "$cpu_loss" "$gpu_loss" || fail "test loss on cuda:0 and cuda:1 ($gpu_loss) differs from the CPU's ($cpu_loss)"
close "$gpu_loss" "$nccl_loss" ||
  fail "test loss with EMBER_BACKEND=nccl ($nccl_loss) differs from the default backend's ($gpu_loss)"
echo "PASS (test loss $gpu_loss on the GPUs, $nccl_loss with NCCL alone, $cpu_loss on the CPUs)"
