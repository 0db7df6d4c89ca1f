#!/usr/bin/env bash
# Runs on the GPU host what tools/bench/gpu_pack packed (ember_gpu.tar.xz next to this script; the
# pack carries its own copy of this script): every test tagged gpu, as bazel test would run it
# (in its runfiles, TEST_* set, its env, its size's timeout; EMBER_TEST_GPUS set to the host's GPU
# count, so that the cases tagged [gpus:N] for more are left out and counted, not failed: see
# tests/catch_session.cc), then //tools/bench:gpu, then
# //tools/bench:allreduce --backend nccl at one rank (a GPU hosts one NCCL rank; EMBER_BACKEND=nccl
# needs no MPI at one rank, and the host may have no Open MPI), then //tools/bench:parallel_modes on
# all the host's GPUs (with one: DataParallel over it, DDP as one worker started without mpirun).
# The pack's libraries and CUDA's are put on the loader's path for Ember's binaries only; PyTorch,
# started by the bench, keeps the host's own path so it loads the CUDA libraries it was built with.
# Logs go to $OUT when set (the device tool brings that folder back), else next to this script. A
# sanitizer runs the tests only: the bench under it would time the sanitizer.
#
#   out/gpu_pack/run_gpu.sh [--tests-only | --bench-only] [--sanitizer=memcheck|racecheck|...]
#                           [--filter=REGEX] [--max-test-seconds=N] [-- BENCH FLAGS, e.g. --quick]
#
# --max-test-seconds caps each test's timeout: a device lease is 15 minutes, and one hung test at
# its size's timeout (300 s for medium) would spend most of it.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
run_tests=1 run_bench=1 sanitizer="" filter="" max_test_seconds=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tests-only) run_bench=0 ;;
    --bench-only) run_tests=0 ;;
    --sanitizer=*) sanitizer="${1#*=}" ;;
    --filter=*) filter="${1#*=}" ;;
    --max-test-seconds=*) max_test_seconds="${1#*=}" ;;
    --) shift; break ;;
    *) echo "run_gpu: unknown argument '$1' (bench flags go after --)" >&2; exit 2 ;;
  esac
  shift
done
logs="${OUT:-$here/logs}"
# One log per test, packed into test_logs.tgz at the end: the device tool brings back 8 files.
test_logs="$logs/tests"
mkdir -p "$logs" "$test_logs"

pack="$(mktemp -d "${TMPDIR:-/tmp}/ember_gpu.XXXXXX")"
tar xJf "$here/ember_gpu.tar.xz" -C "$pack" || { echo "run_gpu: cannot unpack $here/ember_gpu.tar.xz" >&2; exit 1; }
echo "run_gpu: pack of commit $(tr '\n' ' ' <"$pack/commit")unpacked in $pack"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,power.limit,temperature.gpu,memory.used \
    --format=csv 2>&1 | sed 's/^/  /'
fi

gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')"
[ "${gpus:-0}" -gt 0 ] || gpus=1
echo "run_gpu: $gpus GPU(s): test cases tagged [gpus:N] for a larger N are not run"

host_ld="${LD_LIBRARY_PATH:-}"
ld="$pack/lib"
for dir in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda /usr/local/cuda-13.0; do
  [ -n "$dir" ] && [ -d "$dir/lib64" ] && ld="$ld:$dir/lib64"
done
[ -n "$host_ld" ] && ld="$ld:$host_ld"

binaries=("$pack/bin/tools/bench/gpu" "$pack/bin/tools/bench/allreduce" "$pack/bin/tools/bench/parallel_modes")
while IFS=$'\t' read -r path _ _; do binaries+=("$pack/bin/$path"); done <"$pack/tests.txt"
missing() { for b in "${binaries[@]}"; do LD_LIBRARY_PATH="$ld" ldd "$b"; done | awk '/not found/ { print $1 }' | sort -u; }
if [ -n "$(missing)" ]; then
  # CUDA libraries the toolkit lacks (cuDNN, NCCL) may come with PyTorch's wheels instead.
  wheels="$(python3 - 2>/dev/null <<'EOF'
import glob, os
dirs = []
try:
    import nvidia
    for root in nvidia.__path__:
        dirs += glob.glob(os.path.join(root, "**", "lib"), recursive=True)
except ImportError:
    pass
print(":".join(sorted(set(dirs))))
EOF
)"
  [ -n "$wheels" ] && ld="$ld:$wheels"
  [ -n "$(missing)" ] && echo "run_gpu: still not found: $(missing | tr '\n' ' ')(the binaries that need them will fail)"
fi
# A host libstdc++ older than the build machine's fails with "version `GLIBCXX_...' not found".
if LD_LIBRARY_PATH="$ld" "$pack/bin/tools/bench/gpu" --help 2>&1 >/dev/null | grep -q 'GLIBCXX\|CXXABI\|GCC_[0-9]'; then
  echo "run_gpu: the host's libstdc++ is older than the build's; using the packed one"
  ld="$pack/lib-compat:$ld"
fi

sanitize=()
if [ -n "$sanitizer" ]; then
  tool="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
  sanitize=("$tool" --tool "$sanitizer" --error-exitcode 1)
fi

passed=0 failed=0 failures="" not_run=0
if [ $run_tests -eq 1 ]; then
  while IFS=$'\t' read -r path seconds env_line; do
    [ -n "$filter" ] && ! [[ "$path" =~ $filter ]] && continue
    name="$(basename "$path")"
    [ -n "$sanitizer" ] && seconds=$((seconds * 10))
    [ -n "$max_test_seconds" ] && [ "$seconds" -gt "$max_test_seconds" ] && seconds=$max_test_seconds
    mkdir -p "$pack/bin/$path.runfiles/ember"
    tmp="$(mktemp -d)"
    start=$(date +%s)
    read -r -a env_pairs <<<"$env_line"
    (cd "$pack/bin/$path.runfiles/ember" &&
      env "${env_pairs[@]}" EMBER_TEST_GPUS="$gpus" LD_LIBRARY_PATH="$ld" TEST_SRCDIR="$pack/bin/$path.runfiles" TEST_WORKSPACE=ember \
        TEST_TMPDIR="$tmp" timeout "$seconds" "${sanitize[@]}" "$pack/bin/$path") </dev/null >"$test_logs/$name.log" 2>&1
    status=$?
    rm -rf "$tmp"
    left_out="$(grep -c '^catch_session: not run' "$test_logs/$name.log")"
    not_run=$((not_run + left_out))
    if [ $status -eq 0 ]; then
      passed=$((passed + 1))
      printf 'PASS %-40s %4ds%s\n' "$path" $(($(date +%s) - start)) \
        "$([ "$left_out" -gt 0 ] && echo " ($left_out cases not run: they need more GPUs)")"
    else
      failed=$((failed + 1))
      failures="$failures $name"
      printf 'FAIL %-40s %4ds (exit %d%s), last lines of %s:\n' "$path" $(($(date +%s) - start)) $status \
        "$([ $status -eq 124 ] && echo ", timed out after ${seconds}s")" "tests/$name.log"
      tail -n 25 "$test_logs/$name.log" | sed 's/^/    /'
    fi
  done <"$pack/tests.txt"
fi

bench_status=- allreduce_status=- parallel_modes_status=-
if [ $run_bench -eq 1 ]; then
  # The yardstick's interpreter runs with the host's loader path, not the pack's.
  if [ -n "$host_ld" ]; then python="env LD_LIBRARY_PATH=$(printf '%q' "$host_ld") python3"
  else python="env -u LD_LIBRARY_PATH python3"; fi
  (cd "$pack/bin/tools/bench/gpu.runfiles/ember" &&
    LD_LIBRARY_PATH="$ld" "$pack/bin/tools/bench/gpu" --python="$python" "$@") 2>&1 | tee "$logs/bench.log"
  bench_status=${PIPESTATUS[0]}
  (cd "$pack" && EMBER_BACKEND=nccl LD_LIBRARY_PATH="$ld" "$pack/bin/tools/bench/allreduce" --backend nccl) 2>&1 |
    tee "$logs/allreduce.log"
  allreduce_status=${PIPESTATUS[0]}
  # Its own defaults (ResNet-20, batch 256, 20 steps per mode: seconds on a GPU); the bench flags
  # above are gpu's.
  (cd "$pack" && LD_LIBRARY_PATH="$ld" "$pack/bin/tools/bench/parallel_modes") 2>&1 | tee "$logs/parallel_modes.log"
  parallel_modes_status=${PIPESTATUS[0]}
fi

rm -rf "$pack"
tar czf "$logs/test_logs.tgz" -C "$test_logs" . && rm -rf "$test_logs"
echo "run_gpu: tests passed=$passed failed=$failed${failures:+ (${failures# })} cases_not_run=$not_run (gpus=$gpus)" \
  "bench_exit=$bench_status" \
  "allreduce_exit=$allreduce_status parallel_modes_exit=$parallel_modes_status logs=$logs"
[ $failed -eq 0 ] && [[ "$bench_status" =~ ^(-|0)$ ]] && [[ "$allreduce_status" =~ ^(-|0)$ ]] &&
  [[ "$parallel_modes_status" =~ ^(-|0)$ ]]
