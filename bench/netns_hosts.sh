# shellcheck shell=bash
# Two hosts on one machine for the benchmarks (sourced, not run; root only):
# two network namespaces joined by a veth pair, `tc tbf` capping each end.
#
# netns_hosts_up NS_PREFIX VETH_PREFIX RATE makes namespaces NS_PREFIX<pid>a
# (host A, 10.231.0.1) and NS_PREFIX<pid>b (host B, 10.231.0.2), sets ns_a,
# ns_b, addr_a and addr_b, prints each step as `# setup: ...`, and records
# every namespace it made in netns_made; it returns 1 if a step fails.
# netns_hosts_down (call it from the EXIT trap) removes them. VETH_PREFIX plus
# the pid must stay within an interface name's 15 characters.
netns_made=()
netns_hosts_up() {
  local tag=$$ veth_a veth_b rate=$3 step
  ns_a=$1${tag}a ns_b=$1${tag}b veth_a=$2${tag}a veth_b=$2${tag}b addr_a=10.231.0.1 addr_b=10.231.0.2
  local setup=(
    "ip netns add $ns_a" "ip netns add $ns_b"
    "ip link add $veth_a netns $ns_a type veth peer name $veth_b netns $ns_b"
    "ip -n $ns_a addr add $addr_a/24 dev $veth_a" "ip -n $ns_b addr add $addr_b/24 dev $veth_b"
    "ip -n $ns_a link set lo up" "ip -n $ns_b link set lo up"
    "ip -n $ns_a link set $veth_a up" "ip -n $ns_b link set $veth_b up"
    "tc -n $ns_a qdisc add dev $veth_a root tbf rate $rate burst 256kb latency 50ms"
    "tc -n $ns_b qdisc add dev $veth_b root tbf rate $rate burst 256kb latency 50ms")
  for step in "${setup[@]}"; do
    echo "# setup: $step"
    # shellcheck disable=SC2086
    $step || { echo "${0##*/}: setup failed: $step" >&2; return 1; }
    if [[ $step == "ip netns add "* ]]; then netns_made+=("${step#ip netns add }"); fi
  done
}
netns_hosts_down() {
  local ns
  for ns in "${netns_made[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  netns_made=()
}
