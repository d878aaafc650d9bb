"""Checks of monarch-run's external compile (external-compile.test).

Usage:
  external_compile.py empty DIR
      DIR exists and is empty (every temp dir was removed).
  external_compile.py dead PIDFILE
      The process whose pid PIDFILE holds is gone (killed and reaped).
  external_compile.py signal MONARCH_RUN FAKE_OPT PROGRAM TMPDIR
      Runs MONARCH_RUN --monarch-opt FAKE_OPT PROGRAM with the fake in its
      hanging mode, sends monarch-run SIGTERM and then (a second run) SIGINT
      while it waits for the fake, and checks that monarch-run died of that
      signal, the fake was killed and TMPDIR is empty again. A third run
      ignores SIGINT (as under nohup or a shell's background job): SIGINT
      changes nothing, and SIGTERM then ends it as before.
"""
import os
import signal
import subprocess
import sys
import time


def fail(message):
    sys.exit(f"FAIL: {message}")


def empty(d):
    if not os.path.isdir(d):
        fail(f"{d} does not exist")
    left = os.listdir(d)
    if left:
        fail(f"{d} still holds {left}")


def dead(pidfile):
    pid = int(open(pidfile).read())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return
    fail(f"process {pid} is still there")


def start(run, fake, program, tmpdir, name, dispositions):
    log = os.path.join(tmpdir + ".log", f"{name}.log")
    os.makedirs(os.path.dirname(log), exist_ok=True)
    pidfile = log + ".pid"
    env = dict(os.environ, TMPDIR=tmpdir, FAKE_OPT_MODE="sleep", FAKE_OPT_LOG=log)
    env.pop("MONARCH_OPT", None)

    def child_dispositions():
        for sig, action in dispositions.items():
            signal.signal(sig, action)

    p = subprocess.Popen([run, "--monarch-opt", fake, program, "--emit-plan",
                          os.path.join(tmpdir + ".log", "never.plan")],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=child_dispositions)
    deadline = time.time() + 30
    while not (os.path.exists(pidfile) and open(pidfile).read().strip()):
        if time.time() > deadline or p.poll() is not None:
            p.kill()
            fail(f"the fake monarch-opt never started ({p.communicate()})")
        time.sleep(0.05)
    if not os.listdir(tmpdir):
        fail("no temp dir while monarch-opt runs: nothing to check")
    return p, pidfile


def ended_by(p, sig, pidfile, tmpdir):
    p.send_signal(sig)
    try:
        _, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        fail(f"monarch-run did not end on {sig.name}")
    if p.returncode != -sig:
        fail(f"monarch-run exited with {p.returncode} on {sig.name}, expected -{int(sig)}: {err!r}")
    dead(pidfile)
    empty(tmpdir)


def signal_run(run, fake, program, tmpdir):
    defaults = {signal.SIGINT: signal.SIG_DFL, signal.SIGTERM: signal.SIG_DFL}
    for sig in (signal.SIGTERM, signal.SIGINT):
        p, pidfile = start(run, fake, program, tmpdir, sig.name, defaults)
        ended_by(p, sig, pidfile, tmpdir)
        print(f"{sig.name}: monarch-run ended by it, monarch-opt killed, {tmpdir} empty")
    p, pidfile = start(run, fake, program, tmpdir, "ignored",
                       {**defaults, signal.SIGINT: signal.SIG_IGN})
    p.send_signal(signal.SIGINT)
    time.sleep(1)
    if p.poll() is not None:
        fail(f"monarch-run ignoring SIGINT ended on it ({p.returncode}): {p.communicate()}")
    ended_by(p, signal.SIGTERM, pidfile, tmpdir)
    print("ignored SIGINT: no effect; SIGTERM ended it as before")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "empty" and len(args) == 1:
        empty(*args)
    elif cmd == "dead" and len(args) == 1:
        dead(*args)
    elif cmd == "signal" and len(args) == 4:
        signal_run(*args)
    else:
        fail(__doc__)
