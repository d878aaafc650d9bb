#!/bin/sh
# A stand-in monarch-opt for external-compile.test. Appends how it was run
# (its path and arguments) and what $TMPDIR held meanwhile to $FAKE_OPT_LOG,
# then per $FAKE_OPT_MODE:
#   real    runs $FAKE_OPT_REAL (the real monarch-opt) with the same arguments
#   sleep   writes its pid to $FAKE_OPT_LOG.pid and sleeps (a hung compiler)
#   crash   dies of SIGSEGV
#   noplan  prints a line and exits 0 without writing the plan
{ echo "run: $0 $*"; echo "tmpdir: $(ls "$TMPDIR")"; } >> "$FAKE_OPT_LOG"
case "${FAKE_OPT_MODE:-real}" in
  real) exec "$FAKE_OPT_REAL" "$@" ;;
  sleep) echo $$ > "$FAKE_OPT_LOG.pid"; exec sleep 60 ;;
  crash) kill -SEGV $$ ;;
  noplan) echo "fake-monarch-opt: nothing to say"; exit 0 ;;
esac
echo "fake-monarch-opt: unknown FAKE_OPT_MODE $FAKE_OPT_MODE" >&2
exit 3
