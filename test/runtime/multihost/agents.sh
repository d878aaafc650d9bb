# Sourced by the multi-host test drivers (netns-hosts.sh,
# loopback-gpu-hosts.sh, slurm-cluster.sh): the monarch-host agents they
# start, and the private subnet their network namespaces live on.

# free_subnet PREFIX: a /24 PREFIX.x (x < 250, starting from this shell's
# pid) that no interface here uses yet, printed; nothing when none is free.
free_subnet() {
  local k c
  for k in $(seq 0 249); do
    c="$1.$(( ($$ + k) % 250 ))"
    ip -4 addr | grep -q " $c\." || { echo "$c"; return; }
  done
}

# wait_for_agents DRIVER PREFIX N WORK: waits (up to 10 s each) until agent
# PREFIX<i> has printed its address in WORK/agent<i>.log, for i < N, or its
# process (${pids[i]}) has died. Sets `addrs` and `names` (host order); exits 1
# with the agent's log when one did not start.
wait_for_agents() {
  local driver=$1 prefix=$2 n=$3 work=$4 i addr
  addrs=(); names=()
  for i in $(seq 0 $((n - 1))); do
    addr=""
    for _ in $(seq 100); do
      addr=$(sed -n "s/^monarch-host: host '$prefix$i' serving on //p" "$work/agent$i.log")
      [ -n "$addr" ] && break
      kill -0 "${pids[$i]}" 2>/dev/null || break
      sleep 0.1
    done
    if [ -z "$addr" ]; then
      echo "$driver: agent $prefix$i did not start:"; cat "$work/agent$i.log"; exit 1
    fi
    addrs+=("$addr"); names+=("$prefix$i")
  done
}

# join A B C -> A,B,C
join() { local IFS=,; echo "$*"; }

# write_secret FILE: a fresh job secret (32 random bytes as hex), mode 0600.
write_secret() {
  (umask 077; od -An -tx1 -N32 /dev/urandom | tr -d ' \n' > "$1")
}

# stop_agents: TERM every agent in `pids`, KILL what is left after 5 s, reap.
stop_agents() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null
  done
}

# show_agent_logs PREFIX N WORK: the last lines of each agent's log.
show_agent_logs() {
  local i
  for i in $(seq 0 $(($2 - 1))); do
    echo "---- agent $1$i log (last lines)"; tail -n 20 "$3/agent$i.log"
  done
}
