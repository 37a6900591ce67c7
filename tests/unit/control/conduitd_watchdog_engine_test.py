#!/usr/bin/env python3
"""A hung engine thread must stop conduitd's watchdog pings (so that systemd
restarts the daemon), and pings resume when the engine runs again.

Starts conduitd with a NOTIFY_SOCKET and WATCHDOG_USEC of its own, freezes
only the engine thread (named "conduit-engine") with ptrace
(PTRACE_SEIZE + PTRACE_INTERRUPT stop one thread, not the process), checks
that no WATCHDOG=1 arrives for several ping intervals while the main and
control threads keep running, then detaches and expects the pings back.

Usage: conduitd_watchdog_engine_test.py CONDUITD
Exit 77 (skipped) when ptrace is not permitted here.
"""
import ctypes
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

CONDUITD = sys.argv[1]

CONFIG = """version: 1
daemon:
  control_socket: {sock}
  log_level: info
port:
  device: "net_null{uniq}"
  eal_args: [--no-huge, -m, "256", --no-pci, --no-shconf, --no-telemetry, --file-prefix=wdeng{uniq}]
  address: 198.18.0.1/24
"""

PTRACE_DETACH = 17
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
WALL = 0x40000000
WATCHDOG_USEC = 400_000  # conduitd checks every 200 ms

libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def ptrace(req, tid):
    if libc.ptrace(req, tid, None, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"ptrace({req:#x}, {tid}): {os.strerror(err)}")


def pings_within(notify, seconds, enough=None):
    """Counts WATCHDOG=1 datagrams received within `seconds` (returns early once
    `enough` arrived: a loaded machine may start or resume the daemon slowly, and
    a positive check needs only the count, not the speed)."""
    count = 0
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or (enough is not None and count >= enough):
            return count
        notify.settimeout(left)
        try:
            data = notify.recv(4096).decode()
        except socket.timeout:
            return count
        if "WATCHDOG=1" in data.split("\n"):
            count += 1
        if "READY=1" in data.split("\n"):
            print("notify: READY")


def engine_tid(pid, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/comm") as f:
                    if f.read().strip() == "conduit-engine":
                        return int(tid)
            except FileNotFoundError:
                pass
        time.sleep(0.05)
    fail("no thread named conduit-engine")


def main(work):
    sock = os.path.join(work, "conduitd.sock")
    cfg = os.path.join(work, "conduitd.yaml")
    with open(cfg, "w") as f:
        f.write(CONFIG.format(sock=sock, uniq=os.getpid()))
    notify_path = os.path.join(work, "notify.sock")
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(notify_path)
    env = dict(os.environ, NOTIFY_SOCKET=notify_path, WATCHDOG_USEC=str(WATCHDOG_USEC))
    env.pop("WATCHDOG_PID", None)
    log = open(os.path.join(work, "conduitd.log"), "w+")
    proc = subprocess.Popen([CONDUITD, "--config", cfg], env=env, stdout=log, stderr=log)
    frozen = None
    try:
        if pings_within(notify, 20.0, enough=3) < 3:
            fail("fewer than 3 watchdog pings in 20 s from a healthy daemon")
        tid = engine_tid(proc.pid)
        try:
            ptrace(PTRACE_SEIZE, tid)
        except OSError as e:
            print(f"SKIP: cannot ptrace the engine thread here ({e})")
            sys.exit(77)
        frozen = tid
        ptrace(PTRACE_INTERRUPT, tid)
        os.waitpid(tid, WALL)  # the engine thread is stopped now
        # A ping may still be on its way from the check just before the stop.
        pings_within(notify, 0.5)
        n = pings_within(notify, 2.0)  # ten ping intervals
        if proc.poll() is not None:
            fail("conduitd exited while its engine thread was stopped")
        if n != 0:
            fail(f"{n} watchdog pings while the engine thread was stopped")
        print("no watchdog pings while the engine thread was stopped: OK")
        ptrace(PTRACE_DETACH, tid)
        frozen = None
        if pings_within(notify, 20.0, enough=2) < 2:
            fail("the watchdog pings did not resume after the engine thread ran again")
        print("watchdog pings resumed: OK")

        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            fail("conduitd did not exit within 10 s of SIGTERM")
        if rc != 0:
            fail(f"conduitd exited with {rc} after SIGTERM")
        log.seek(0)
        text = log.read()
        if "engine thread not progressing" not in text or "watchdog pings resumed" not in text:
            fail("the log does not say that the engine stalled and recovered")
    finally:
        if frozen is not None:
            try:
                ptrace(PTRACE_DETACH, frozen)
            except OSError:
                pass
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.seek(0)
        print("---- conduitd log ----\n" + log.read())
    print("conduitd watchdog follows the engine loop: OK")


# the work folder (config, log, sockets) goes when the test ends, pass or fail
with tempfile.TemporaryDirectory(prefix="conduitd-wdeng-") as tmp:
    main(tmp)
