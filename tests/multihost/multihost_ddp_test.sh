#!/usr/bin/env bash
# DDP across hosts made of network namespaces (tools/multihost/hosts.sh), launched by
# `mpirun --hostfile` with netns_rsh in place of ssh: ResNet-20 on 2 hosts x 2 ranks ends with a
# checkpoint byte-identical to the same run on one host with 4 ranks (the same reduction order),
# 3 hosts x 1 rank likewise against 1 x 3, and Open MPI's own verbose output shows the ranks of
# different hosts connected over TCP (shared memory cannot cross hosts) and those of one host not.
# Then Gloo across hosts, started without mpirun (RANK/WORLD_SIZE, the store at h0's address, each
# rank's Gloo device on its host's address): 2 hosts x 1 rank against 2 ranks on one host.
# multihost_ddp_test.sh HOSTS_SH MPI_RUN TRAIN ENV_RUN
set -uo pipefail
HOSTS_SH="$1"; MPI_RUN="$2"; TRAIN="$3"; ENV_RUN="$4"
source "$(dirname "$0")/multihost_lib.sh"

compare() {  # HOSTS SLOTS: the same steps across HOSTS hosts and on one host
  local hosts=$1 slots=$2 np=$(($1 * $2))
  local multi="$work/multi_${hosts}x$slots" single="$work/single_$np"
  require_hosts "$hosts" "$slots"
  host_mpirun -np "$np" --mca btl self,vader,tcp --mca btl_base_verbose 100 -x EMBER_NUM_THREADS \
    -x EMBER_KERNEL_SELECT "$TRAIN" "${train_flags[@]}" --synthetic-size 768 --epochs 1 --max-steps 4 \
    --checkpoint-dir "$multi" > "$multi.txt" 2>&1 || { cat "$multi.txt"; fail "$hosts hosts x $slots: mpirun exited $?"; }
  hosts_down
  "$MPI_RUN" "$np" "$TRAIN" -- "${train_flags[@]}" --synthetic-size 768 --epochs 1 --max-steps 4 \
    --checkpoint-dir "$single" > "$single.txt" 2>&1 || { cat "$single.txt"; fail "1 host x $np: mpirun exited $?"; }
  grep -v 'btl\|mca:' "$multi.txt"
  grep -q "processes=$np\$" "$multi.txt" || fail "$hosts hosts x $slots: no summary for $np processes"
  cmp "$multi/epoch-1.safetensors" "$single/epoch-1.safetensors" ||
    fail "$hosts hosts x $slots ranks and 1 host x $np ranks ended with different checkpoints"
  # Open MPI's TCP transport, as it reports itself: "[hI:pid] btl: tcp: attempting to connect() to
  # [[job,1],rank] address A ..." and "[hI:pid] btl:tcp: now connected to A, process ...".
  local i j
  for ((i = 0; i < hosts; i++)); do
    for ((j = 0; j < hosts; j++)); do
      local links
      links=$(grep -c "^\[h$i:[0-9]*\] btl.*\(connect() to .* address\|now connected to\) 10\.213\.0\.$((10 + j))[ ,]" \
        "$multi.txt")
      if [ $i -ne $j ] && [ "$links" -eq 0 ]; then fail "no TCP connection from host h$i to h$j in Open MPI's output"; fi
      if [ $i -eq $j ] && [ "$links" -ne 0 ]; then fail "ranks of host h$i talked over TCP (shared memory expected)"; fi
    done
  done
  echo "PASS: $hosts hosts x $slots ranks over TCP = 1 host x $np ranks, byte for byte"
}

compare 2 2
compare 3 1

require_hosts 2 1
gloo_flags=("${train_flags[@]}" --synthetic-size 768 --epochs 1 --max-steps 4)
for i in 1 0; do
  host_run "$i" env RANK=$i WORLD_SIZE=2 EMBER_MASTER_ADDR=10.213.0.10 EMBER_MASTER_PORT=29612 \
    EMBER_JOB_ID="multihost.$$" EMBER_COLLECTIVE_TIMEOUT=60 "$TRAIN" "${gloo_flags[@]}" \
    --checkpoint-dir "$work/gloo_multi" > "$work/gloo_multi$i.txt" 2>&1 &
  pids[$i]=$!
done
for i in 0 1; do
  wait "${pids[$i]}" || { cat "$work/gloo_multi$i.txt"; fail "Gloo across hosts: rank $i exited non-zero"; }
done
hosts_down
"$ENV_RUN" 2 "$TRAIN" -- "${gloo_flags[@]}" --checkpoint-dir "$work/gloo_single" > "$work/gloo_single.txt" 2>&1 ||
  { cat "$work/gloo_single.txt"; fail "Gloo on one host exited $?"; }
cat "$work/gloo_multi0.txt"
grep -q 'gradients over Gloo$' "$work/gloo_multi0.txt" || fail "the run across hosts did not say Gloo"
cmp "$work/gloo_multi/epoch-1.safetensors" "$work/gloo_single/epoch-1.safetensors" ||
  fail "Gloo: 2 hosts x 1 rank and 1 host x 2 ranks ended with different checkpoints"
echo "PASS: Gloo, 2 hosts x 1 rank without a launcher = 1 host x 2 ranks, byte for byte"
