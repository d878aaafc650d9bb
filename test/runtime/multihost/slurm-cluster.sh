#!/usr/bin/env bash
# Runs COMMAND inside a throwaway SLURM cluster on this machine: a private
# munged (generated key), slurmctld, and two slurmd "nodes", each in its own
# network namespace with its own address (or, with MONARCH_TEST_SLURM_NODES=1,
# one slurmd on loopback). Everything (daemons, namespaces, the bridge, the
# config directory) is removed on exit, whatever happens.
#
#   slurm-cluster.sh BIN_DIR COMMAND [ARGS...]
#
# COMMAND sees SLURM_CONF, MONARCH_TEST_SLURM_NODES (node count) and
# MONARCH_TEST_CONTROLLER_HOST (the address the nodes reach this namespace
# at). Exit status: COMMAND's, or 77 (skip) without root or slurm-wlm/munge.
set -u
bin=$1; shift
. "$(dirname "$0")/agents.sh"
nodes=${MONARCH_TEST_SLURM_NODES:-2}

skip() { echo "slurm-cluster: SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root"
for tool in munged slurmctld slurmd srun salloc sinfo ip nsenter; do
  command -v $tool >/dev/null || skip "needs $tool (apt-get install slurm-wlm munge iproute2)"
done

tag=$(printf '%04x' $(( ($$ + 7) % 65536 )))
work=$(mktemp -d /tmp/monarch-slurm-XXXXXX)
chmod 700 "$work"
br=msb$tag
namespaces=(); links=(); daemons=()

cleanup() {
  # slurmd first (it ends job steps), then the controller, then munge.
  for (( k=${#daemons[@]}-1; k>=0; k-- )); do
    p=${daemons[$k]}
    kill -TERM "$p" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
  done
  # Anything a job left behind in the namespaces.
  for ns in "${namespaces[@]}"; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  for l in "${links[@]}"; do ip link del "$l" 2>/dev/null; done
  ip link del "$br" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' INT TERM

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("",0)); print(s.getsockname()[1])'; }

# Addresses: namespaces on a bridge, or loopback for one node.
ctl_ip=127.0.0.1
node_ips=()
if [ "$nodes" -gt 1 ]; then
  subnet=$(free_subnet 10.214)
  [ -n "$subnet" ] || { echo "slurm-cluster: no free subnet"; exit 1; }
  ip netns add "ms$tag-probe" 2>/dev/null || skip "cannot create network namespaces here"
  ip netns del "ms$tag-probe"
  ip link add "$br" type bridge && ip addr add "$subnet.1/24" dev "$br" && ip link set "$br" up || exit 1
  ctl_ip=$subnet.1
  for i in $(seq 1 "$nodes"); do
    ns=ms$tag-$i; host=msv$tag$i; peer=msp$tag$i
    ip netns add "$ns" && namespaces+=("$ns") || exit 1
    ip link add "$host" type veth peer name "$peer" && links+=("$host") || exit 1
    ip link set "$peer" netns "$ns" && ip link set "$host" master "$br" up &&
      ip -n "$ns" addr add "$subnet.$((i + 1))/24" dev "$peer" &&
      ip -n "$ns" link set "$peer" up && ip -n "$ns" link set lo up || exit 1
    node_ips+=("$subnet.$((i + 1))")
  done
else
  node_ips=(127.0.0.1)
fi

# munge with a generated key on a private socket.
dd if=/dev/urandom of="$work/munge.key" bs=1024 count=1 status=none
chmod 400 "$work/munge.key"
munged --force --socket="$work/munge.sock" --key-file="$work/munge.key" \
  --pid-file="$work/munged.pid" --log-file="$work/munged.log" \
  --seed-file="$work/munge.seed" || { echo "slurm-cluster: munged failed"; cat "$work/munged.log"; exit 1; }
daemons+=("$(cat "$work/munged.pid")")

ctl_port=$(free_port); d_port=$(free_port)
short=$(hostname -s)
{
  echo "ClusterName=monarchtest"
  echo "SlurmctldHost=$short($ctl_ip)"
  echo "SlurmctldPort=$ctl_port"
  echo "SlurmdPort=$d_port"
  echo "SlurmUser=root"
  echo "SlurmdUser=root"
  echo "AuthType=auth/munge"
  echo "CredType=cred/munge"
  echo "AuthInfo=socket=$work/munge.sock"
  echo "StateSaveLocation=$work/state"
  echo "SlurmdSpoolDir=$work/spool-%n"
  echo "SlurmctldPidFile=$work/slurmctld.pid"
  echo "SlurmdPidFile=$work/slurmd-%n.pid"
  echo "SlurmctldLogFile=$work/slurmctld.log"
  echo "SlurmdLogFile=$work/slurmd-%n.log"
  echo "SlurmdParameters=config_overrides"
  echo "ProctrackType=proctrack/linuxproc"
  echo "TaskPlugin=task/none"
  echo "SelectType=select/linear"
  echo "SchedulerType=sched/builtin"
  echo "MpiDefault=none"
  echo "ReturnToService=2"
  echo "JobCompType=jobcomp/none"
  echo "AccountingStorageType=accounting_storage/none"
  echo "JobAcctGatherType=jobacct_gather/none"
  echo "SwitchType=switch/none"
  echo "PlugStackConfig=$work/plugstack.conf"
  echo "SlurmctldTimeout=30"
  echo "SlurmdTimeout=30"
  echo "MessageTimeout=5"
  for i in $(seq 1 "$nodes"); do
    echo "NodeName=node$i NodeAddr=${node_ips[$((i - 1))]} CPUs=8 State=UNKNOWN"
  done
  echo "PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
} > "$work/slurm.conf"
: > "$work/plugstack.conf"
mkdir -p "$work/state"
for i in $(seq 1 "$nodes"); do mkdir -p "$work/spool-node$i"; done
export SLURM_CONF=$work/slurm.conf

slurmctld -D -i > "$work/slurmctld.out" 2>&1 &
daemons+=($!)
for i in $(seq 1 "$nodes"); do
  if [ "$nodes" -gt 1 ]; then
    # nsenter switches only the network namespace; `ip netns exec` would
    # also remount /sys, hiding the cgroup mounts slurmd needs.
    nsenter --net="/run/netns/ms$tag-$i" slurmd -D -N "node$i" > "$work/slurmd-$i.out" 2>&1 &
  else
    slurmd -D -N "node$i" > "$work/slurmd-$i.out" 2>&1 &
  fi
  daemons+=($!)
done

# Wait (bounded) until every node is idle.
ready=""
for _ in $(seq 150); do
  idle=$(sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | grep -c .)
  [ "$idle" = "$nodes" ] && { ready=1; break; }
  sleep 0.2
done
if [ -z "$ready" ]; then
  echo "slurm-cluster: nodes did not come up"; sinfo -N 2>&1
  tail -n 30 "$work"/slurmctld.log "$work"/slurmd-*.log "$work"/*.out 2>/dev/null
  exit 1
fi

MONARCH_TEST_SLURM_NODES=$nodes MONARCH_TEST_CONTROLLER_HOST=$ctl_ip "$@"
rc=$?
if [ $rc -ne 0 ]; then
  tail -n 30 "$work"/slurmctld.log "$work"/slurmd-*.log 2>/dev/null
fi
exit $rc
