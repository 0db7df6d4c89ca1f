#!/usr/bin/env bash
# tools/train --shard-stage under mpirun -np 2 on the CPU (gradients reduce-scattered over MPI):
# after 2 LeNet steps each stage's test loss is DDP's (LeNet has no batch norm, so sharding changes
# only the order of sums); a stage-3 checkpoint is a directory of one shard per rank plus its index;
# it resumes at 1 process (with the same global batch) at stage 2, ending where the uninterrupted
# 2-process run ends, and under plain DDP, which loads it into the bare model. Bad flags are exit
# status 2 naming the flag.
# train_sharded_test.sh RUNNER TRAIN
set -uo pipefail
runner="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
train="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
work="${TEST_TMPDIR:-$(mktemp -d)}/train_sharded"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
# 64 examples / 2 ranks / batch 16 = 2 steps per epoch; 12 test examples. No augmentation: the
# same global batch then holds the same images at 1 process and at 2.
tiny=(--model lenet --data synthetic --synthetic-size 64 --threads 1 --workers 0 --augment off --progress lines
      --log-every 1)
# launch NP NAME OUTPUT ARGS...: the train binary under mpirun; a non-zero exit fails the test.
launch() {
  local np="$1" name="$2" output="$3"; shift 3
  "$runner" "$np" "$train" -- "${tiny[@]}" "$@" > "$output" 2>&1 || fail "$name exited $?: $(cat "$output")"
}
loss() { sed -n 's/^train: .*test_loss=\([0-9.]*\) .*/\1/p' "$1"; }
close() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 2e-4 * (1 + a)) }'; }

launch 2 "the DDP run" ddp.txt --batch-size 16 --epochs 1
ddp_loss=$(loss ddp.txt)
[ -n "$ddp_loss" ] || fail "no test loss from DDP: $(cat ddp.txt)"
for stage in 1 2 3; do
  launch 2 "stage $stage" stage$stage.txt --batch-size 16 --epochs 1 --shard-stage $stage
  grep -q "^train: lenet .*, cpu, ShardedDataParallel stage $stage; 2 processes x 1 thread, batch 16 per process, gradients reduce-scattered over MPI$" \
    stage$stage.txt || fail "the stage-$stage header: $(head -1 stage$stage.txt)"
  close "$ddp_loss" "$(loss stage$stage.txt)" || fail "stage $stage's test loss $(loss stage$stage.txt) is not DDP's $ddp_loss"
done

# Stage 3 for 2 epochs uninterrupted, and stopped after epoch 1 with checkpoints.
launch 2 "the 2-epoch stage-3 run" full.txt --batch-size 16 --epochs 2 --shard-stage 3
launch 2 "the stopped stage-3 run" first.txt --batch-size 16 --epochs 2 --shard-stage 3 --max-steps 2 --checkpoint-dir ck
[ -f ck/epoch-1/index.json ] && [ -f ck/epoch-1/shard-00000-of-00002.s1.safetensors ] &&
  [ -f ck/epoch-1/shard-00001-of-00002.s1.safetensors ] || fail "no sharded checkpoint: $(ls -R ck)"
# One process (global batch 32 = 2 x 16), stage 2.
launch 1 "the 1-process resumed run" resumed1.txt --batch-size 32 --epochs 2 --shard-stage 2 --checkpoint-dir ck \
  --resume latest
grep -q "^resumed from ck/epoch-1 (epoch 1, step 2)$" resumed1.txt || fail "did not resume: $(cat resumed1.txt)"
grep -qE '^train: test_accuracy=.* epochs=2 steps=4 processes=1$' resumed1.txt || fail "the 1-process run's end: $(tail -1 resumed1.txt)"
close "$(loss full.txt)" "$(loss resumed1.txt)" ||
  fail "resumed at 1 process: test loss $(loss resumed1.txt), uninterrupted at 2: $(loss full.txt)"
# Plain DDP loads the sharded checkpoint into its bare model.
launch 2 "the DDP resumed run" resumed_ddp.txt --batch-size 16 --epochs 2 --resume ck/epoch-1
close "$(loss full.txt)" "$(loss resumed_ddp.txt)" ||
  fail "resumed under DDP: test loss $(loss resumed_ddp.txt), uninterrupted: $(loss full.txt)"

# Bad flags.
"$train" "${tiny[@]}" --shard-stage 4 > bad.txt 2>&1
[ $? -eq 2 ] && grep -q "shard-stage: expected 1, 2 or 3" bad.txt || fail "--shard-stage 4: $(cat bad.txt)"
"$train" "${tiny[@]}" --shard-stage 2 > bad.txt 2>&1
[ $? -eq 2 ] && grep -q "needs a launcher" bad.txt || fail "--shard-stage without a launcher: $(cat bad.txt)"
echo "PASS (DDP $ddp_loss; stages 1-3 $(loss stage1.txt) $(loss stage2.txt) $(loss stage3.txt); resumed $(loss resumed1.txt)/$(loss resumed_ddp.txt) vs $(loss full.txt))"
