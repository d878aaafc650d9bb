#!/usr/bin/env bash
# Runs COMMAND against N "hosts" on this machine without root: N monarch-host
# agents on loopback, agent i seeing only GPU i (CUDA_VISIBLE_DEVICES=i), so
# every "host" has a GPU 0 of its own -- the set-up of N one-GPU machines.
# Agents (and the workers they start) log at debug level (MONARCH_LOG=debug)
# so that COMMAND can see which collective backend each communicator took.
# The agents and the secret file are removed on exit, whatever happens.
#
#   loopback-gpu-hosts.sh BIN_DIR N COMMAND [ARGS...]
#
# COMMAND sees MONARCH_TEST_GPU_HOSTS (tcp://127.0.0.1:PORT,... in host
# order), MONARCH_TEST_GPU_HOST_NAMES (gh0,gh1,...) and
# MONARCH_TEST_SECRET_FILE. Exit status: COMMAND's, or 77 (skip) with fewer
# than N GPUs.
set -u
bin=$1; n=$2; shift 2
. "$(dirname "$0")/agents.sh"

skip() { echo "loopback-gpu-hosts: SKIP: $*"; exit 77; }
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
[ "${gpus:-0}" -ge "$n" ] || skip "needs $n GPUs (nvidia-smi -L lists ${gpus:-0})"

work=$(mktemp -d /tmp/monarch-gpuhosts-XXXXXX)
pids=()
cleanup() {
  stop_agents
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' INT TERM

write_secret "$work/secret"
for i in $(seq 0 $((n - 1))); do
  CUDA_VISIBLE_DEVICES=$i MONARCH_LOG=debug "$bin/monarch-host" \
    --listen "tcp://127.0.0.1:0" --name "gh$i" \
    --secret-file "$work/secret" > "$work/agent$i.log" 2>&1 &
  pids+=($!)
done

wait_for_agents loopback-gpu-hosts gh "$n" "$work"
MONARCH_TEST_GPU_HOSTS=$(join "${addrs[@]}") \
MONARCH_TEST_GPU_HOST_NAMES=$(join "${names[@]}") \
MONARCH_TEST_SECRET_FILE=$work/secret \
  "$@"
rc=$?
show_agent_logs gh "$n" "$work"
exit $rc
