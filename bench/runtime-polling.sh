#!/usr/bin/env bash
# What each polling site and the io loop's lending (docs/runtime.md, "Polling
# and the io loop") buy on the actor ping-pong: runs the Unix and TCP
# ping-pong figures of monarch-runtime-bench once per setting, and prints one
# markdown row per setting with its ratios to the raw baselines of that run.
#   bench/runtime-polling.sh [build-dir] [reps] [poll-us]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
reps=${2:-5}
us=${3:-50}
echo "| future | io thread | actor | io lent | Unix µs | ratio to raw | ratio to polling raw | TCP µs | ratio to raw | ratio to polling raw |"
echo "|---|---|---|---|---|---|---|---|---|---|"
row() { # future io actor lend
  local env=(MONARCH_FUTURE_POLL_US=$1 MONARCH_IO_POLL_US=$2 MONARCH_ACTOR_POLL_US=$3 MONARCH_IO_LEND=$4)
  local rows
  rows=$(env "${env[@]}" "$build/bin/monarch-runtime-bench" --reps "$reps" --only unix --no-sleepy 2>&1
    env "${env[@]}" "$build/bin/monarch-runtime-bench" --reps "$reps" --only tcp 2>&1)
  # Rows: | figure | value unit | baseline | baseline value unit | ratio |
  echo "$rows" | awk -F'|' -v f="$1" -v i="$2" -v a="$3" -v l="$4" '
    /ping-pong, Unix socket \(2/ { split($3, v, " "); unixv = v[1]; r = $6; gsub(/ /, "", r)
      if ($4 ~ /polling/) unixp = r; else unixr = r }
    /ping-pong, TCP loopback/ { split($3, v, " "); tcpv = v[1]; r = $6; gsub(/ /, "", r)
      if ($4 ~ /polling/) tcpp = r; else tcpr = r }
    END { printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", f, i, a, l, unixv, unixr, unixp, tcpv, tcpr, tcpp }'
}
for future in 0 "$us"; do
  for io in 0 "$us"; do
    for actor in 0 "$us"; do
      row "$future" "$io" "$actor" 0
    done
  done
done
row 0 "$us" "$us" 1
row "$us" 0 "$us" 1
row "$us" "$us" 0 1
row "$us" "$us" "$us" 1
