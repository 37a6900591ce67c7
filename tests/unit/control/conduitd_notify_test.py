#!/usr/bin/env python3
"""Starts conduitd with a NOTIFY_SOCKET of its own (as systemd would) and checks
the service protocol end to end: READY=1 with an honest STATUS, watchdog pings,
SIGHUP reload (valid and invalid file), conduitctl over the control socket,
and a clean SIGTERM exit.

Usage: conduitd_notify_test.py CONDUITD CONDUITCTL
"""
import json
import re
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

CONDUITD, CONDUITCTL = sys.argv[1], sys.argv[2]

CONFIG = """version: 1
daemon:
  control_socket: {sock}
  log_level: {level}
port:
  device: "net_null{uniq}"
  eal_args: [--no-huge, -m, "256", --no-pci, --no-shconf, --no-telemetry, --file-prefix=notify{uniq}]
  address: 198.18.0.1/24
"""


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def expect(notify, key, timeout_s=10.0):
    """Reads notify datagrams until one has `key`; returns its fields."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        notify.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            data = notify.recv(4096).decode()
        except socket.timeout:
            break
        fields = dict(line.split("=", 1) for line in data.split("\n") if "=" in line)
        print("notify:", fields)
        if key in fields:
            return fields
    fail(f"no {key} from conduitd within {timeout_s} s")


def ctl(sock, *args):
    r = subprocess.run([CONDUITCTL, "--socket", sock, *args], capture_output=True, text=True,
                       timeout=20)
    print(f"conduitctl {' '.join(args)} -> {r.returncode}\n{r.stdout}{r.stderr}")
    return r


def main(work):
    sock = os.path.join(work, "conduitd.sock")
    cfg = os.path.join(work, "conduitd.yaml")
    with open(cfg, "w") as f:
        f.write(CONFIG.format(sock=sock, level="info", uniq=os.getpid()))

    r = subprocess.run([CONDUITD, "--help"], capture_output=True, text=True)
    if r.returncode != 0 or "poll mode" not in r.stdout or "--check-config" not in r.stdout:
        fail("--help does not explain the options and the data plane")
    r = subprocess.run([CONDUITD, "--check-config", cfg], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"--check-config rejected a valid file: {r.stderr}")

    notify_path = os.path.join(work, "notify.sock")
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(notify_path)
    env = dict(os.environ, NOTIFY_SOCKET=notify_path, WATCHDOG_USEC="400000")
    env.pop("WATCHDOG_PID", None)
    log = open(os.path.join(work, "conduitd.log"), "w+")
    proc = subprocess.Popen([CONDUITD, "--config", cfg], env=env, stdout=log, stderr=log)
    try:
        ready = expect(notify, "READY")
        if "client(s)" not in ready.get("STATUS", ""):
            fail("STATUS does not report clients: " + ready.get("STATUS", ""))
        if not os.path.exists(sock):
            fail("READY=1 was sent before the control socket existed")
        expect(notify, "WATCHDOG", timeout_s=3)

        r = ctl(sock, "status")
        # The engine's line: lcore, idle mode, the port it drives, its line rate and link.
        if r.returncode != 0 or not re.search(
                r"engine:  running on lcore \d+, idle_mode (spin|adaptive); port \S+ \(\S+\), "
                r"[\d.]+/\d+, mac [0-9a-f:]{17}, mtu \d+, line rate \S+ \((port.line_rate|the port's speed|assumed: the port reports no speed)\), "
                r"link (up|down) \d+ Mb/s", r.stdout):
            fail("conduitctl status: " + r.stdout)
        r = ctl(sock, "stats", "--json")
        stats = json.loads(r.stdout)
        if stats.get("engine.attached") != 1 or "control.requests" not in stats:
            fail("stats --json lacks the expected counters")
        r = ctl(sock, "qps")
        if r.returncode != 0 or "(no QPs)" not in r.stdout:
            fail("conduitctl qps")

        # Valid reload: RELOADING=1, then READY=1 again; the new log level shows in the dump.
        with open(cfg, "w") as f:
            f.write(CONFIG.format(sock=sock, level="debug", uniq=os.getpid()))
        proc.send_signal(signal.SIGHUP)
        expect(notify, "RELOADING")
        expect(notify, "READY")
        r = ctl(sock, "policy", "show")
        if "log_level: debug" not in r.stdout:
            fail("the reloaded policy is not the running one")

        # A reload that changes the engine's sections (classes, CNPs, transport defaults)
        # goes to the running engine; one that changes the port says it needs a restart.
        with open(cfg, "w") as f:
            f.write(CONFIG.format(sock=sock, level="debug", uniq=os.getpid()) +
                    "transport:\n  retry_cnt: 3\n"
                    "traffic_classes:\n  - {name: bulk, default: true, dscp: 10}\n"
                    "cnp:\n  dscp: 40\n")
        r = ctl(sock, "policy", "reload")
        out = r.stdout + r.stderr
        if r.returncode != 0 or "traffic_classes, cnp and transport applied" not in out \
                or "restart" in out:
            fail("a reload that changes classes, cnp and transport must apply them: " + out)
        r = ctl(sock, "policy", "show")
        if "retry_cnt: 3" not in r.stdout or "name: bulk" not in r.stdout:
            fail("the reloaded classes and transport are not in the running policy")
        with open(cfg, "w") as f:
            f.write(CONFIG.format(sock=sock, level="debug", uniq=os.getpid()).replace(
                "  address: 198.18.0.1/24\n", "  address: 198.18.0.1/24\n  mtu: 9000\n"))
        r = ctl(sock, "policy", "reload")
        out = r.stdout + r.stderr
        if r.returncode != 0 or "after a restart: port.mtu" not in out:
            fail("a reload that changes port.mtu must say it needs a restart: " + out)

        # Invalid reload: reported, the daemon keeps running with the old policy.
        with open(cfg, "w") as f:
            f.write("version: 1\nport: [\n")
        proc.send_signal(signal.SIGHUP)
        expect(notify, "RELOADING")
        expect(notify, "READY")
        if proc.poll() is not None:
            fail("conduitd exited on an invalid reload")
        r = ctl(sock, "policy", "reload")
        if r.returncode == 0 or "running policy stays" not in r.stderr:
            fail("policy reload of an invalid file must fail and say the old policy stays")
        r = ctl(sock, "policy", "show")
        if "log_level: debug" not in r.stdout:
            fail("an invalid reload replaced the running policy")

        proc.send_signal(signal.SIGTERM)
        expect(notify, "STOPPING")
        try:
            rc = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            fail("conduitd did not exit within 10 s of SIGTERM")
        if rc != 0:
            fail(f"conduitd exited with {rc} after SIGTERM")
        if os.path.exists(sock):
            fail("the control socket was left behind")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.seek(0)
        print("---- conduitd log ----\n" + log.read())
    print("conduitd notify protocol: OK")


# the work folder (config, log, sockets) goes when the test ends, pass or fail
with tempfile.TemporaryDirectory(prefix="conduitd-notify-") as tmp:
    main(tmp)
