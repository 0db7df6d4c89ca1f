#!/usr/bin/env bash
# tools/train under mpirun -np 2: rank 0 alone prints the summary, writes each checkpoint and the
# metrics log once; both ranks stop together at --max-steps (mid-epoch); the sharded, unpadded
# evaluation counts every test example exactly once (51 of them: odd, so padding would show).
# train_mpirun_test.sh RUNNER TRAIN
set -uo pipefail
runner="$1"; train="$2"
work="$(mktemp -d "${TEST_TMPDIR:-/tmp}/train.XXXXXX")"
fail() { echo "FAIL: $*"; exit 1; }
common=(--data synthetic --synthetic-size 256 --model lenet --threads 1 --workers 0)

# 256 examples / 2 ranks / batch 32 = 4 steps an epoch: --max-steps 6 stops inside epoch 2.
output="$("$runner" 2 "$train" -- "${common[@]}" --batch-size 32 --epochs 2 --max-steps 6 --schedule cosine \
  --log-every 1 --checkpoint-dir "$work/ckpt" --log-dir "$work/logs" 2>&1)" || { code=$?; echo "$output"; fail "train exited $code"; }
echo "$output"
summaries=$(grep -c '^train: test_accuracy=' <<<"$output")
[ "$summaries" -eq 1 ] || fail "$summaries summary lines, expected 1 (rank 0 only)"
grep -q '^train: test_accuracy=.* epochs=2 steps=6 processes=2$' <<<"$output" || fail "summary does not say epochs=2 steps=6 processes=2"
[ "$(grep -c '^epoch ' <<<"$output")" -eq 2 ] || fail "expected one line per epoch"

files="$(cd "$work/ckpt" && ls -A | sort | tr '\n' ' ')"
[ "$files" = "best.safetensors epoch-1.safetensors epoch-2.safetensors " ] || fail "checkpoint directory holds: $files"
[ -s "$work/logs/metrics.jsonl" ] || fail "no metrics.jsonl"
steps=$(grep -c '"kind":"step"' "$work/logs/metrics.jsonl")
epochs=$(grep -c '"kind":"epoch"' "$work/logs/metrics.jsonl")
stops=$(grep -c '"kind":"stop"' "$work/logs/metrics.jsonl")
[ "$steps" -eq 6 ] && [ "$epochs" -eq 1 ] && [ "$stops" -eq 1 ] \
  || fail "metrics.jsonl has $steps step, $epochs epoch and $stops stop records, expected 6, 1 and 1 (written by rank 0 only; epoch 2 was cut short)"

output="$("$runner" 2 "$train" -- "${common[@]}" --eval-only --resume "$work/ckpt/best.safetensors" 2>&1)" \
  || { code=$?; echo "$output"; fail "evaluation exited $code"; }
echo "$output"
evals=$(grep -c '^eval: ' <<<"$output")
[ "$evals" -eq 1 ] || fail "$evals evaluation lines, expected 1"
grep -q '^eval: 51 examples, ' <<<"$output" || fail "evaluation did not count the 51 test examples exactly once"
echo "PASS"
