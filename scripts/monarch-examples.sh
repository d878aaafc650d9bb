#!/usr/bin/env bash
# Monarch's own documentation examples, run unchanged against this package
# (docs/python.md, "Monarch compatibility"). Their code is Monarch's: it is
# never committed here, only extracted from a fetched mirror into the
# git-ignored .monarch-examples/ (name it in a device run's carry to run them
# on the GPU machine, which has no network).
#
#   scripts/monarch-examples.sh extract [GIT_DIR [COMMIT]]
#       GIT_DIR: a bare mirror of meta-pytorch/monarch (default
#       /work/.mirror/meta-pytorch+monarch/repo, what `fetch` brings);
#       COMMIT default 3fc0a66 (the one docs/python.md describes).
#   scripts/monarch-examples.sh run [PYTHONPATH_DIR [EXAMPLE...]]
#       Runs each example as its docs do (`python example.py` in its own
#       directory; default: every extracted one) with the package at
#       PYTHONPATH_DIR (default build/python; build-gpu/python there), each
#       bounded by MONARCH_EXAMPLE_TIMEOUT seconds (default 120), with
#       $PYTHON (default: the first of python3, /usr/bin/python3 that has
#       torch, as the build chooses its interpreter), its output
#       in $OUT/example-NAME.log (OUT default .monarch-examples/logs). Prints
#       one verdict line per example; exits non-zero if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
dest=$root/.monarch-examples
examples=(ping_pong grpo_yield getting_started grpo_actor distributed_tensors ddp/spmd_ddp)

case "${1:-}" in
  extract)
    git_dir=${2:-/work/.mirror/meta-pytorch+monarch/repo}
    commit=${3:-3fc0a66}
    rm -rf "$dest" && mkdir -p "$dest/ddp" || exit 1
    for e in "${examples[@]}" ddp/train; do
      git --git-dir="$git_dir" show "$commit:docs/source/examples/$e.py" > "$dest/$e.py" ||
        { echo "monarch-examples: $e.py is not at $commit in $git_dir"; exit 1; }
    done
    echo "monarch-examples: ${#examples[@]} examples of $commit in $dest"
    ;;
  run)
    pkg=$(cd "${2:-build/python}" && pwd) || exit 1
    shift $(( $# >= 2 ? 2 : $# ))
    [ -d "$dest" ] || { echo "monarch-examples: nothing extracted (run: $0 extract)"; exit 1; }
    py=${PYTHON:-}
    if [ -z "$py" ]; then
      for candidate in python3 /usr/bin/python3; do
        if "$candidate" -c 'import torch' 2>/dev/null; then py=$candidate; break; fi
      done
      [ -n "$py" ] || { echo "monarch-examples: no python3 with torch (set PYTHON)"; exit 1; }
    fi
    out=${OUT:-$dest/logs}
    mkdir -p "$out"
    failed=0
    for e in "${@:-${examples[@]}}"; do
      log=$out/example-$(basename "$e").log
      start=$(date +%s)
      (cd "$dest/$(dirname "$e")" &&
         PYTHONPATH=$pkg timeout "${MONARCH_EXAMPLE_TIMEOUT:-120}" "$py" "$(basename "$e").py") \
        > "$log" 2>&1
      rc=$?
      [ $rc -eq 0 ] || failed=1
      echo "monarch-examples: $e exit $rc in $(( $(date +%s) - start )) s" \
        "($([ $rc -eq 124 ] && echo "timed out" || tail -n 1 "$log" | cut -c1-160))"
    done
    exit $failed
    ;;
  *)
    sed -n '2,21p' "$0"; exit 2 ;;
esac
