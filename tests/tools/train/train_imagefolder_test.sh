#!/usr/bin/env bash
# tools/train --data imagefolder on a generated tree of varied files (RGB, grayscale and CMYK
# JPEG, RGB, RGBA and grayscale PNG, a PNG named .JPEG, a README.txt in a class folder, a file at
# the split's root; sizes 20-64 pixels, below and above the 32-pixel crop): LeNet trains a few
# steps with finite losses on 3 classes, alone and under mpirun -np 2 (at the same test loss), and
# tells them apart after 10 epochs; a run stopped and resumed
# (with another worker count) ends with the uninterrupted run's checkpoint, byte for byte; the
# 2-rank evaluation counts every validation image once and agrees with --eval-only at 1 process;
# grayscale with the padded crop; no --val-dir trains without evaluating; differing class folders
# and bad flags fail naming what is wrong.
# train_imagefolder_test.sh RUNNER TRAIN SAMPLE_TREE
set -uo pipefail
runner="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
train="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
sample_tree="$(cd "$(dirname "$3")" && pwd)/$(basename "$3")"
work="${TEST_TMPDIR:-$(mktemp -d)}/train_imagefolder"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }

"$sample_tree" --out tree --classes 3 --train-per-class 8 --val-per-class 4 > tree.txt 2>&1 ||
  fail "sample_tree exited $?: $(cat tree.txt)"
# 24 training images in 3 steps of 8 per epoch, 12 validation images.
tiny=(--model lenet --data imagefolder --data-dir tree/train --val-dir tree/val --image-size 32 --batch-size 8
      --epochs 2 --threads 1 --progress lines --log-every 1 --deterministic)
run() {
  local name="$1" output="$2"; shift 2
  "$train" "${tiny[@]}" "$@" > "$output" 2>&1 || fail "$name exited $?: $(cat "$output")"
}
loss() { sed -n 's/^train: .*test_loss=\([0-9.]*\) .*/\1/p' "$1"; }
# Every progress line's loss, and the summary's test loss, are numbers (not nan or inf).
finite() {
  local losses
  losses="$(sed -n 's/^epoch [0-9]*\/[0-9]* step [0-9]*\/[0-9]* loss \([^ ]*\) .*/\1/p' "$1" | tr '\n' ' ')"
  [ -n "$losses" ] || fail "no progress lines in $1: $(cat "$1")"
  for value in $losses $(loss "$1"); do
    [[ "$value" =~ ^[0-9]+\.[0-9]+$ ]] || fail "a loss in $1 is '$value': $(cat "$1")"
  done
}
close() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 2e-4 * (1 + a)) }'; }

# Uninterrupted: 2 epochs, 2 loader workers decoding.
run "the full run" full.txt --workers 2 --checkpoint-dir full
header="^train: lenet ([0-9.]*M parameters) on ImageFolder tree/train (24 images, 3 classes, RGB; training on RandomResizedCrop 32 + flip; evaluation on tree/val, 12 images, Resize 37 + CenterCrop 32), cpu; 1 process x 1 thread, batch 8 per process$"
grep -q "$header" full.txt || fail "the header: $(head -3 full.txt)"
grep -q "^train: test_accuracy=[0-9.]* test_loss=[0-9.]* .* epochs=2 steps=6 processes=1$" full.txt ||
  fail "the summary: $(tail -1 full.txt)"
finite full.txt
# The model's last layer has one output per class folder.
grep -aq '"model.fc3.weight":{"dtype":"F32","shape":\[3,84\]' full/epoch-2.safetensors ||
  fail "the checkpoint's classifier is not [3, 84]: $(grep -ao '"model.fc3.weight":{[^}]*}' full/epoch-2.safetensors)"

# Longer, the model tells the classes apart (a colour and a stripe angle each) on the validation
# images, which it saw through every decoder path: at least 9 of 12 right (11 in every seed tried).
run "the longer run" learn.txt --workers 1 --epochs 10 --lr 0.05
awk -v a="$(sed -n 's/^train: test_accuracy=\([0-9.]*\) .*/\1/p' learn.txt)" 'BEGIN { exit !(a != "" && a >= 0.75) }' ||
  fail "10 epochs reach a test accuracy below 0.75: $(tail -2 learn.txt)"

# Stopped after 2 steps, resumed with no loader workers: the same checkpoint at the end.
run "the stopped run" stopped.txt --workers 2 --max-steps 2 --checkpoint-dir ck
run "the resumed run" resumed.txt --workers 0 --checkpoint-dir ck --resume latest
grep -q "^resumed from ck/epoch-1.safetensors (epoch 0, step 2)$" resumed.txt || fail "not resumed: $(cat resumed.txt)"
cmp -s full/epoch-2.safetensors ck/epoch-2.safetensors ||
  fail "the resumed run's checkpoint differs from the uninterrupted run's (test loss $(loss resumed.txt) vs $(loss full.txt))"

# Grayscale, the padded crop, Normalize's statistics given.
run "the grayscale run" gray.txt --workers 1 --max-steps 2 --image-channels 1 --image-crop padded --image-mean 0.5 \
  --image-std 0.25
grep -q "3 classes, grayscale; training on Resize 32 + CenterCrop 32 + RandomCrop 32 padding 4 + flip; evaluation on tree/val, 12 images, Resize 32 + CenterCrop 32)" gray.txt ||
  fail "the grayscale header: $(head -3 gray.txt)"
finite gray.txt

# Without --val-dir: training only, and no best checkpoint (nothing measured it).
"$train" --model lenet --data imagefolder --data-dir tree/train --image-size 32 --batch-size 8 --epochs 1 --threads 1 \
  --workers 0 --progress lines --checkpoint-dir noval > noval.txt 2>&1 || fail "the run without --val-dir exited $?: $(cat noval.txt)"
grep -q "no evaluation: no --val-dir)" noval.txt && grep -q "^epoch 1/1: train loss [0-9.]* acc [0-9.]* | no evaluation (no --val-dir) |" noval.txt &&
  grep -q "^train: test_accuracy=none test_loss=none .* steps=3 processes=1$" noval.txt || fail "without --val-dir: $(cat noval.txt)"
[ -f noval/epoch-1.safetensors ] && [ ! -e noval/best.safetensors ] || fail "checkpoints without --val-dir: $(ls noval)"

# Under mpirun -np 2: 4 images per rank and step, so the same 3 steps per epoch.
"$runner" 2 "$train" -- "${tiny[@]}" --batch-size 4 --workers 1 --max-steps 3 --checkpoint-dir ddp > ddp.txt 2>&1 ||
  fail "mpirun -np 2 exited $?: $(cat ddp.txt)"
grep -q "3 classes, RGB; .*), cpu; 2 processes x 1 thread, batch 4 per process" ddp.txt || fail "the DDP header: $(head -3 ddp.txt)"
grep -q "^train: .* epochs=1 steps=3 processes=2$" ddp.txt || fail "the DDP summary: $(tail -1 ddp.txt)"
finite ddp.txt
# The same global batches of the same crops (draws depend on the seed, the epoch and the image,
# not on the rank), and LeNet has no batch norm: epoch 1 ends where the 1-process run's does.
epoch1="$(sed -n 's/^epoch 1\/2: .* test loss \([0-9.]*\) acc.*/\1/p' full.txt)"
close "$epoch1" "$(loss ddp.txt)" || fail "2 ranks end epoch 1 at test loss $(loss ddp.txt), 1 process at $epoch1"
# The 2 ranks' evaluation shards cover the 12 validation images once: --eval-only on the checkpoint
# counts 12 at 2 processes and at 1, with the training run's test loss.
"$runner" 2 "$train" -- "${tiny[@]}" --eval-only --resume ddp/epoch-1.safetensors > eval2.txt 2>&1 ||
  fail "--eval-only under mpirun exited $?: $(cat eval2.txt)"
run "--eval-only alone" eval1.txt --eval-only --resume ddp/epoch-1.safetensors
for file in eval2.txt eval1.txt; do
  grep -q "^eval: 12 examples, loss $(printf '%.4f' "$(loss ddp.txt)")" $file ||
    fail "$file does not evaluate 12 images at the DDP run's test loss $(loss ddp.txt): $(cat $file)"
done

# Validation classes that differ from the training ones: an error naming both trees.
mkdir -p other && cp -r tree/val other/val && mv other/val/class_02 other/val/class_03
"$train" "${tiny[@]}" --val-dir other/val > mismatch.txt 2>&1
[ $? -eq 66 ] && grep -qF -- "the class folders of --data-dir tree/train (3 classes) and --val-dir other/val (3 classes) differ: 'class_02' is in --data-dir only" mismatch.txt ||
  fail "differing class folders: $(cat mismatch.txt)"

expect_usage_error() {
  local want="$1"; shift
  "$train" "$@" > out.txt 2> err.txt
  local status=$?
  [ $status -eq 2 ] || fail "'$*' exited $status, expected 2: $(cat err.txt)"
  grep -qF -- "$want" err.txt || fail "'$*': stderr lacks '$want': $(cat err.txt)"
}
expect_usage_error "train: --data imagefolder needs --data-dir" --data imagefolder
expect_usage_error "train: --val-dir needs --data imagefolder" --data synthetic --val-dir tree/val
expect_usage_error "train: --image-channels: expected 1 (grayscale) or 3 (RGB), got 2" "${tiny[@]}" --image-channels 2
expect_usage_error "train: --image-mean: expected 3 values (--image-channels 3), got 1: '0.5'" "${tiny[@]}" --image-mean 0.5
expect_usage_error "train: --image-crop: expected one of {resized, padded}, got 'random'" "${tiny[@]}" --image-crop random
expect_usage_error "train: --eval-only with --data imagefolder needs --val-dir" --data imagefolder --data-dir tree/train \
  --eval-only --resume ck/epoch-2.safetensors
echo "PASS (test loss $(loss full.txt), resumed $(loss resumed.txt), grayscale $(loss gray.txt), 2 ranks $(loss ddp.txt))"
