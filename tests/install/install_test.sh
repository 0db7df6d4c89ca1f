#!/usr/bin/env bash
# Ember used from outside its tree, the three ways a user would (README, "Use Ember in your
# project"), each built in a temporary directory against what tools/install put in a temporary
# prefix, and run:
#   1. CMake: examples/cmake_project (find_package(Ember 0.1), the README's model and a DDP program
#      under mpirun -np 2), plus the version and component checks of the package files;
#   2. pkg-config and plain g++: examples/pkg_config;
#   3. Bazel: examples/bazel_project, a workspace of its own with @ember as a local_repository (its
#      README model; its DDP target is not built here, for time).
# Also: every installed header compiles alone with only the prefix on the include path; a second
# install into the same prefix leaves the same files and removes what the first one had that the
# second does not; an unwritable prefix fails with a message naming it.
#
# Run by tools/test after the default build, whose objects it installs (--compilation-mode=fastbuild;
# the optimised build is the same targets with other flags); with --cuda, after the nvcc build. Needs bazel, cmake, pkg-config, mpirun
# (tools/setup). Prints one line per check and ends with `install_test: PASS` or `install_test: FAILED`.
#
#   install_test.sh [--cuda]       everything (or the nvcc build's libraries), in a temporary directory
#   install_test.sh --stage DIR    only the installs into DIR/prefix, the part that needs Ember's own
#                                  Bazel server
#   install_test.sh --consume DIR  only the uses of DIR/prefix (headers, CMake, pkg-config, a Bazel
#                                  workspace of its own), which tools/test runs while Ember's
#                                  emulated-GPU tests run; it removes DIR at its end
set -uo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

part=all
case "${1:-}" in
  --stage | --consume)
    part=${1#--}
    work=${2:?install_test.sh $1 DIR}
    mkdir -p "$work"
    ;;
  *) work=$(mktemp -d /tmp/ember-install-test.XXXXXX) ;;
esac
cleanup() {
  [ -d "$work/bazel_project" ] && (cd "$work/bazel_project" && bazel --output_user_root="$work/bazel-root" shutdown >/dev/null 2>&1)
  [ "$part" = stage ] && return  # --consume uses it next
  chmod -R u+w "$work" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
prefix="$work/prefix"
failures=0

pass() { echo "install_test: ok: $1"; }
fail() {
  echo "install_test: FAILED: $1"
  [ -n "${2:-}" ] && [ -f "$2" ] && tail -n 40 "$2" | sed 's/^/    /'
  failures=$((failures + 1))
}
# check DESCRIPTION LOG COMMAND...: runs COMMAND with its output in LOG.
check() {
  local description=$1 log=$2
  shift 2
  if "$@" >"$log" 2>&1; then pass "$description"; else fail "$description" "$log"; fi
}

# Every file and link under the prefix, with its content's hash or its target.
snapshot() {
  (cd "$prefix" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum &&
    find . -type l -printf '%p -> %l\n' | LC_ALL=C sort)
}

# --- --cuda: the nvcc build's libraries (no GPU here: linked, loaded, not run on a device) ---------
# Run by tools/test after `bazel build --config=cuda //...`, whose objects it installs.
if [ "${1:-}" = --cuda ]; then
  if ! tools/install "$prefix" --config=cuda --compilation-mode=fastbuild >"$work/install-cuda.log" 2>&1; then
    fail "tools/install $prefix --config=cuda" "$work/install-cuda.log"
    echo "install_test: FAILED ($failures, --cuda)"
    exit 1
  fi
  pass "tools/install --config=cuda: $(tail -n 2 "$work/install-cuda.log" | head -n 1 | sed 's/^tools\/install: //')"
  for name in ember ember_distributed ember_cuda ember_nccl; do
    soname=$(readelf -d "$prefix/lib/lib$name.so" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    if [ "$soname" = "lib$name.so.0.1" ]; then pass "lib$name.so (soname $soname)"; else fail "lib$name.so: soname '$soname'"; fi
  done
  # The CUDA headers alone, with what pkg-config gives (the toolkit's include directory, EMBER_CUDA).
  flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags ember-nccl)
  mkdir -p "$work/headers"
  headers=$(cd "$prefix/include/ember" && find cuda -name '*.h' | LC_ALL=C sort)
  before=$failures
  for header in $headers; do
    printf '#include "%s"\n' "$header" | (cd "$work/headers" && g++ $flags -fsyntax-only -x c++ - >"$work/header.err" 2>&1) ||
      fail "$header does not compile alone with \$(pkg-config --cflags ember-nccl)" "$work/header.err"
  done
  [ $failures -eq $before ] && pass "the $(wc -w <<<"$headers") installed CUDA headers compile alone with pkg-config's flags"
  # A program using a GPU through Ember::cuda, which it never calls by name: the backend must be
  # loaded all the same (--no-as-needed in the package), so that here, without a GPU, the tensor's
  # move fails as the CUDA backend's "no CUDA devices", not as a device type without a backend.
  mkdir -p "$work/cuda_app"
  printf '%s\n' '#include <cstdio>' '' '#include "core/ember_core.h"' '' 'int main() {' \
    '  ember::Tensor x = ember::randn({4}).to(ember::Device::cuda(0));' \
    '  std::printf("sum %g\n", x.sum().item<double>());' '}' >"$work/cuda_app/app.cc"
  # --as-needed, as Ubuntu's toolchain links by default: the package must keep the library anyway.
  printf '%s\n' 'cmake_minimum_required(VERSION 3.16)' 'project(cuda_app CXX)' \
    'set(CMAKE_EXE_LINKER_FLAGS "-Wl,--as-needed")' \
    'find_package(Ember 0.1 REQUIRED COMPONENTS cuda nccl)' 'add_executable(app app.cc)' \
    'target_link_libraries(app PRIVATE Ember::cuda)' >"$work/cuda_app/CMakeLists.txt"
  check "CMake: find_package(Ember 0.1 REQUIRED COMPONENTS cuda nccl) and a program linked to Ember::cuda" \
    "$work/cuda-build.log" sh -c "cmake -S '$work/cuda_app' -B '$work/cuda_app/build' -DCMAKE_PREFIX_PATH='$prefix' && cmake --build '$work/cuda_app/build'"
  if readelf -d "$work/cuda_app/build/app" 2>/dev/null | grep -q 'libember_cuda.so.0.1'; then
    pass "the program needs libember_cuda.so though it calls nothing in it"
  else
    fail "the program does not load libember_cuda.so (the linker dropped it)"
  fi
  # In a shell of its own, whose "Aborted" notice (the uncaught error) goes to the log too.
  sh -c 'env -u EMBER_EMULATED_GPUS "$0"' "$work/cuda_app/build/app" >"$work/cuda-run.log" 2>&1
  if grep -q "no CUDA devices are available" "$work/cuda-run.log"; then
    pass "without a GPU it fails as the real CUDA backend does: $(grep -o 'device cuda:0 does not exist[^(]*' "$work/cuda-run.log" | head -n 1)"
  else
    fail "the program should have failed with the CUDA backend's 'no CUDA devices' error" "$work/cuda-run.log"
  fi
  if [ $failures -eq 0 ]; then
    echo "install_test: PASS (--cuda)"
    exit 0
  fi
  echo "install_test: FAILED ($failures, --cuda)"
  exit 1
fi

stage() {
  # --- tools/install, twice -------------------------------------------------------------------------
  if ! tools/install "$prefix" --compilation-mode=fastbuild >"$work/install1.log" 2>&1; then
    fail "tools/install $prefix" "$work/install1.log"
    echo "install_test: FAILED ($failures)"
    exit 1
  fi
  pass "tools/install: $(tail -n 2 "$work/install1.log" | head -n 1 | sed 's/^tools\/install: //')"
  snapshot >"$work/first.txt"
  # A file that an earlier install had put there and the next one no longer has.
  stale=include/ember/core/no_longer_installed.h
  echo "// gone" >"$prefix/$stale"
  echo "$stale" >>"$prefix/share/ember/install_manifest.txt"
  check "tools/install again into the same prefix" "$work/install2.log" tools/install "$prefix" --compilation-mode=fastbuild
  snapshot >"$work/second.txt"
  check "the second install leaves exactly the first one's files, links and contents" "$work/diff.log" \
    diff "$work/first.txt" "$work/second.txt"
  if [ ! -e "$prefix/$stale" ]; then pass "the second install removed what only the first had ($stale)"; else fail "$stale survived the second install"; fi
  for name in ember ember_distributed; do
    soname=$(readelf -d "$prefix/lib/lib$name.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    if [ "$soname" = "lib$name.so.0.1" ] && [ -f "$prefix/lib/lib$name.so.0.1.0" ]; then
      pass "lib$name.so: soname $soname, file lib$name.so.0.1.0"
    else
      fail "lib$name.so: soname '$soname', expected lib$name.so.0.1 over lib$name.so.0.1.0"
    fi
  done
  # The one-process library must not pull MPI in (as //parallel in Bazel).
  if readelf -d "$prefix/lib/libember.so" | grep -q 'libmpi'; then fail "libember.so needs libmpi"; else pass "libember.so links no MPI"; fi

  # --- an unwritable prefix ---------------------------------------------------------------------------
  for bad in /proc/ember-install-test "$work/a-file/prefix"; do
    : >"$work/a-file"
    out=$(tools/install "$bad" 2>&1)
    rc=$?
    if [ $rc -ne 0 ] && grep -q "^tools/install: cannot create the prefix $bad" <<<"$out"; then
      pass "tools/install $bad fails: $(head -n 1 <<<"$out")"
    else
      fail "tools/install $bad: exit $rc, expected a failure naming the prefix; it printed: $(head -n 3 <<<"$out")"
    fi
  done
}

consume() {
  # --- every installed header alone, with nothing of the source tree in reach -------------------------
  include="$prefix/include/ember"
  headers=$(cd "$include" && find . -name '*.h' | sed 's|^\./||' | LC_ALL=C sort)
  count=$(wc -l <<<"$headers")
  mkdir -p "$work/headers"
  (cd "$work/headers" && xargs -P "$(nproc)" -I{} sh -c \
    'printf "#include \"%s\"\n" "$1" | g++ -std=c++20 -fsyntax-only -I"$2" -x c++ - >/dev/null 2>"$(echo "$1" | tr / _).err" || echo "$1"' \
    _ {} "$include" <<<"$headers") >"$work/headers.failed"
  if [ -s "$work/headers.failed" ]; then
    first=$(head -n 1 "$work/headers.failed")
    fail "$(wc -l <"$work/headers.failed") of $count installed headers do not compile alone: $(tr '\n' ' ' <"$work/headers.failed")" \
      "$work/headers/$(echo "$first" | tr / _).err"
  else
    pass "all $count installed headers compile alone against the prefix"
  fi

  # --- 1. CMake ---------------------------------------------------------------------------------------
  cp -rL examples "$work/examples"
  cmake_dir="$work/examples/cmake_project"
  check "CMake: configure examples/cmake_project (find_package(Ember 0.1))" "$work/cmake-configure.log" \
    cmake -S "$cmake_dir" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix"
  check "CMake: build the README model and the DDP program" "$work/cmake-build.log" cmake --build "$work/cmake-build" -j "$(nproc)"
  check "CMake: the README model trains" "$work/cmake-readme.log" "$work/cmake-build/readme_model"
  check "CMake: the DDP program under mpirun -np 2 ends with the same weights on both ranks" "$work/cmake-ddp.log" \
    mpirun -np 2 --oversubscribe "$work/cmake-build/ddp_example"
  [ "$(grep -c 'the same on every rank' "$work/cmake-ddp.log")" = 2 ] || fail "CMake: the DDP program printed no agreement from both ranks" "$work/cmake-ddp.log"

  # The package's version and component rules, each in a one-line project.
  find_ember() {  # EXPECT(ok|fail) ARGUMENTS...
    local expect=$1 dir="$work/find-$RANDOM"
    shift
    mkdir -p "$dir"
    printf 'cmake_minimum_required(VERSION 3.16)\nproject(p CXX)\nfind_package(Ember %s)\n' "$*" >"$dir/CMakeLists.txt"
    if cmake -S "$dir" -B "$dir/build" -DCMAKE_PREFIX_PATH="$prefix" >"$dir/log" 2>&1; then got=ok; else got=fail; fi
    local verb=succeeds
    [ "$expect" = fail ] && verb=fails
    if [ "$got" = "$expect" ]; then
      pass "CMake: find_package(Ember $*) $verb"
    else
      fail "CMake: find_package(Ember $*) should have $expect""ed" "$dir/log"
    fi
  }
  find_ember ok 0.1 REQUIRED
  find_ember ok 0.1.0 EXACT REQUIRED
  find_ember ok REQUIRED COMPONENTS distributed
  find_ember fail 0.2 REQUIRED
  find_ember fail 0.0 REQUIRED
  find_ember fail 1.0 REQUIRED
  find_ember fail 0.1.1 REQUIRED
  find_ember fail REQUIRED COMPONENTS cuda

  # --- 2. pkg-config and g++ ----------------------------------------------------------------------------
  check "pkg-config: make examples/pkg_config" "$work/pkg-build.log" \
    make -C "$work/examples/pkg_config" PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
  check "pkg-config: the README model trains" "$work/pkg-readme.log" "$work/examples/pkg_config/readme_model"
  check "pkg-config: the DDP program under mpirun -np 2" "$work/pkg-ddp.log" \
    mpirun -np 2 --oversubscribe "$work/examples/pkg_config/ddp_example"
  # --static adds each library's Libs.private: a flag there comes once, from the library that needs
  # it, not again from each library that requires that one.
  static=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --libs --static ember-distributed)
  repeated=$(tr ' ' '\n' <<<"$static" | grep -v -e '^-pthread$' -e '^$' | sort | uniq -d | tr '\n' ' ')
  if [ -z "$repeated" ] && grep -q -- "-lmpi" <<<"$static" && grep -q -- "-lgloo" <<<"$static" &&
    grep -q -- "-ldnnl" <<<"$static"; then
    pass "pkg-config --static ember-distributed: MPI, Gloo and oneDNN, no flag twice"
  else
    fail "pkg-config --libs --static ember-distributed gave '$static' (repeated: '$repeated')"
  fi

  # --- 3. Bazel: another workspace with @ember ----------------------------------------------------------
  # The example names Ember's checkout relatively (../..); here it is copied away from it.
  cp -rL examples/bazel_project "$work/bazel_project"
  sed -i "s|path = \"\.\./\.\.\"|path = \"$repo\"|; s|\"\.\./\.\./third_party/|\"$repo/third_party/|" "$work/bazel_project/WORKSPACE"
  bazel_example() { (cd "$work/bazel_project" && bazel --output_user_root="$work/bazel-root" "$@"); }
  # Only the README model: this build compiles Ember's core, autograd and nn again from source (a
  # workspace of its own shares no objects), which is most of this test's time on a slow CI machine;
  # the DDP program's Bazel target (comm, MPI, DDP on top) was built and run here before it was cut
  # for time, and its source is the one CMake and pkg-config build above.
  check "Bazel: build //:readme_model in a workspace of its own (@ember//core, @ember//nn, @ember//nn/optim)" \
    "$work/bazel-build.log" bazel_example build --jobs="$(nproc)" //:readme_model
  check "Bazel: the README model trains" "$work/bazel-readme.log" "$work/bazel_project/bazel-bin/readme_model"
}

case "$part" in
  stage) stage ;;
  consume) consume ;;
  *) stage && consume ;;
esac

label=""
[ "$part" != all ] && label=" (--$part)"
if [ $failures -eq 0 ]; then
  echo "install_test: PASS$label"
  exit 0
fi
echo "install_test: FAILED ($failures)$label"
exit 1
