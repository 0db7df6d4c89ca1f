# Shared by the train tool tests that compare modes on 2 emulated GPUs (sourced; $train is the
# train binary): the tiny LeNet run, its summary-line test loss, closeness, and checkpoint keys.
fail() { echo "FAIL: $*"; exit 1; }
export EMBER_EMULATED_GPUS=2 EMBER_EMULATED_GPU_MEMORY=512M
# 64 examples in 4 steps of 16 per epoch, 12 test examples.
tiny=(--model lenet --data synthetic --synthetic-size 64 --batch-size 16 --threads 1 --workers 0 --epochs 2
      --progress lines --log-every 1)

# run NAME OUTPUT ARGS...: the train binary with `tiny` and ARGS, its output in OUTPUT; a non-zero
# exit fails the test.
run() {
  local name="$1" output="$2"; shift 2
  "$train" "${tiny[@]}" "$@" > "$output" 2>&1 || fail "$name exited $?: $(cat "$output")"
}
loss() { sed -n 's/^train: .*test_loss=\([0-9.]*\) .*/\1/p' "$1"; }
close() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 2e-4 * (1 + a)) }'; }
# Within what 2 steps under autocast (bfloat16, or float16) move a test loss from float32's.
close_amp() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 5e-3 * (1 + a)) }'; }
# The tensor names in a safetensors file's JSON header (the 8 bytes before it give its length).
keys() {
  local length
  length=$(od -An -tu8 -N8 "$1" | tr -d ' ')
  head -c $((8 + length)) "$1" | tail -c "$length" | grep -o '"[^"]*":{"dtype"' | sed 's/^"//; s/":{"dtype"$//' | sort
}
