#!/usr/bin/env bash
# The train binary end to end, in seconds: --help and exit status 2 for bad input; a smoke run on
# synthetic data with checkpoints and logs; --resume latest continuing from the saved step, ending
# byte-identical to an uninterrupted run; a crash after the last checkpoint, resumed, leaving one log
# record per step; --eval-only on the checkpoint giving the run's final
# accuracy; resuming with other schedule settings failing by name; --amp bf16 training within
# bfloat16's rounding of float32, its mode saved and a resume with another --amp failing by name;
# keep-last-K plus best (also across runs); Ctrl-C saving a checkpoint that --resume latest picks
# up, a second Ctrl-C exiting.
set -uo pipefail
train="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
work="${TEST_TMPDIR:-$(mktemp -d)}/train_smoke"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
# LeNet on 3x32x32 synthetic images: 256 examples in 8 steps of 32 per epoch, 51 test examples.
tiny=(--model lenet --data synthetic --synthetic-size 256 --batch-size 32 --threads 1 --workers 0)

# --help: exit 0, every flag of the issue documented.
"$train" --help > help.txt || fail "--help exited $?"
for flag in model data data-dir epochs batch-size lr momentum weight-decay optimizer schedule label-smoothing \
            workers seed device threads checkpoint-dir resume log-dir max-steps eval-only amp; do
  grep -q -- "^  --$flag[ {]\|^  --$flag\$" help.txt || fail "--help does not document --$flag"
done

# Bad flags and values: a message on stderr naming the flag, exit status 2, nothing trained.
expect_usage_error() {
  local want="$1"; shift
  "$train" "$@" > out.txt 2> err.txt
  local status=$?
  [ $status -eq 2 ] || fail "'$*' exited $status, expected 2"
  grep -qF -- "$want" err.txt || fail "'$*': stderr lacks '$want': $(cat err.txt)"
  [ ! -s out.txt ] || fail "'$*' printed to stdout: $(cat out.txt)"
}
expect_usage_error "train: unknown flag --bogus (see --help)" --bogus
expect_usage_error "train: --epochs: expected an integer, got 'two'" --epochs two
expect_usage_error "train: --lr: expected a finite number, got 'nan'" --lr nan
expect_usage_error "train: --data: expected one of {fashion-mnist, cifar10, cifar100, synthetic, imagefolder}, got 'mnist'" --data mnist
expect_usage_error "train: --model: unknown model 'resnet19'" --model resnet19
expect_usage_error "train: --device: " --device gpu
expect_usage_error "train: --device cuda:0: cuda:0 does not exist: no CUDA device is available" --device cuda:0
expect_usage_error "train: --eval-only needs --resume" --eval-only
expect_usage_error "train: --batch-size: missing value" --batch-size
expect_usage_error "train: --amp: expected one of {off, bf16, fp16}, got 'fp8'" --amp fp8
expect_usage_error "train: --amp fp16: this run trains on the CPU (--device cpu), which autocasts to bfloat16 only" \
  --amp fp16
expect_usage_error "train: --amp-growth-interval needs --amp fp16" --amp bf16 --amp-growth-interval 4

# A smoke run: stops after 4 of 16 steps, saves a checkpoint, logs every step.
"$train" "${tiny[@]}" --epochs 2 --max-steps 4 --log-every 1 --checkpoint-dir ck --log-dir logs > run1.txt 2>&1 \
  || { cat run1.txt; fail "smoke run exited $?"; }
cat run1.txt
grep -q "^train: test_accuracy=.* epochs=1 steps=4 processes=1$" run1.txt || fail "smoke run summary"
[ "$(grep -c '^epoch 1/2 step [1-4]/8 loss' run1.txt)" -eq 4 ] || fail "expected 4 progress lines (not a terminal)"
[ -f ck/epoch-1.safetensors ] && [ -f ck/best.safetensors ] || fail "checkpoints missing: $(ls ck)"
ls logs/events.out.tfevents.* > /dev/null || fail "no TensorBoard event file"
[ "$(grep -c '"kind":"step"' logs/metrics.jsonl)" -eq 4 ] || fail "expected 4 step records"
[ "$(grep -c '"kind":"epoch"' logs/metrics.jsonl)" -eq 0 ] || fail "a cut-short epoch was logged as an epoch"
[ "$(grep -c '"kind":"stop"' logs/metrics.jsonl)" -eq 1 ] || fail "expected 1 stop record"
grep -q "^epoch 1/2 (stopped at step 4/8): train loss" run1.txt || fail "cut-short epoch line"

# --amp bf16: the same 4 steps under bfloat16 autocast. Each step's loss is within bfloat16's
# rounding of the float32 run's, yet the arithmetic was not float32's (the checkpoints' tensors
# differ); there is no loss scale, and the checkpoint records the mode.
"$train" "${tiny[@]}" --epochs 2 --max-steps 4 --log-every 1 --amp bf16 --checkpoint-dir bf16 > bf16.txt 2>&1 \
  || { cat bf16.txt; fail "bf16 run exited $?"; }
grep -q "^train: lenet .*, batch 32 per process; autocast to bfloat16$" bf16.txt || fail "bf16 header: $(head -1 bf16.txt)"
grep -q "^train: test_accuracy=.* epochs=1 steps=4 processes=1$" bf16.txt || fail "bf16 run summary: $(cat bf16.txt)"
grep -q " scale " bf16.txt && fail "a bf16 run shows a loss scale: $(cat bf16.txt)"
step_losses() { sed -n 's|^epoch 1/2 step [0-9]*/8 loss \([0-9.]*\) .*|\1|p' "$1" | tr '\n' ' '; }
awk -v a="$(step_losses run1.txt)" -v b="$(step_losses bf16.txt)" 'BEGIN { if (split(a, x, " ") != 4 || split(b, y, " ") != 4) exit 1
  for (i = 1; i <= 4; ++i) { d = x[i] - y[i]; if (d < 0) d = -d; if (d > 0.02) exit 1 } }' ||
  fail "bf16 step losses ($(step_losses bf16.txt)) are not within 0.02 of float32's ($(step_losses run1.txt))"
tensor_bytes() { tail -c +$((9 + $(od -An -tu8 -N8 "$1" | tr -d ' '))) "$1"; }
cmp -s <(tensor_bytes ck/epoch-1.safetensors) <(tensor_bytes bf16/epoch-1.safetensors) &&
  fail "the bf16 run's weights equal the float32 run's: autocast changed nothing"
grep -q '"amp\\":\\"bf16\\"' bf16/epoch-1.safetensors || fail "the bf16 checkpoint does not record --amp bf16"
# Resuming in another precision fails before loading anything, naming both; in the same one it continues.
"$train" "${tiny[@]}" --epochs 2 --checkpoint-dir bf16 --resume latest > mismatch.txt 2>&1
[ $? -eq 1 ] && grep -qF -- "the checkpoint was saved by a run with --amp bf16, this run has --amp off" mismatch.txt ||
  fail "resume of a bf16 checkpoint without --amp: $(cat mismatch.txt)"
"$train" "${tiny[@]}" --epochs 2 --amp bf16 --checkpoint-dir ck --resume latest > mismatch.txt 2>&1
[ $? -eq 1 ] && grep -qF -- "the checkpoint was saved by a run with --amp off, this run has --amp bf16" mismatch.txt ||
  fail "resume of a float32 checkpoint with --amp bf16: $(cat mismatch.txt)"
"$train" "${tiny[@]}" --epochs 2 --max-steps 6 --amp bf16 --checkpoint-dir bf16 --resume latest > bf16b.txt 2>&1 ||
  { cat bf16b.txt; fail "resumed bf16 run exited $?"; }
grep -q "^resumed from bf16/epoch-1.safetensors (epoch 0, step 4)$" bf16b.txt &&
  grep -q "^train: .* steps=6 processes=1$" bf16b.txt || fail "resumed bf16 run: $(cat bf16b.txt)"

# --resume latest continues at step 4 and stops at the new --max-steps, appending to the logs.
"$train" "${tiny[@]}" --epochs 2 --max-steps 10 --log-every 1 --checkpoint-dir ck --log-dir logs --resume latest \
  > run2.txt 2>&1 || { cat run2.txt; fail "resumed run exited $?"; }
cat run2.txt
grep -q "^resumed from ck/epoch-1.safetensors (epoch 0, step 4)$" run2.txt || fail "resume message"
grep -q "^epoch 1/2 step 5/8 loss" run2.txt || fail "the resumed run did not start at step 5 of epoch 1"
grep -q "^train: .* epochs=2 steps=10 processes=1$" run2.txt || fail "resumed run summary"
[ "$(grep -c '"kind":"step"' logs/metrics.jsonl)" -eq 10 ] || fail "expected 10 step records after the resume"
# Epoch 1, cut short and then finished by the resumed run, is logged as an epoch once.
[ "$(grep -c '"kind":"epoch"' logs/metrics.jsonl)" -eq 1 ] || fail "expected 1 epoch record after the resume"
[ "$(grep -c '"kind":"stop"' logs/metrics.jsonl)" -eq 2 ] || fail "expected 2 stop records after the resume"
grep -q '"kind":"step","step":5,' logs/metrics.jsonl || fail "no step-5 record"
[ "$(grep -c '"kind":"resume","step":4,' logs/metrics.jsonl)" -eq 1 ] || fail "no resume record at step 4"
[ -f ck/epoch-2.safetensors ] || fail "no epoch-2 checkpoint"
[ "$(ls logs/events.out.tfevents.* | wc -l)" -eq 2 ] || fail "expected one event file per run"

# A crash mid-epoch, after the last checkpoint: the run below logs steps 1-12 and checkpoints at
# steps 8 (epoch 1) and 12 (--max-steps); deleting the step-12 file leaves what a run killed at step
# 12 leaves. Resumed from step 8, the logs keep one record per step: 9-12 of the dead run are
# dropped, a "resume" record marks step 8, and the new event file opens with TensorBoard's restart
# marker (its decoding is tested in metrics_log_test).
"$train" "${tiny[@]}" --epochs 3 --max-steps 12 --log-every 1 --checkpoint-dir crash --log-dir crashlogs \
  > crash1.txt 2>&1 || { cat crash1.txt; fail "pre-crash run exited $?"; }
rm crash/epoch-2.safetensors
"$train" "${tiny[@]}" --epochs 3 --max-steps 14 --log-every 1 --checkpoint-dir crash --log-dir crashlogs \
  --resume latest > crash2.txt 2>&1 || { cat crash2.txt; fail "post-crash run exited $?"; }
grep -q "^resumed from crash/epoch-1.safetensors (epoch 1, step 8)$" crash2.txt || fail "$(cat crash2.txt)"
steps="$(grep -o '"kind":"step","step":[0-9]*' crashlogs/metrics.jsonl | grep -o '[0-9]*$' | tr '\n' ' ')"
[ "$steps" = "$(seq -s ' ' 1 14) " ] || fail "step records after the crash and resume: $steps"
[ "$(grep -c '"kind":"resume","step":8,' crashlogs/metrics.jsonl)" -eq 1 ] || fail "no resume record at step 8"
[ "$(grep -c '"kind":"epoch","step":8,' crashlogs/metrics.jsonl)" -eq 1 ] || fail "epoch 1 is not logged once, at step 8"
stops="$(grep -o '"kind":"stop","step":[0-9]*' crashlogs/metrics.jsonl | tr '\n' ' ')"
[ "$stops" = '"kind":"stop","step":14 ' ] || fail "the dead run's stop record at step 12 was kept: $stops"

# Resuming continues exactly: the same 10 steps run straight through (with 2 loader workers, which
# must not matter either) leave a byte-identical checkpoint.
"$train" "${tiny[@]}" --epochs 2 --max-steps 10 --workers 2 --checkpoint-dir straight > straight.txt 2>&1 \
  || { cat straight.txt; fail "straight run exited $?"; }
cmp straight/epoch-2.safetensors ck/epoch-2.safetensors || fail "the resumed run's checkpoint differs from a straight run's"

# Resuming at --max-steps trains nothing.
"$train" "${tiny[@]}" --epochs 2 --max-steps 10 --checkpoint-dir ck --resume latest > run3.txt 2>&1 \
  || { cat run3.txt; fail "idle resume exited $?"; }
grep -q "^nothing to train: the checkpoint is at step 10, --max-steps is 10$" run3.txt || fail "idle resume message"

# Resuming with another schedule length fails before loading anything, naming the flags.
"$train" "${tiny[@]}" --epochs 3 --checkpoint-dir ck --resume latest > mismatch.txt 2>&1
status=$?
[ $status -eq 1 ] || fail "resume with another --epochs exited $status, expected 1: $(cat mismatch.txt)"
grep -qF -- "--epochs 2 (8 steps per epoch), this run has" mismatch.txt || fail "mismatch message: $(cat mismatch.txt)"
grep -qF -- "they differ in --epochs." mismatch.txt || fail "mismatch message: $(cat mismatch.txt)"
"$train" "${tiny[@]}" --epochs 2 --schedule cosine --checkpoint-dir ck --resume latest > mismatch.txt 2>&1
grep -qF -- "they differ in --schedule." mismatch.txt || fail "schedule mismatch message: $(cat mismatch.txt)"

# --eval-only evaluates the saved weights: the resumed run's final test accuracy and loss.
"$train" "${tiny[@]}" --checkpoint-dir ck --resume ck/epoch-2.safetensors --eval-only > eval.txt 2>&1 \
  || { cat eval.txt; fail "--eval-only exited $?"; }
cat eval.txt
grep -q "^loaded weights from ck/epoch-2.safetensors$" eval.txt || fail "eval-only load message"
grep -q "^eval: 51 examples, loss" eval.txt || fail "eval-only did not evaluate the 51 test examples"
final="$(grep -o 'test_accuracy=[0-9.]* test_loss=[0-9.]*' run2.txt)"
grep -q "^train: $final .* epochs=0 steps=0" eval.txt || fail "eval-only gave other numbers than the run ($final)"

# Three whole epochs with --keep-checkpoints 1: the last epoch and best remain.
"$train" "${tiny[@]}" --synthetic-size 64 --epochs 3 --keep-checkpoints 1 --checkpoint-dir keep > keep.txt 2>&1 \
  || { cat keep.txt; fail "keep run exited $?"; }
[ "$(cd keep && ls | tr '\n' ' ')" = "best.safetensors epoch-3.safetensors " ] || fail "kept: $(ls keep)"
# Resumed with a smaller --keep-checkpoints in a directory holding epochs 1-4, pruning removes every
# older epoch file, not only those the resumed run wrote.
"$train" "${tiny[@]}" --synthetic-size 64 --epochs 6 --max-steps 8 --keep-checkpoints 9 --checkpoint-dir gap \
  > gap1.txt 2>&1 || { cat gap1.txt; fail "gap run exited $?"; }
ls gap/epoch-1.safetensors gap/epoch-4.safetensors > /dev/null || fail "gap run kept: $(ls gap)"
"$train" "${tiny[@]}" --synthetic-size 64 --epochs 6 --keep-checkpoints 1 --checkpoint-dir gap --resume latest \
  > gap2.txt 2>&1 || { cat gap2.txt; fail "resumed gap run exited $?"; }
[ "$(cd gap && ls | tr '\n' ' ')" = "best.safetensors epoch-6.safetensors " ] || fail "kept after resume: $(ls gap)"

# One epoch of 4 steps: the shortest one-cycle schedule that still has a warm-up phase (5 steps).
"$train" "${tiny[@]}" --synthetic-size 128 --epochs 1 > short.txt 2>&1 || { cat short.txt; fail "4-step run exited $?"; }
grep -q "^train: .* epochs=1 steps=4 processes=1$" short.txt || fail "4-step run summary: $(cat short.txt)"

# Ctrl-C: a checkpoint at the current step, exit status 130, and --resume latest picks it up.
# (A long run of small epochs: 64 steps each, 409 test examples.)
"$train" "${tiny[@]}" --synthetic-size 2048 --epochs 1000 --log-every 1 --checkpoint-dir ck > int.txt 2>&1 &
pid=$!
for _ in $(seq 600); do grep -q "step 2/" int.txt && break; sleep 0.1; done
grep -q "step 2/" int.txt || { kill $pid; fail "the run did not start"; }
kill -INT $pid
wait $pid
status=$?
cat int.txt
[ $status -eq 130 ] || fail "interrupted run exited $status, expected 130"
step="$(sed -n 's/^interrupted at step \([0-9]*\); checkpoint saved.*/\1/p' int.txt)"
[ -n "$step" ] && [ -f ck/interrupted.safetensors ] || fail "no checkpoint after Ctrl-C"
grep -q "^train: .* interrupted=1$" int.txt || fail "summary does not say interrupted"
"$train" "${tiny[@]}" --synthetic-size 2048 --epochs 1000 --max-steps $((step + 1)) --checkpoint-dir ck \
  --resume latest > after.txt 2>&1 || { cat after.txt; fail "resume after Ctrl-C exited $?"; }
grep -q "^resumed from ck/interrupted.safetensors (epoch 0, step $step)$" after.txt || fail "$(cat after.txt)"
grep -q "^train: .* steps=$((step + 1)) processes=1$" after.txt || fail "resume after Ctrl-C summary"
# A second Ctrl-C exits at once with status 130, without waiting for the step or saving. (ResNet-20
# steps of 256 images take seconds, so both signals land inside one step.)
"$train" --model resnet20 --data synthetic --synthetic-size 2048 --batch-size 256 --threads 1 --workers 0 \
  --epochs 10 --log-every 1 --checkpoint-dir ck2 > int2.txt 2>&1 &
pid=$!
for _ in $(seq 1200); do grep -q "step 1/" int2.txt && break; sleep 0.1; done
grep -q "step 1/" int2.txt || { kill $pid; fail "the ResNet-20 run did not start: $(cat int2.txt)"; }
kill -INT $pid
sleep 0.2
kill -INT $pid
wait $pid
status=$?
[ $status -eq 130 ] || fail "twice-interrupted run exited $status, expected 130: $(cat int2.txt)"
grep -q "second interrupt: exiting now, without a checkpoint" int2.txt || fail "no second-interrupt message"
[ ! -e ck2/interrupted.safetensors ] || fail "a checkpoint was written after the second Ctrl-C"
echo "PASS"
