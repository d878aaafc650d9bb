#!/usr/bin/env python3
"""Attacks a monarch-host before authentication, as issue 23 did, and
measures what it costs the agent (docs/runtime.md "Reliability figures").

    preauth_attack.py BUILD_DIR [--connections 2400] [--rounds 10]

Starts `monarch-host` on 127.0.0.1 with a fresh secret, then per round:
  - opens --connections/--rounds connections that never authenticate: one in
    five announces a 16 MiB frame and sends all of it but the last byte
    (what held 16 MiB per connection before), the others send random bytes, a bad magic,
    a payload frame first, or nothing;
  - after each round, does a legitimate handshake (HMAC-SHA256 of the secret,
    as the runtime's Auth.cpp) and checks the agent proves the secret back;
  - reads the agent's resident memory and CPU time.
Then exhausts the agent's descriptors (RLIMIT_NOFILE lowered with prlimit)
and checks that it backs off instead of spinning and serves a legitimate
client once descriptors are back.
Prints one line per round and a summary; exits 1 if a legitimate handshake
failed or memory grew past 64 MiB over the start.
"""
import argparse
import hashlib
import hmac
import os
import random
import socket
import struct
import subprocess
import sys
import tempfile
import time

BIG = b"\x00" * ((16 << 20) - 1)
CLIENT_LABEL = b"monarch-client-v1"
SERVER_LABEL = b"monarch-server-v1"


def frame(kind: int, body: bytes) -> bytes:
    return b"M" + bytes([kind, 0, 0]) + struct.pack("<I", len(body)) + body


def handshake_msg(nonce: bytes = b"", mac: bytes = b"") -> bytes:
    out = b""
    if nonce:
        out += b"\x0a" + bytes([len(nonce)]) + nonce
    if mac:
        out += b"\x12" + bytes([len(mac)]) + mac
    return out


def parse_handshake(body: bytes) -> dict:
    fields, i = {}, 0
    while i < len(body):
        tag, n = body[i], body[i + 1]
        fields[tag >> 3] = body[i + 2:i + 2 + n]
        i += 2 + n
    return fields


def read_frame(sock: socket.socket) -> bytes:
    head = b""
    while len(head) < 8:
        chunk = sock.recv(8 - len(head))
        if not chunk:
            raise ConnectionError("closed")
        head += chunk
    (length,) = struct.unpack("<I", head[4:])
    body = b""
    while len(body) < length:
        chunk = sock.recv(length - len(body))
        if not chunk:
            raise ConnectionError("closed")
        body += chunk
    return body


def legitimate(port: int, secret: bytes) -> float:
    """One authenticated handshake; returns its time in ms (raises if refused)."""
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        challenge = parse_handshake(read_frame(s))[1]
        mine = os.urandom(32)
        mac = hmac.new(secret, CLIENT_LABEL + challenge, hashlib.sha256).digest()
        s.sendall(frame(1, handshake_msg(mine, mac)))
        proof = parse_handshake(read_frame(s)).get(2, b"")
        expected = hmac.new(secret, SERVER_LABEL + mine, hashlib.sha256).digest()
        if not hmac.compare_digest(proof, expected):
            raise RuntimeError("the agent did not prove the secret")
    return (time.monotonic() - start) * 1000


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def attack(port: int, n: int, rng: random.Random, keep: list) -> int:
    kinds = 0
    for i in range(n):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            continue
        s.setblocking(False)
        k = i % 5
        try:
            if k == 0:  # a 16 MiB frame, all of it but its last byte
                s.setblocking(True)
                s.settimeout(2)
                s.sendall(b"M\x01\x00\x00" + struct.pack("<I", 16 << 20) + BIG)
                s.setblocking(False)
            elif k == 1:
                s.send(bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 4096))))
            elif k == 2:
                s.send(b"X" * 64)
            elif k == 3:  # a payload frame before any handshake
                s.send(frame(2, os.urandom(1000)))
        except OSError:
            pass
        kinds += 1
        keep.append(s)
    return kinds


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--connections", type=int, default=2400)
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()
    agent_bin = os.path.join(args.build, "bin", "monarch-host")
    secret = os.urandom(32)
    with tempfile.NamedTemporaryFile("w", delete=False) as f:
        f.write(secret.hex())
        secret_file = f.name
    os.chmod(secret_file, 0o600)
    proc = subprocess.Popen([agent_bin, "--listen", "tcp://127.0.0.1:0",
                             "--secret-file", secret_file],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    ok = True
    try:
        line = proc.stdout.readline()
        port = int(line.rsplit(":", 1)[1])
        legitimate(port, secret)
        base = rss_mib(proc.pid)
        print(f"agent pid {proc.pid}: {base:.1f} MiB resident before the attack")
        rng = random.Random(23)
        total = 0
        peak = base
        per_round = max(1, args.connections // args.rounds)
        for r in range(args.rounds):
            keep: list = []
            total += attack(port, per_round, rng, keep)
            time.sleep(0.3)  # let the agent read what was sent
            peak = max(peak, rss_mib(proc.pid))
            try:
                ms = legitimate(port, secret)
                result = f"legitimate handshake {ms:.1f} ms"
            except Exception as e:  # noqa: BLE001
                ok = False
                result = f"LEGITIMATE HANDSHAKE FAILED: {e!r}"
            print(f"round {r + 1}: {len(keep)} unauthenticated connections open, "
                  f"agent {rss_mib(proc.pid):.1f} MiB; {result}")
            for s in keep:
                s.close()
        # Out of descriptors: lower the agent's limit, fill it, watch its CPU.
        open_fds = len(os.listdir(f"/proc/{proc.pid}/fd"))
        subprocess.run(["prlimit", f"--pid={proc.pid}", f"--nofile={open_fds + 8}:20000"],
                       check=True)
        hold = []
        for _ in range(64):
            try:
                hold.append(socket.create_connection(("127.0.0.1", port), timeout=2))
            except OSError:
                break
        c0, t0 = cpu_s(proc.pid), time.monotonic()
        time.sleep(2.0)
        cpu = (cpu_s(proc.pid) - c0) / (time.monotonic() - t0)
        for s in hold:
            s.close()
        subprocess.run(["prlimit", f"--pid={proc.pid}", "--nofile=20000:20000"], check=True)
        time.sleep(0.2)
        try:
            ms = legitimate(port, secret)
            after = f"legitimate handshake after {ms:.1f} ms"
        except Exception as e:  # noqa: BLE001
            ok = False
            after = f"LEGITIMATE HANDSHAKE FAILED: {e!r}"
        print(f"descriptors exhausted ({len(hold)} connections held): agent CPU "
              f"{cpu * 100:.1f}% of a core; descriptors back: {after}")
        grew = peak - base
        print(f"summary: {total} unauthenticated attack connections, peak "
              f"{peak:.1f} MiB resident (+{grew:.1f} MiB), "
              f"{'every legitimate handshake succeeded' if ok else 'FAILURES'}")
        if grew > 64:
            ok = False
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        os.unlink(secret_file)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
