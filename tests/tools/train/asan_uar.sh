# Sourced by the train tool tests that train on emulated GPUs. Under ASan, test:asan's
# detect_stack_use_after_return=1 maps and unmaps a fake stack for every fiber an emulated GPU
# thread runs on: a 2-step LeNet run on cuda:0 takes ~25 s instead of ~2 s, nearly all of it system
# time (~310k mmap/munmap pairs). Each test keeps the check on its first run through a mode's own
# code in the train tool (and on CPU runs, where it costs nothing) and runs the others (one-device
# references, resuming, evaluating, other schedules) without it; the modes' library code keeps it
# in tests/parallel and tests/cuda.
asan_options_as_given="${ASAN_OPTIONS:-}"

# without_uar_check COMMAND...: COMMAND (a shell function too) with that check off under ASan, as is
# otherwise.
without_uar_check() {
  if [ -n "$asan_options_as_given" ]; then
    ASAN_OPTIONS="${asan_options_as_given//detect_stack_use_after_return=1/detect_stack_use_after_return=0}" "$@"
  else
    "$@"
  fi
}
