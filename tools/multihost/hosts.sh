#!/usr/bin/env bash
# Several "hosts" on one machine, made of Linux network namespaces (root only), for running and
# testing jobs that span hosts: each host is a namespace with its own veth interface (eth0) and
# address on a private bridge, its own host name (a UTS namespace entered with each command) and
# an /etc/hosts naming every host. Nothing outside these namespaces is contacted: the bridge has no
# address in the machine's own namespace and no route leads out.
#
# As a library (source it):
#   hosts_up N [SLOTS]   create hosts h0..hN-1 (a hostfile with SLOTS slots each: $HOSTS_HOSTFILE)
#   host_run I CMD...    run CMD on host hI (its network, its host name)
#   host_mpirun ARGS...  mpirun on host h0 with the hostfile's hosts reached through
#                        tools/multihost/netns_rsh instead of ssh, MPI over TCP between hosts
#   hosts_mpi_env        export those settings for any mpirun on the hosts (OMPI_MCA_*)
#   host_kill I          SIGKILL every process of host hI
#   host_remove I        kill host hI and delete its namespace (the host is gone)
#   host_link I up|down  plug or pull host hI's cable (its eth0)
#   host_impair I LOSS RATE [BURST]  host hI's link drops LOSS percent of the frames it receives and
#                        sends at most RATE (tc's units: 100mbit): a lossy, slow link; tbf's BURST
#                        (default 32kbit) must be at least RATE / HZ (4mbit at 1gbit). This kernel has
#                        no netem, so there is no added latency, only loss (nftables) and rate (tbf).
#   hosts_down           remove everything hosts_up made (also on EXIT: hosts_up sets the trap)
#   hosts_sweep          remove what runs that were killed before their cleanup left behind
# As a command:  hosts.sh up N [SLOTS] | down ID | sweep | run ID I CMD...
# Names: namespaces emhID-hI, bridge emhID, root-side veth emhIDvI; ID is the creating shell's pid,
# so the sweep knows a set is left over when that pid no longer runs. Addresses 10.213.0.(10+I)/24.
HOSTS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
HOSTS_ID=""
HOSTS_N=0
HOSTS_HOSTFILE=""

hosts_permitted() {
  local probe="emhprobe$$"
  if ! ip netns add "$probe" 2> "/tmp/$probe.err"; then
    HOSTS_WHY="network namespaces are not permitted here (ip netns add: $(cat "/tmp/$probe.err"))"
    rm -f "/tmp/$probe.err"
    return 1
  fi
  ip netns del "$probe"
  rm -f "/tmp/$probe.err"
}

_hosts_remove_set() {  # ID [N]: everything named for set ID
  local id="$1" ns
  for ns in $(ip netns list 2> /dev/null | awk '{print $1}' | grep "^emh${id}-h[0-9]*$"); do
    ip netns pids "$ns" 2> /dev/null | xargs -r kill -KILL 2> /dev/null
    ip netns del "$ns" 2> /dev/null
    rm -rf "/etc/netns/$ns"
  done
  ip link del "emh${id}" 2> /dev/null
  rm -rf "/tmp/emh${id}"
}

hosts_sweep() {
  local ns id
  for ns in $(ip netns list 2> /dev/null | awk '{print $1}' | grep '^emh[0-9]*-h[0-9]*$'); do
    id="${ns#emh}"
    id="${id%%-*}"
    if [ "$id" != "$HOSTS_ID" ] && ! kill -0 "$id" 2> /dev/null; then
      echo "hosts: removing hosts left by an earlier run (set $id)" >&2
      _hosts_remove_set "$id"
    fi
  done
  # A bridge or /etc/netns entry whose namespaces are gone already.
  for id in $(ip -o link show type bridge 2> /dev/null | sed -n 's/^[0-9]*: emh\([0-9]*\)[:@].*/\1/p'); do
    [ "$id" != "$HOSTS_ID" ] && ! kill -0 "$id" 2> /dev/null && _hosts_remove_set "$id"
  done
  for ns in /etc/netns/emh[0-9]*-h[0-9]*; do
    [ -e "$ns" ] || continue
    id="${ns#/etc/netns/emh}"
    id="${id%%-*}"
    [ "$id" != "$HOSTS_ID" ] && ! kill -0 "$id" 2> /dev/null && rm -rf "$ns"
  done
  return 0
}

hosts_down() {
  [ -n "$HOSTS_ID" ] && _hosts_remove_set "$HOSTS_ID"
  HOSTS_ID=""
}

hosts_up() {
  local n="$1" slots="${2:-1}" ns
  hosts_permitted || return 1
  hosts_sweep
  HOSTS_ID="$$"
  HOSTS_N="$n"
  # Also when ended by a signal (Bazel's timeout sends SIGTERM): bash runs the EXIT trap only for
  # signals it traps.
  trap hosts_down EXIT
  trap 'exit 143' TERM
  trap 'exit 130' INT
  mkdir -p "/tmp/emh${HOSTS_ID}"
  HOSTS_HOSTFILE="/tmp/emh${HOSTS_ID}/hostfile"
  : > "$HOSTS_HOSTFILE"
  ip link add "emh${HOSTS_ID}" type bridge || return 1
  ip link set "emh${HOSTS_ID}" up
  local etc_hosts="127.0.0.1 localhost"$'\n'
  for ((i = 0; i < n; i++)); do etc_hosts+="10.213.0.$((10 + i)) h$i"$'\n'; done
  for ((i = 0; i < n; i++)); do
    ns="emh${HOSTS_ID}-h$i"
    ip netns add "$ns" || return 1
    mkdir -p "/etc/netns/$ns"
    printf '%s' "$etc_hosts" > "/etc/netns/$ns/hosts"
    ip link add "emh${HOSTS_ID}v$i" type veth peer name eth0 netns "$ns" || return 1
    ip link set "emh${HOSTS_ID}v$i" master "emh${HOSTS_ID}" up
    ip -n "$ns" addr add "10.213.0.$((10 + i))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    echo "h$i slots=$slots" >> "$HOSTS_HOSTFILE"
  done
  # Every host reaches every other before anything starts (the bridge forwards once its ports are up).
  local i tries said
  for ((i = 1; i < n; i++)); do
    tries=0
    until said=$(ip netns exec "emh${HOSTS_ID}-h0" bash -c "exec 3<> /dev/tcp/10.213.0.$((10 + i))/1" 2>&1) ||
      [[ "$said" == *refused* ]]; do
      tries=$((tries + 1))
      [ $tries -ge 50 ] && { echo "hosts: h$i is not reachable from h0 ($said)" >&2; return 1; }
      sleep 0.1
    done
  done
  export EMBER_NETNS_PREFIX="emh${HOSTS_ID}-"
}

host_run() {
  local i="$1"
  shift
  ip netns exec "emh${HOSTS_ID}-h$i" unshare --uts "$HOSTS_DIR/netns_rsh" --here "h$i" "$@"
}

# The orted daemons of hosts other than h0 are started by netns_rsh (no tree spawn: each from h0,
# as from a cluster's first node); the TCP transport and the out-of-band channel use eth0, the one
# interface that crosses hosts. A host cut off is noticed by TCP keepalives on the daemons' idle
# connections after 2 + 3 x 1 s: by default after 300 + 9 x 20 s, and until then mpirun waits for
# that host's daemon even when every other rank has ended (docs/DISTRIBUTED.md, several hosts).
# hosts_mpi_env exports these as OMPI_MCA_* variables, so any mpirun started on the hosts (by
# tools/launch too) uses them.
hosts_mpi_env() {
  export OMPI_MCA_plm_rsh_agent="$HOSTS_DIR/netns_rsh" OMPI_MCA_plm_rsh_no_tree_spawn=1
  export OMPI_MCA_btl_tcp_if_include=eth0 OMPI_MCA_oob_tcp_if_include=eth0
  export OMPI_MCA_oob_tcp_keepalive_time=2 OMPI_MCA_oob_tcp_keepalive_intvl=1 OMPI_MCA_oob_tcp_keepalive_probes=3
  export OMPI_MCA_orte_tmpdir_base="/tmp/emh${HOSTS_ID}"
}

host_mpirun() {
  hosts_mpi_env
  host_run 0 mpirun --hostfile "$HOSTS_HOSTFILE" "$@"
}

host_kill() {
  ip netns pids "emh${HOSTS_ID}-h$1" 2> /dev/null | xargs -r kill -KILL 2> /dev/null
  return 0
}

host_remove() {
  host_kill "$1"
  ip netns del "emh${HOSTS_ID}-h$1" 2> /dev/null
  rm -rf "/etc/netns/emh${HOSTS_ID}-h$1"
}

host_link() {
  ip -n "emh${HOSTS_ID}-h$1" link set eth0 "$2"
}

host_impair() {
  local ns="emh${HOSTS_ID}-h$1" loss="$2" rate="$3" burst="${4:-32kbit}"
  # Frames as on a wire, one MTU each: with segmentation offloads a dropped "packet" would be up
  # to 64 KB of a stream.
  ip netns exec "$ns" ethtool -K eth0 tso off gso off gro off > /dev/null 2>&1
  # Dropped as they arrive, so the sender sees a lost frame, not a local error.
  ip netns exec "$ns" nft -f - << EOF || return 1
table netdev emh_impair {
  chain lossy {
    type filter hook ingress device eth0 priority 0; policy accept;
    numgen random mod 10000 < $(awk -v p="$loss" 'BEGIN { printf "%d", p * 100 }') counter drop
  }
}
EOF
  ip netns exec "$ns" tc qdisc replace dev eth0 root tbf rate "$rate" burst "$burst" latency 50ms
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -uo pipefail
  case "${1:-}" in
    up)
      hosts_up "$2" "${3:-1}" || exit 1
      trap - EXIT
      echo "$HOSTS_ID $HOSTS_HOSTFILE"
      ;;
    down) HOSTS_ID="$2" hosts_down ;;
    sweep) hosts_sweep ;;
    run)
      HOSTS_ID="$2"
      i="$3"
      shift 3
      export EMBER_NETNS_PREFIX="emh${HOSTS_ID}-"
      host_run "$i" "$@"
      ;;
    *)
      sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
      exit 2
      ;;
  esac
fi
