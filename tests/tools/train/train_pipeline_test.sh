#!/usr/bin/env bash
# The train binary with LeNet pipelined over 2 emulated GPUs (--pipeline 2: Pipeline, layers
# balanced by parameters, the batch in micro-batches): the header names the mode, devices, balance,
# micro-batches, schedule and recomputation; after 2 steps the test loss is the single-device
# run's, under GPipe, under 1F1B with recomputation and uneven micro-batches, interleaved over 2
# virtual stages, and the auto schedule within a budget, which logs its choice (LeNet has no batch
# norm, so micro-batches change only the order of sums); the checkpoint has the single-device
# checkpoint's keys; it resumes on one device and a single-device checkpoint resumes pipelined,
# the two ending alike. Under --amp fp16 it trains to near the float32 loss. Bad flags are exit
# status 2 with a message naming the flag.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/train_run_lib.sh"
train="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
work="${TEST_TMPDIR:-$(mktemp -d)}/train_pipeline"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1

run "the single-device run" single.txt --max-steps 2 --device cuda:0 --checkpoint-dir single
run "the GPipe run" gpipe.txt --max-steps 2 --pipeline 2 --chunks 4 --checkpoint-dir gpipe
cat gpipe.txt
grep -q "^train: lenet .*, Pipeline on cuda:0,cuda:1 (layers 8/4 balanced by parameters; 4 micro-batches of 4, gpipe schedule); 1 process x 1 thread, batch 16 per process$" gpipe.txt ||
  fail "the header does not name the Pipeline, its devices, balance and micro-batches: $(head -1 gpipe.txt)"
grep -qE "^epoch 1/2 step 2/4 loss [0-9]+\.[0-9]+ .* peak mem [0-9.]+ GiB" gpipe.txt || fail "no finite loss at step 2"
grep -qE '^train: test_accuracy=.* steps=2 processes=1$' gpipe.txt || fail "the GPipe run did not end after 2 steps"
close "$(loss single.txt)" "$(loss gpipe.txt)" ||
  fail "test loss with the GPipe pipeline ($(loss gpipe.txt)) differs from one device's ($(loss single.txt))"

run "the 1F1B run" 1f1b.txt --max-steps 2 --pipeline 2 --chunks 3 --pipeline-schedule 1f1b --recompute
grep -q "Pipeline on cuda:0,cuda:1 (layers 8/4 balanced by parameters; 3 micro-batches of 6/5, 1f1b schedule, recompute)" 1f1b.txt ||
  fail "the header does not name the 1F1B schedule and recomputation: $(head -1 1f1b.txt)"
close "$(loss single.txt)" "$(loss 1f1b.txt)" ||
  fail "test loss with 1F1B and recomputation ($(loss 1f1b.txt)) differs from one device's ($(loss single.txt))"

run "the interleaved run" interleaved.txt --max-steps 2 --pipeline 2 --chunks 4 --pipeline-schedule interleaved \
  --virtual-stages 2
grep -q "(layers [0-9/]* balanced by parameters; 4 micro-batches of 4, interleaved schedule (2 virtual stages))" \
  interleaved.txt || fail "the header does not name the interleaved schedule: $(head -1 interleaved.txt)"
close "$(loss single.txt)" "$(loss interleaved.txt)" ||
  fail "test loss with interleaved 1F1B ($(loss interleaved.txt)) differs from one device's ($(loss single.txt))"

run "the auto run" auto.txt --max-steps 2 --pipeline 2 --chunks 4 --pipeline-schedule auto --pipeline-memory-budget 64
grep -q "auto schedule (chosen at the first step, logged))" auto.txt ||
  fail "the header does not name the auto schedule: $(head -1 auto.txt)"
grep -qE "^Pipeline \(auto\): [a-z0-9 =]+ of [0-9]+ candidates: simulated step [0-9.e-]+ s, measured [0-9.e-]+ s; .*\(budget 67108864\)$" \
  auto.txt || fail "auto did not log its choice with the simulated and measured step times: $(cat auto.txt)"
close "$(loss single.txt)" "$(loss auto.txt)" ||
  fail "test loss with the auto schedule ($(loss auto.txt)) differs from one device's ($(loss single.txt))"

# Under float16 autocast: every micro-batch's forward shares the stage's cast weights, whose
# backward then runs once per micro-batch, from the micro-batch's loss that the loss function
# scaled on the last stage; the progress shows the step's loss unscaled.
run "the GPipe fp16 run" gpipe_fp16.txt --max-steps 2 --pipeline 2 --chunks 4 --amp fp16
grep -q "gpipe schedule); 1 process x 1 thread, batch 16 per process; autocast to float16, gradient scaler$" \
  gpipe_fp16.txt || fail "the header does not name float16 autocast: $(head -1 gpipe_fp16.txt)"
grep -qE "^epoch 1/2 step 2/4 loss [0-2]\.[0-9]+ \(avg [0-9.]+\) scale 65536 " gpipe_fp16.txt ||
  fail "no unscaled loss and scale at step 2: $(cat gpipe_fp16.txt)"
close_amp "$(loss single.txt)" "$(loss gpipe_fp16.txt)" ||
  fail "test loss with the GPipe pipeline in fp16 ($(loss gpipe_fp16.txt)) is far from float32's ($(loss single.txt))"

keys single/epoch-1.safetensors > single_keys.txt
keys gpipe/epoch-1.safetensors > gpipe_keys.txt
grep -q '^model\.fc3\.weight$' single_keys.txt || fail "no model.fc3.weight in the checkpoint: $(cat single_keys.txt)"
diff single_keys.txt gpipe_keys.txt > /dev/null ||
  fail "the Pipeline checkpoint's keys differ from one device's: $(diff single_keys.txt gpipe_keys.txt)"

# The Pipeline checkpoint resumed on one device, and the single-device checkpoint resumed
# pipelined: both continue at step 2 and end alike at step 3 (compared with each other rather than
# each with a third run).
run "resuming the Pipeline checkpoint on --device cuda" gpipe_resumed.txt --max-steps 3 --device cuda \
  --resume gpipe/epoch-1.safetensors
grep -q "^resumed from gpipe/epoch-1.safetensors (epoch 0, step 2)$" gpipe_resumed.txt ||
  fail "not resumed at step 2: $(cat gpipe_resumed.txt)"
grep -q ", cuda:0; 1 process" gpipe_resumed.txt || fail "the resumed run is not on cuda:0 alone: $(head -2 gpipe_resumed.txt)"
run "resuming under --pipeline 2" pipe_from_single.txt --max-steps 3 --pipeline 2 --chunks 2 \
  --resume single/epoch-1.safetensors
grep -q "^resumed from single/epoch-1.safetensors (epoch 0, step 2)$" pipe_from_single.txt ||
  fail "not resumed at step 2: $(cat pipe_from_single.txt)"
grep -qE '^train: .* steps=3 processes=1$' pipe_from_single.txt || fail "the pipelined resumed run did not end at step 3"
close "$(loss gpipe_resumed.txt)" "$(loss pipe_from_single.txt)" ||
  fail "the single-device checkpoint resumed pipelined ends at test loss $(loss pipe_from_single.txt); the Pipeline checkpoint resumed on one device, at $(loss gpipe_resumed.txt)"

expect_usage_error() {
  local want="$1"; shift
  "$@" > out.txt 2> err.txt
  local status=$?
  [ $status -eq 2 ] || fail "'$*' exited $status, expected 2: $(cat err.txt)"
  grep -qF -- "$want" err.txt || fail "'$*': stderr lacks '$want': $(cat err.txt)"
  [ ! -s out.txt ] || fail "'$*' printed to stdout: $(cat out.txt)"
}
expect_usage_error "train: --pipeline 3: needs 3 CUDA devices (cuda:0 to cuda:2), but this machine has 2 CUDA devices (cuda:0 to cuda:1)" \
  "$train" "${tiny[@]}" --pipeline 3
expect_usage_error "train: --pipeline 2 and --devices cuda:0,cuda:1: give one of them" \
  "$train" "${tiny[@]}" --pipeline 2 --devices cuda:0,cuda:1
expect_usage_error "train: --pipeline 2: this process is rank 1 of 2 (RANK/WORLD_SIZE), but --pipeline splits the model across the devices of one process" \
  env RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 "$train" "${tiny[@]}" --pipeline 2
expect_usage_error "train: --recompute needs --pipeline N" "$train" "${tiny[@]}" --recompute
echo PASS
