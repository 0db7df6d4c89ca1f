#!/usr/bin/env bash
# Resuming continues bit for bit in benchmark mode (EMBER_KERNEL_SELECT=benchmark, the default that
# .bazelrc's heuristic hides from the other tests), although the resumed process would choose other
# kernels: the checkpoint carries the decisions in force and the resumed run adopts them. Trials are
# made to disagree with EMBER_KERNEL_TRIAL_SEED (core/kernel_select.h): seeds s and s+1 pick other
# candidates for every convolution with two or more. A straight run to step 4 and a run stopped at
# step 2 and resumed (with the other seed) leave byte-identical checkpoints, alone and under mpirun
# -np 2 with another seed on each rank (the ranks take rank 0's decisions after a step).
# train_resume_benchmark_test.sh TRAIN RUNNER
set -uo pipefail
train="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
runner="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
work="${TEST_TMPDIR:-$(mktemp -d)}/train_resume_benchmark"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
export EMBER_KERNEL_SELECT=benchmark
# ResNet-20: its 3x3 convolutions have several candidates (oneDNN's, Ember's), which round
# differently. 16 examples, 2 steps of 8 per epoch, 3 test examples; the stop at step 2 ends epoch
# 1, so both runs evaluate at the same steps, and no short batch meets a kernel after the resume
# that the first run did not decide.
tiny=(--model resnet20 --data synthetic --synthetic-size 16 --batch-size 8 --threads 1 --workers 0 --epochs 2)

# run SEED NAME ARGS...: the train binary with `tiny` and ARGS, trials picking by SEED.
run() {
  local seed="$1" name="$2"; shift 2
  EMBER_KERNEL_TRIAL_SEED="$seed" "$train" "${tiny[@]}" "$@" > "$name.txt" 2>&1 ||
    fail "$name exited $?: $(cat "$name.txt")"
}
run 0 straight --checkpoint-dir straight
run 0 first --max-steps 2 --checkpoint-dir split
run 1 resumed --checkpoint-dir split --resume latest
grep -q "^resumed from split/epoch-1.safetensors (epoch 1, step 2)$" resumed.txt || fail "$(cat resumed.txt)"
cmp straight/epoch-2.safetensors split/epoch-2.safetensors ||
  fail "the resumed run's checkpoint differs from a straight run's"
grep -q '"kernels\\":{\\"conv' split/epoch-2.safetensors || fail "the checkpoint holds no kernel decisions"
# The test could not pass without adopting: the other seed's kernels give other numbers.
run 1 other --checkpoint-dir other
cmp -s straight/epoch-2.safetensors other/epoch-2.safetensors && fail "the trial seed changed no result"

# Under mpirun -np 2, rank r picks with seed BASE + r.
cat > seeded.sh <<EOF
#!/usr/bin/env bash
EMBER_KERNEL_TRIAL_SEED=\$((SEED_BASE + OMPI_COMM_WORLD_RANK)) exec "$train" "\$@"
EOF
chmod +x seeded.sh
# 32 examples / 2 ranks / batch 8 = 2 steps per epoch, as above.
ranks() {
  local base="$1" name="$2"; shift 2
  SEED_BASE="$base" "$runner" 2 ./seeded.sh -x SEED_BASE -x EMBER_KERNEL_SELECT -- "${tiny[@]}" \
    --synthetic-size 32 "$@" > "$name.txt" 2>&1 || fail "$name exited $?: $(cat "$name.txt")"
}
ranks 0 ddp_straight --checkpoint-dir ddp_straight
ranks 0 ddp_first --max-steps 2 --checkpoint-dir ddp_split
ranks 1 ddp_resumed --checkpoint-dir ddp_split --resume latest
grep -q "^train: .* epochs=2 steps=4 processes=2$" ddp_resumed.txt || fail "$(cat ddp_resumed.txt)"
cmp ddp_straight/epoch-2.safetensors ddp_split/epoch-2.safetensors ||
  fail "the resumed DDP run's checkpoint differs from a straight run's"
echo "PASS"
