#!/usr/bin/env bash
# tools/train started without a launcher: four processes from a shell loop with RANK=i WORLD_SIZE=4
# EMBER_MASTER_ADDR=127.0.0.1 (the train tool then carries CPU tensors over Gloo) train as
# `mpirun -np 4` does over MPI: the same steps, each step's loss equal up to the rounding of sums
# taken in another order, the same evaluation; rank 0 alone prints the summary and writes the
# checkpoints and the metrics log.
# train_env_test.sh MPI_RUNNER TRAIN
set -uo pipefail
runner="$1"; train="$2"
work="$(mktemp -d "${TEST_TMPDIR:-/tmp}/train_env.XXXXXX")"
fail() { echo "FAIL: $*"; exit 1; }
common=(--data synthetic --synthetic-size 512 --model lenet --threads 1 --workers 0 --batch-size 64 --epochs 2
  --log-every 1)

"$runner" 4 "$train" -- "${common[@]}" --checkpoint-dir "$work/mpi_ckpt" --log-dir "$work/mpi_logs" \
  > "$work/mpi.txt" 2>&1 || { cat "$work/mpi.txt"; fail "mpirun -np 4 exited $?"; }

# As a user would type it. A port no one listens on: random below the ephemeral range.
for _ in $(seq 100); do
  port=$((20000 + RANDOM % 12000))
  (exec 3<> "/dev/tcp/127.0.0.1/$port") 2> /dev/null || break
done
export EMBER_COLLECTIVE_TIMEOUT=120
for i in 0 1 2 3; do
  RANK=$i WORLD_SIZE=4 EMBER_MASTER_ADDR=127.0.0.1 EMBER_MASTER_PORT=$port EMBER_JOB_ID="train_env.$$" \
    "$train" "${common[@]}" --checkpoint-dir "$work/env_ckpt" --log-dir "$work/env_logs" > "$work/env$i.txt" 2>&1 &
  pids[$i]=$!
done
for i in 0 1 2 3; do
  wait "${pids[$i]}" || { cat "$work/env$i.txt"; fail "rank $i of the shell loop exited non-zero"; }
done
cat "$work/mpi.txt" "$work/env0.txt"

grep -q 'gradients over MPI$' "$work/mpi.txt" || fail "mpirun's run does not say its gradients went over MPI"
grep -q 'gradients over Gloo$' "$work/env0.txt" || fail "the shell loop's run does not say its gradients went over Gloo"
grep -q '^train: .* processes=4$' "$work/env0.txt" || fail "rank 0 of the shell loop printed no summary for 4 processes"
for i in 1 2 3; do
  ! grep -q '^train: ' "$work/env$i.txt" || fail "rank $i printed a summary (rank 0 alone should)"
done
[ "$(ls "$work/env_ckpt" | sort | tr '\n' ' ')" = "$(ls "$work/mpi_ckpt" | sort | tr '\n' ' ')" ] ||
  fail "checkpoints differ: $(ls "$work/env_ckpt") against $(ls "$work/mpi_ckpt")"

# Every step's loss, in order, from each run's metrics log.
losses() { grep '"kind":"step"' "$1" | sed 's/.*"loss":\([-0-9.eE+]*\).*/\1/'; }
losses "$work/mpi_logs/metrics.jsonl" > "$work/mpi.loss"
losses "$work/env_logs/metrics.jsonl" > "$work/env.loss"
steps=$(wc -l < "$work/mpi.loss")
[ "$steps" -eq 4 ] || fail "the mpirun run logged $steps steps, expected 4 (512 examples / 4 ranks / 64, 2 epochs)"
[ "$(wc -l < "$work/env.loss")" -eq "$steps" ] || fail "the shell-loop run logged $(wc -l < "$work/env.loss") steps"
paste "$work/mpi.loss" "$work/env.loss" | awk '{
  d = $1 - $2; if (d < 0) d = -d; m = $1 < 0 ? -$1 : $1
  if (d > 1e-5 * (m + 1)) { print "step " NR ": loss " $1 " under mpirun, " $2 " from the shell loop"; bad = 1 }
} END { exit bad }' || fail "the losses differ"
summary() { grep '^train: test_accuracy=' "$1" | sed 's/ train_seconds=[^ ]*//; s/ images_per_second=[^ ]*//'; }
[ "$(summary "$work/mpi.txt")" = "$(summary "$work/env0.txt")" ] ||
  fail "the summaries differ: '$(summary "$work/mpi.txt")' against '$(summary "$work/env0.txt")'"
echo "PASS: $steps steps, the same losses and summary as mpirun -np 4"
