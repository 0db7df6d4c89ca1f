#!/usr/bin/env bash
# The train binary with DataParallel on 2 emulated GPUs (--data-parallel 2, per-replica loss): the
# header names the mode and devices, the loss is printed and finite, and after 2 LeNet steps the
# test loss is the single-device run's (LeNet has no batch norm, so splitting the batch changes
# only the order of sums); the checkpoint has the bare model's keys, exactly the single-device
# checkpoint's; it resumes with plain --device cuda, ending where the single-device run resumed
# ends, and a single-device checkpoint resumes under --devices cuda:1,cuda:0 (the model on cuda:1);
# under mpirun -np 2 DDP (over NCCL) resumes the DataParallel checkpoint as it resumes one device's.
# Under --amp bf16 it trains to near the float32 loss.
# Bad DataParallel flags are exit status 2 with a message naming the flag.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/train_run_lib.sh"
train="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
runner="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
work="${TEST_TMPDIR:-$(mktemp -d)}/train_data_parallel"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1

run "the single-device run" single.txt --max-steps 2 --device cuda:0 --checkpoint-dir single
run "the DataParallel run" dp.txt --max-steps 2 --device cuda --data-parallel 2 --checkpoint-dir dp
cat dp.txt
grep -q "^train: lenet .*, DataParallel on cuda:0,cuda:1 (model on cuda:0, loss per replica); 1 process x 1 thread, batch 16 per process (8 per device)$" dp.txt ||
  fail "the header does not name DataParallel and its devices: $(head -1 dp.txt)"
grep -qE "^epoch 1/2 step 2/4 loss [0-9]+\.[0-9]+ .* peak mem [0-9.]+ GiB" dp.txt || fail "no finite loss at step 2"
grep -qE '^train: test_accuracy=.* steps=2 processes=1$' dp.txt || fail "the DataParallel run did not end after 2 steps"
single_loss=$(loss single.txt) dp_loss=$(loss dp.txt)
[ -n "$single_loss" ] && [ -n "$dp_loss" ] || fail "no finite test loss in a summary line"
close "$single_loss" "$dp_loss" || fail "test loss with DataParallel ($dp_loss) differs from one device's ($single_loss)"

# Under bfloat16 autocast, which the replicas' threads take from the caller.
run "the DataParallel bf16 run" dp_bf16.txt --max-steps 2 --device cuda --data-parallel 2 --amp bf16
grep -q "(8 per device); autocast to bfloat16$" dp_bf16.txt || fail "the header does not name bf16: $(head -1 dp_bf16.txt)"
close_amp "$single_loss" "$(loss dp_bf16.txt)" ||
  fail "test loss with DataParallel in bf16 ($(loss dp_bf16.txt)) is far from float32's ($single_loss)"

keys single/epoch-1.safetensors > single_keys.txt
keys dp/epoch-1.safetensors > dp_keys.txt
grep -q '^model\.conv1\.weight$' single_keys.txt || fail "no model.conv1.weight in the checkpoint: $(cat single_keys.txt)"
diff single_keys.txt dp_keys.txt > /dev/null ||
  fail "the DataParallel checkpoint's keys differ from one device's: $(diff single_keys.txt dp_keys.txt)"

# Resumed on one device from the DataParallel checkpoint, and from the single-device one: both
# continue at step 2 and end alike at step 3.
run "resuming the DataParallel checkpoint on --device cuda" dp_resumed.txt --max-steps 3 --device cuda \
  --resume dp/epoch-1.safetensors
grep -q "^resumed from dp/epoch-1.safetensors (epoch 0, step 2)$" dp_resumed.txt || fail "not resumed at step 2: $(cat dp_resumed.txt)"
grep -q ", cuda:0; 1 process" dp_resumed.txt || fail "the resumed run is not on cuda:0 alone: $(head -2 dp_resumed.txt)"
grep -qE '^train: .* steps=3 processes=1$' dp_resumed.txt || fail "the resumed run did not end at step 3"
run "resuming the single-device checkpoint" single_resumed.txt --max-steps 3 --device cuda \
  --resume single/epoch-1.safetensors
close "$(loss single_resumed.txt)" "$(loss dp_resumed.txt)" ||
  fail "resumed from the DataParallel checkpoint, test loss $(loss dp_resumed.txt); from one device's, $(loss single_resumed.txt)"

# The other way: the single-device checkpoint resumed with DataParallel, the model on cuda:1.
run "resuming under --devices cuda:1,cuda:0" dp_from_single.txt --max-steps 3 --devices cuda:1,cuda:0 \
  --resume single/epoch-1.safetensors
grep -q "DataParallel on cuda:1,cuda:0 (model on cuda:1, loss per replica)" dp_from_single.txt ||
  fail "the header does not name cuda:1,cuda:0: $(head -2 dp_from_single.txt)"
close "$(loss single_resumed.txt)" "$(loss dp_from_single.txt)" ||
  fail "resumed under DataParallel, test loss $(loss dp_from_single.txt); on one device, $(loss single_resumed.txt)"

# Into DDP: two ranks on cuda:0 and cuda:1, 8 examples each (the same 4 steps per epoch), resume
# either checkpoint at step 2 and end alike.
ddp_resume() {
  local output="$1" checkpoint="$2"
  "$runner" 2 "$train" -x EMBER_EMULATED_GPUS=2 -- "${tiny[@]}" --batch-size 8 --max-steps 3 --device cuda \
    --resume "$checkpoint" \
    > "$output" 2>&1 || fail "DDP resuming $checkpoint exited $?: $(cat "$output")"
  grep -q "^resumed from $checkpoint (epoch 0, step 2)$" "$output" || fail "DDP did not resume $checkpoint at step 2: $(cat "$output")"
  grep -qE '^train: .* steps=3 processes=2$' "$output" || fail "DDP resuming $checkpoint did not end at step 3: $(cat "$output")"
}
ddp_resume ddp_from_dp.txt dp/epoch-1.safetensors
ddp_resume ddp_from_single.txt single/epoch-1.safetensors
close "$(loss ddp_from_single.txt)" "$(loss ddp_from_dp.txt)" ||
  fail "DDP resumed from the DataParallel checkpoint, test loss $(loss ddp_from_dp.txt); from one device's, $(loss ddp_from_single.txt)"

expect_usage_error() {
  local want="$1"; shift
  "$@" > out.txt 2> err.txt
  local status=$?
  [ $status -eq 2 ] || fail "'$*' exited $status, expected 2: $(cat err.txt)"
  grep -qF -- "$want" err.txt || fail "'$*': stderr lacks '$want': $(cat err.txt)"
  [ ! -s out.txt ] || fail "'$*' printed to stdout: $(cat out.txt)"
}
expect_usage_error "train: --data-parallel 3: needs 3 CUDA devices (cuda:0 to cuda:2), but this machine has 2 CUDA devices (cuda:0 to cuda:1)" \
  "$train" "${tiny[@]}" --data-parallel 3
expect_usage_error "train: --data-parallel 2: needs 2 CUDA devices (cuda:0 to cuda:1), but no CUDA device is available" \
  env EMBER_EMULATED_GPUS=0 "$train" "${tiny[@]}" --data-parallel 2
expect_usage_error "train: --data-parallel 2: DataParallel trains on CUDA devices, but --device is cpu; give --device cuda" \
  "$train" "${tiny[@]}" --data-parallel 2 --device cpu
expect_usage_error "train: --devices cuda:0,cuda:2: cuda:2 does not exist: this machine has 2 CUDA devices (cuda:0 to cuda:1)" \
  "$train" "${tiny[@]}" --devices cuda:0,cuda:2
expect_usage_error "train: --devices cuda:0,1: entry 2 is '1'; expected a CUDA device cuda:N" \
  "$train" "${tiny[@]}" --devices cuda:0,1
expect_usage_error "train: --data-parallel 2: this process is rank 1 of 2 (RANK/WORLD_SIZE), but DataParallel drives several devices from one process and DDP one device per process" \
  env RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 "$train" "${tiny[@]}" --data-parallel 2 --device cuda
echo PASS
