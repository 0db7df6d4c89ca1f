#!/usr/bin/env bash
# tools/train --profile under mpirun -np 2 (DDP on the CPU, gradients over MPI): each rank writes
# its trace of --profile-steps and rank 0 the merged one; all are well formed (trace_check), the
# merged one holds both ranks, every step's phases are there (step, forward, backward, optimizer,
# data, comm), and on each rank some bucket collective began inside backward. Every step record of
# metrics.jsonl carries the per-step figures (gradient norm, data wait share, exposed
# communication, each rank's peak memory). --bucket-cap auto chooses the buckets after its trials and
# says so. Bad --profile-steps and --bucket-cap are exit status 2 naming the flag.
# train_profile_test.sh RUNNER TRAIN TRACE_CHECK
set -uo pipefail
runner="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
train="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
check="$(cd "$(dirname "$3")" && pwd)/$(basename "$3")"
work="${TEST_TMPDIR:-$(mktemp -d)}/train_profile"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
# 192 examples / 2 ranks / batch 16 = 6 steps; steps 2-3 profiled. LeNet's gradients make one
# bucket whatever the cap: auto's one trial layout runs steps 3-5, and the choice is made at 5.
"$runner" 2 "$train" -- --model lenet --data synthetic --synthetic-size 192 --batch-size 16 --threads 1 --workers 1 \
  --epochs 1 --progress lines --log-every 1 --log-dir logs --profile prof --profile-steps 2-3 --bucket-cap auto \
  > run.txt 2>&1 ||
  fail "the profiled run exited $?: $(cat run.txt)"
cat run.txt
grep -q "^profile: steps 2-3 in prof/trace.json" run.txt || fail "rank 0 did not say where the trace is"
[ "$(grep -c "^DistributedDataParallel (rank 0 of WORLD): buckets chosen by measurement: .* chose first" run.txt)" -eq 1 ] ||
  fail "--bucket-cap auto: rank 0 did not report one choice"
for file in trace.rank0.json trace.rank1.json trace.json; do
  [ -f "prof/$file" ] || fail "prof/$file is missing: $(ls prof)"
  "$check" "prof/$file" > "$file.check" || fail "prof/$file is not a well-formed trace"
done
cat trace.json.check
grep -q "^pid 0 " trace.json.check && grep -q "^pid 1 " trace.json.check || fail "the merged trace lacks a rank"
for category in step forward backward optimizer data comm; do
  grep -q "^category $category [1-9]" trace.json.check || fail "no '$category' events in the merged trace"
done
for rank in 0 1; do
  grep -q "^pid $rank buckets_begun_in_backward [1-9]" trace.json.check ||
    fail "on rank $rank no bucket collective began inside backward"
done
[ "$(grep -c '"step 2"' prof/trace.rank1.json)" -eq 1 ] && [ "$(grep -c '"step 4"' prof/trace.rank1.json)" -eq 0 ] ||
  fail "rank 1's trace is not of steps 2-3"
steps=$(grep -c '"kind":"step"' logs/metrics.jsonl)
[ "$steps" -eq 6 ] || fail "expected 6 step records, got $steps"
for key in grad_norm data_wait_share exposed_comm_ms peak_memory_mb/rank0 peak_memory_mb/rank1; do
  [ "$(grep '"kind":"step"' logs/metrics.jsonl | grep -c "\"$key\":")" -eq 6 ] || fail "a step record lacks $key"
done
grep '"kind":"step"' logs/metrics.jsonl | grep -q '"grad_norm":0[,}]' && fail "a zero gradient norm"

"$train" --model lenet --data synthetic --profile p --profile-steps 5-2 > bad.txt 2>&1
[ $? -eq 2 ] || fail "--profile-steps 5-2 did not exit 2"
grep -q "profile-steps: expected FIRST-LAST" bad.txt || fail "the --profile-steps error: $(cat bad.txt)"
"$train" --model lenet --data synthetic --bucket-cap 0 > bad.txt 2>&1
[ $? -eq 2 ] || fail "--bucket-cap 0 did not exit 2"
grep -q "bucket-cap: expected a positive number of MB or auto, got '0'" bad.txt || fail "the --bucket-cap error: $(cat bad.txt)"
echo PASS
