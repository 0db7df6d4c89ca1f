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

# Ctrl-C reaching one rank only (a launcher forwards it to all; a kill of one process does not):
# every rank stops at the same step as interrupted, rank 0 saves, and none evaluates (a rank left
# evaluating would wait in a collective for ranks that have gone).
# (Epochs of 1024 steps, so that none ends, and is evaluated, before the signal.)
timeout 300 "$runner" 2 "$train" -- "${common[@]}" --synthetic-size 65536 --batch-size 32 --epochs 1000 \
  --log-every 1 --checkpoint-dir "$work/int" > "$work/int.txt" 2>&1 &
runner_pid=$!
# Under mpirun a rank's stdout is a terminal: the progress bar's "2/1024", not "step 2/1024".
for _ in $(seq 1200); do grep -q " 2/1024 " "$work/int.txt" && break; sleep 0.1; done
rank1=""
for p in /proc/[0-9]*; do
  tr '\0' '\n' < "$p/cmdline" 2>/dev/null | grep -qxF -- "$work/int" || continue
  tr '\0' '\n' < "$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && rank1="${p#/proc/}"
done
[ -n "$rank1" ] || { kill $runner_pid; fail "no rank 1 process found: $(cat "$work/int.txt")"; }
kill -INT "$rank1"
wait $runner_pid
status=$?
cat "$work/int.txt"
[ $status -ne 124 ] || fail "the run interrupted on rank 1 did not end within 300 s"
grep -q "^interrupted at step [0-9]*; checkpoint saved" "$work/int.txt" || fail "rank 0 did not save as interrupted"
grep -q '^train: .* interrupted=1$' "$work/int.txt" || fail "the summary does not say interrupted"
! grep -q "test loss" "$work/int.txt" || fail "a rank evaluated after the interrupt"
[ -f "$work/int/interrupted.safetensors" ] || fail "no checkpoint after Ctrl-C on rank 1: $(ls "$work/int")"
echo "PASS"
