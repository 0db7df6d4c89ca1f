#!/usr/bin/env bash
# The train binary on emulated GPUs (EMBER_EMULATED_GPUS=2): a few LeNet steps on cuda:1 end with
# the CPU run's test loss; the progress lines show the device's peak memory; a checkpoint written
# on the GPU resumes there and evaluates with --eval-only; bare `--device cuda` takes cuda:0 alone
# and cuda:LOCAL_RANK under a launcher (trained there by train_cuda_mpirun_test.sh); a device
# beyond the machine's, or a launched CUDA run with EMBER_BACKEND=mpi, is exit status 2, named.
# --amp fp16 trains near the CPU's loss through a gradient scaler whose scale the progress lines
# and the logs show, saved in the checkpoint and continued by a resume; a resume with another --amp
# fails naming both (train_cuda_mpirun_test.sh has overflows skipping steps under DDP).
# --data imagefolder (files decoded on the host, batches pinned) ends on cuda:1 at the CPU's loss.
# train_cuda_test.sh TRAIN SAMPLE_TREE
set -uo pipefail
train="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
sample_tree="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
work="${TEST_TMPDIR:-$(mktemp -d)}/train_cuda"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
export EMBER_EMULATED_GPUS=2
tiny=(--model lenet --data synthetic --synthetic-size 96 --batch-size 16 --threads 1 --workers 1 --epochs 2
      --progress lines --log-every 1)

"$train" "${tiny[@]}" --max-steps 3 --device cpu > cpu.txt 2>&1 || fail "CPU run exited $?: $(cat cpu.txt)"
"$train" "${tiny[@]}" --max-steps 3 --device cuda:1 --checkpoint-dir ck > gpu.txt 2>&1 ||
  fail "cuda:1 run exited $?: $(cat gpu.txt)"
grep -q "lenet .* on synthetic .*, cuda:1;" gpu.txt || fail "the header does not name cuda:1: $(head -1 gpu.txt)"
grep -q "step 3/6 .* peak mem [0-9.]* GiB" gpu.txt || fail "no peak memory in the progress lines: $(cat gpu.txt)"
grep -q "peak mem" cpu.txt && fail "the CPU run shows a device peak"
loss() { sed -n 's/.*test_loss=\([0-9.]*\).*/\1/p' "$1"; }
cpu_loss=$(loss cpu.txt) gpu_loss=$(loss gpu.txt)
[ -n "$cpu_loss" ] && [ -n "$gpu_loss" ] || fail "no summary line: $(tail -2 cpu.txt gpu.txt)"
awk -v a="$cpu_loss" -v b="$gpu_loss" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 2e-4 * (1 + a)) }' ||
  fail "test loss on cuda:1 ($gpu_loss) differs from the CPU's ($cpu_loss)"

# Resumed on the GPU from the GPU's checkpoint: continues at step 3 and runs to 5.
"$train" "${tiny[@]}" --max-steps 5 --device cuda:1 --checkpoint-dir ck --resume latest > resumed.txt 2>&1 ||
  fail "resume exited $?: $(cat resumed.txt)"
grep -q "resumed from ck/epoch-1.safetensors (epoch 0, step 3)" resumed.txt || fail "not resumed at step 3: $(cat resumed.txt)"
grep -q "steps=5 " resumed.txt || fail "resumed run did not end at step 5: $(tail -1 resumed.txt)"
"$train" "${tiny[@]}" --device cuda:0 --eval-only --resume ck/epoch-1.safetensors > eval.txt 2>&1 ||
  fail "--eval-only exited $?: $(cat eval.txt)"
grep -q "eval: 19 examples, loss $(printf '%.4f' "$(loss resumed.txt)")" eval.txt ||
  fail "--eval-only on cuda:0 does not give the resumed run's test loss: $(cat eval.txt) vs $(tail -1 resumed.txt)"

# --amp fp16, the scale doubling every 2 clean steps: after steps 1-3 the scaler holds 131072, with
# one clean step since it grew; resumed, step 4 completes the interval (262144), which a resume
# that restored only the scale (131072) or nothing (65536) would not show.
"$train" "${tiny[@]}" --max-steps 3 --device cuda:1 --amp fp16 --amp-growth-interval 2 --checkpoint-dir fp16 \
  --log-dir fp16_logs > fp16.txt 2>&1 || fail "fp16 run exited $?: $(cat fp16.txt)"
grep -q "cuda:1; 1 process x 1 thread, batch 16 per process; autocast to float16, gradient scaler$" fp16.txt ||
  fail "the fp16 header: $(head -1 fp16.txt)"
scales() { sed -n 's|^epoch [0-9]*/[0-9]* step [0-9]*/[0-9]* loss [0-9]*\.[0-9]* (avg [0-9.]*) scale \([0-9.e+]*\) .*|\1|p' "$1" | tr '\n' ' '; }
[ "$(scales fp16.txt)" = "65536 131072 131072 " ] || fail "fp16 scales at steps 1-3: $(scales fp16.txt)"
awk -v a="$cpu_loss" -v b="$(loss fp16.txt)" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b != "" && d <= 5e-3 * (1 + a)) }' ||
  fail "test loss with --amp fp16 ($(loss fp16.txt)) is far from the CPU's float32 ($cpu_loss)"
grep -q '"kind":"step","step":3,.*"loss_scale":131072,' fp16_logs/metrics.jsonl || fail "no loss_scale in the step-3 record"
grep -q '"amp\\":\\"fp16\\"' fp16/epoch-1.safetensors &&
  grep -q '"grad_scaler\\":{\\"scale\\":131072,.*\\"_growth_tracker\\":1}' fp16/epoch-1.safetensors ||
  fail "the fp16 checkpoint lacks the mode or the scaler's state"
"$train" "${tiny[@]}" --device cuda:1 --amp bf16 --checkpoint-dir fp16 --resume latest > mismatch.txt 2>&1
[ $? -eq 1 ] && grep -qF "the checkpoint was saved by a run with --amp fp16, this run has --amp bf16" mismatch.txt ||
  fail "resume of an fp16 checkpoint with --amp bf16: $(cat mismatch.txt)"
"$train" "${tiny[@]}" --max-steps 4 --device cuda:1 --amp fp16 --checkpoint-dir fp16 --resume latest > fp16b.txt 2>&1 ||
  fail "fp16 resume exited $?: $(cat fp16b.txt)"
grep -q "resumed from fp16/epoch-1.safetensors (epoch 0, step 3)" fp16b.txt && [ "$(scales fp16b.txt)" = "262144 " ] ||
  fail "the resumed fp16 run does not continue the scale: $(cat fp16b.txt)"

# An image folder of varied JPEG and PNG files (tools/imagefolder/sample_tree): 3 LeNet steps.
"$sample_tree" --out tree > tree.txt 2>&1 || fail "sample_tree exited $?: $(cat tree.txt)"
folder=(--model lenet --data imagefolder --data-dir tree/train --val-dir tree/val --image-size 32 --batch-size 8
        --epochs 1 --threads 1 --workers 1 --progress lines --log-every 1)
"$train" "${folder[@]}" --device cpu > folder_cpu.txt 2>&1 || fail "image folder on the CPU exited $?: $(cat folder_cpu.txt)"
"$train" "${folder[@]}" --device cuda:1 > folder_gpu.txt 2>&1 || fail "image folder on cuda:1 exited $?: $(cat folder_gpu.txt)"
grep -q "on ImageFolder tree/train (24 images, 3 classes, .*), cuda:1;" folder_gpu.txt ||
  fail "the image folder header on cuda:1: $(grep '^train: ' folder_gpu.txt | head -1)"
awk -v a="$(loss folder_cpu.txt)" -v b="$(loss folder_gpu.txt)" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 2e-4 * (1 + a)) }' ||
  fail "image folder test loss on cuda:1 ($(loss folder_gpu.txt)) differs from the CPU's ($(loss folder_cpu.txt))"

"$train" "${tiny[@]}" --max-steps 1 --device cuda > bare.txt 2>&1 || fail "--device cuda exited $?: $(cat bare.txt)"
grep -q ", cuda:0;" bare.txt || fail "--device cuda alone did not take cuda:0: $(head -1 bare.txt)"

expect_usage_error() {
  local want="$1"; shift
  "$@" > out.txt 2> err.txt
  local status=$?
  [ $status -eq 2 ] || fail "'$*' exited $status, expected 2: $(cat err.txt)"
  grep -qF -- "$want" err.txt || fail "'$*': stderr lacks '$want': $(cat err.txt)"
}
expect_usage_error "train: --device cuda:2: cuda:2 does not exist: this machine has 2 CUDA devices (cuda:0 to cuda:1)" \
  "$train" "${tiny[@]}" --device cuda:2
expect_usage_error "train: --device cuda: rank 2 has LOCAL_RANK 2 and so takes cuda:2, but this machine has 2 CUDA devices (cuda:0 to cuda:1); start at most 2 processes per node" \
  env RANK=2 WORLD_SIZE=3 LOCAL_RANK=2 "$train" "${tiny[@]}" --device cuda
expect_usage_error "train: --device cuda under a launcher: EMBER_BACKEND=mpi carries CPU tensors only, and rank 1's gradients would be on cuda:1" \
  env RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 EMBER_BACKEND=mpi "$train" "${tiny[@]}" --device cuda
expect_usage_error "cuda:0 does not exist: no CUDA device is available" \
  env EMBER_EMULATED_GPUS=0 "$train" "${tiny[@]}" --device cuda:0
echo PASS
