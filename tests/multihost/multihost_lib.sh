# Shared by the multi-host tests: the namespace hosts (tools/multihost/hosts.sh), the train tool's
# flags for a short ResNet-20 run, and what a test does where namespaces are not permitted.
# Sourced with HOSTS_SH and TRAIN set.
source "$HOSTS_SH"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export EMBER_NUM_THREADS=1 EMBER_KERNEL_SELECT=heuristic
work="$(mktemp -d "${TEST_TMPDIR:-/tmp}/multihost.XXXXXX")"
fail() { echo "FAIL: $*"; exit 1; }
# ResNet-20 on synthetic CIFAR-shaped data, one thread per rank, the same kernels every run.
train_flags=(--data synthetic --model resnet20 --threads 1 --workers 0 --batch-size 16 --deterministic
  --progress lines --log-every 1)

# A skip is not a pass: where namespaces are not permitted the test says so and fails.
require_hosts() {
  hosts_up "$@" && return 0
  echo "SKIPPED, which counts as a failure: ${HOSTS_WHY:-the namespace hosts could not be made}. These tests"
  echo "need root and network namespaces; leave them out with --test_tag_filters=-multihost."
  exit 1
}

# Seconds since the epoch, with fractions.
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
