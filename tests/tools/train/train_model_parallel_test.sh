#!/usr/bin/env bash
# The train binary with the model split over 2 emulated GPUs (--model-parallel 2: ModelParallel,
# LeNet's layers balanced by parameters, run in turn): the header names the mode, the devices and
# the balance, and after 2 steps the test loss is the single-device run's (the same arithmetic,
# on other devices); the checkpoint has the bare model's keys, exactly the single-device
# checkpoint's; it resumes on one device and a single-device checkpoint resumes split, both ending
# alike; --eval-only evaluates a checkpoint split. Bad flags
# (too many devices, with DataParallel, under a launcher of several ranks, the pipeline's flags
# without --pipeline) are exit status 2 with a message naming the flag.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/train_run_lib.sh"
train="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
work="${TEST_TMPDIR:-$(mktemp -d)}/train_model_parallel"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1

run "the single-device run" single.txt --max-steps 2 --device cuda:0 --checkpoint-dir single
run "the ModelParallel run" mp.txt --max-steps 2 --model-parallel 2 --checkpoint-dir mp
cat mp.txt
# LeNet's 12 layers by parameters: conv1 .. fc1 (51k) on cuda:0, relu, fc2, relu, fc3 (11k) on cuda:1.
grep -q "^train: lenet .*, ModelParallel on cuda:0,cuda:1 (layers 8/4 balanced by parameters); 1 process x 1 thread, batch 16 per process$" mp.txt ||
  fail "the header does not name ModelParallel, its devices and balance: $(head -1 mp.txt)"
grep -qE "^epoch 1/2 step 2/4 loss [0-9]+\.[0-9]+ .* peak mem [0-9.]+ GiB" mp.txt || fail "no finite loss at step 2"
grep -qE '^train: test_accuracy=.* steps=2 processes=1$' mp.txt || fail "the ModelParallel run did not end after 2 steps"
single_loss=$(loss single.txt) mp_loss=$(loss mp.txt)
[ -n "$single_loss" ] && [ -n "$mp_loss" ] || fail "no finite test loss in a summary line"
close "$single_loss" "$mp_loss" || fail "test loss with ModelParallel ($mp_loss) differs from one device's ($single_loss)"

keys single/epoch-1.safetensors > single_keys.txt
keys mp/epoch-1.safetensors > mp_keys.txt
grep -q '^model\.fc3\.weight$' single_keys.txt || fail "no model.fc3.weight in the checkpoint: $(cat single_keys.txt)"
diff single_keys.txt mp_keys.txt > /dev/null ||
  fail "the ModelParallel checkpoint's keys differ from one device's: $(diff single_keys.txt mp_keys.txt)"

# The ModelParallel checkpoint resumed on one device, and the single-device checkpoint resumed
# split: both continue at step 2 and end alike at step 3 (compared with each other rather than each
# with a third run).
run "resuming the ModelParallel checkpoint on --device cuda" mp_resumed.txt --max-steps 3 --device cuda \
  --resume mp/epoch-1.safetensors
grep -q "^resumed from mp/epoch-1.safetensors (epoch 0, step 2)$" mp_resumed.txt || fail "not resumed at step 2: $(cat mp_resumed.txt)"
grep -q ", cuda:0; 1 process" mp_resumed.txt || fail "the resumed run is not on cuda:0 alone: $(head -2 mp_resumed.txt)"
grep -qE '^train: .* steps=3 processes=1$' mp_resumed.txt || fail "the resumed run did not end at step 3"
run "resuming under --model-parallel 2" mp_from_single.txt --max-steps 3 --model-parallel 2 --device cuda \
  --resume single/epoch-1.safetensors
grep -q "^resumed from single/epoch-1.safetensors (epoch 0, step 2)$" mp_from_single.txt ||
  fail "not resumed at step 2: $(cat mp_from_single.txt)"
grep -q "ModelParallel on cuda:0,cuda:1 (layers 8/4 balanced by parameters)" mp_from_single.txt ||
  fail "the header does not name ModelParallel: $(head -2 mp_from_single.txt)"
grep -qE '^train: .* steps=3 processes=1$' mp_from_single.txt || fail "the split resumed run did not end at step 3"
close "$(loss mp_resumed.txt)" "$(loss mp_from_single.txt)" ||
  fail "the single-device checkpoint resumed split ends at test loss $(loss mp_from_single.txt); the split checkpoint resumed on one device, at $(loss mp_resumed.txt)"

# Evaluating the split run's checkpoint split: the loss that run reported for the same weights.
run "evaluating split" mp_eval.txt --eval-only --model-parallel 2 --resume mp/epoch-1.safetensors
grep -qE '^eval: 12 examples, loss [0-9.]+, accuracy [0-9.]+$' mp_eval.txt || fail "no evaluation line: $(cat mp_eval.txt)"
close "$(loss mp.txt)" "$(loss mp_eval.txt)" ||
  fail "evaluated split, test loss $(loss mp_eval.txt); the run that saved it reported $(loss mp.txt)"

expect_usage_error() {
  local want="$1"; shift
  "$@" > out.txt 2> err.txt
  local status=$?
  [ $status -eq 2 ] || fail "'$*' exited $status, expected 2: $(cat err.txt)"
  grep -qF -- "$want" err.txt || fail "'$*': stderr lacks '$want': $(cat err.txt)"
  [ ! -s out.txt ] || fail "'$*' printed to stdout: $(cat out.txt)"
}
expect_usage_error "train: --model-parallel 3: needs 3 CUDA devices (cuda:0 to cuda:2), but this machine has 2 CUDA devices (cuda:0 to cuda:1)" \
  "$train" "${tiny[@]}" --model-parallel 3
expect_usage_error "train: --model-parallel 2 and --data-parallel 2: give one of them" \
  "$train" "${tiny[@]}" --model-parallel 2 --data-parallel 2
expect_usage_error "train: --model-parallel 2: this process is rank 1 of 2 (RANK/WORLD_SIZE), but --model-parallel splits the model across the devices of one process" \
  env RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 "$train" "${tiny[@]}" --model-parallel 2 --device cuda
expect_usage_error "train: --chunks needs --pipeline N" "$train" "${tiny[@]}" --model-parallel 2 --chunks 2
expect_usage_error "train: --chunks: expected at least 1, got 0" "$train" "${tiny[@]}" --pipeline 2 --chunks 0
echo PASS
