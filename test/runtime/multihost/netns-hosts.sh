#!/usr/bin/env bash
# Runs COMMAND against N "hosts" on this machine: each host is a network
# namespace with its own address on a private bridge, running one monarch-host
# agent. Everything it creates (namespaces, veths, the bridge, agents, the
# secret file) is removed on exit, whatever happens.
#
#   netns-hosts.sh BIN_DIR N COMMAND [ARGS...]
#
# COMMAND sees:
#   MONARCH_TEST_HOSTS        tcp://IP:PORT,... of the agents (host order)
#   MONARCH_TEST_HOST_NAMES   their names (mh0,mh1,...)
#   MONARCH_TEST_NETNS        the namespaces' names
#   MONARCH_TEST_LINKS        the root-side veth of each host (cut with
#                             `ip link set DEV down`)
#   MONARCH_TEST_AGENT_PIDS   the agents' process ids
#   MONARCH_TEST_SECRET_FILE  the job secret (mode 0600)
# Exit status: COMMAND's, or 77 (skip) without root or `ip netns`.
set -u
bin=$1; n=$2; shift 2
. "$(dirname "$0")/agents.sh"

skip() { echo "netns-hosts: SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces)"
command -v ip >/dev/null || skip "needs iproute2 (ip)"

tag=$(printf '%04x' $(( $$ % 65536 )))
work=$(mktemp -d /tmp/monarch-netns-XXXXXX)
br=mhb$tag
namespaces=(); links=(); pids=()

cleanup() {
  stop_agents
  for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null; done
  for l in "${links[@]}"; do ip link del "$l" 2>/dev/null; done
  ip link del "$br" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' INT TERM

# A /24 no interface here uses yet.
subnet=$(free_subnet 10.213)
[ -n "$subnet" ] || { echo "netns-hosts: no free 10.213.x.0/24"; exit 1; }

ip netns add "mh$tag-probe" 2>/dev/null || skip "cannot create network namespaces here"
ip netns del "mh$tag-probe"

set -e
ip link add "$br" type bridge
ip addr add "$subnet.1/24" dev "$br"
ip link set "$br" up
for i in $(seq 0 $((n - 1))); do
  ns=mh$tag-$i; host=mhv$tag$i; peer=mhp$tag$i
  ip netns add "$ns"; namespaces+=("$ns")
  ip link add "$host" type veth peer name "$peer"; links+=("$host")
  ip link set "$peer" netns "$ns"
  ip link set "$host" master "$br" up
  ip -n "$ns" addr add "$subnet.$((i + 2))/24" dev "$peer"
  ip -n "$ns" link set "$peer" up
  ip -n "$ns" link set lo up
done

write_secret "$work/secret"
for i in $(seq 0 $((n - 1))); do
  ip netns exec "mh$tag-$i" "$bin/monarch-host" \
    --listen "tcp://$subnet.$((i + 2)):0" --name "mh$i" \
    --secret-file "$work/secret" > "$work/agent$i.log" 2>&1 &
  pids+=($!)
done
set +e

wait_for_agents netns-hosts mh "$n" "$work"
MONARCH_TEST_HOSTS=$(join "${addrs[@]}") \
MONARCH_TEST_HOST_NAMES=$(join "${names[@]}") \
MONARCH_TEST_NETNS=$(join "${namespaces[@]}") \
MONARCH_TEST_LINKS=$(join "${links[@]}") \
MONARCH_TEST_AGENT_PIDS=$(join "${pids[@]}") \
MONARCH_TEST_SECRET_FILE=$work/secret \
  "$@"
rc=$?
show_agent_logs mh "$n" "$work"
exit $rc
