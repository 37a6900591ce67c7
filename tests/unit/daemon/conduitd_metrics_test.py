#!/usr/bin/python3
"""conduitd's Prometheus endpoint end to end, no root needed.

A conduitd on a net_ring port with daemon.metrics_address on loopback; two
conduit-perf clients move data through it (the engine's host-local path)
while the test scrapes /metrics. The page must parse with the Prometheus
project's own Python parser (python3-prometheus-client), agree with
`conduitctl stats --json` and `conduitctl qps --json`, and survive hostile
clients (garbage, huge heads, idle connections, a flood of connections). A
second daemon on the same metrics port must refuse to start, saying why.

Usage: conduitd_metrics_test.py CONDUITD CONDUITCTL CONDUIT_PERF
"""
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

CONDUITD, CONDUITCTL, PERF = sys.argv[1:4]
ADDR = "198.18.9.1"
UNIQ = f"{os.getpid()}"

CONFIG = """version: 1
daemon:
  control_socket: {sock}
  lcores: [0]
  metrics_address: 127.0.0.1:{mport}
port:
  device: net_ring_m{uniq}{n}
  eal_args: [--no-huge, -m, "512", --no-pci, --no-shconf, --no-telemetry, --file-prefix=metrics{uniq}{n}]
  address: {addr}/24
"""

procs = []


def fail(msg, log=None):
    print("FAIL:", msg)
    if log and os.path.exists(log):
        print("--- conduitd log (tail)")
        with open(log) as f:
            print("".join(f.readlines()[-30:]))
    for p in procs:
        if p.poll() is None:
            p.kill()
    sys.exit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_daemon(work, mport, n):
    sock = os.path.join(work, f"c{n}.sock")
    cfg = os.path.join(work, f"c{n}.yaml")
    log = os.path.join(work, f"c{n}.log")
    with open(cfg, "w") as f:
        f.write(CONFIG.format(sock=sock, mport=mport, uniq=UNIQ, n=n, addr=ADDR))
    p = subprocess.Popen([CONDUITD, "--config", cfg], stdout=open(log, "w"), stderr=subprocess.STDOUT)
    procs.append(p)
    return p, sock, log


def ctl(sock, *args):
    return subprocess.run([CONDUITCTL, "--socket", sock, *args], check=True, capture_output=True,
                          text=True, timeout=30).stdout


def scrape(mport):
    with urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=10) as r:
        ctype = r.headers["Content-Type"]
        return ctype, r.read().decode()


def raw(mport, data, timeout=10.0):
    """Sends `data`, returns everything the server sends until it closes."""
    with socket.create_connection(("127.0.0.1", mport), timeout=timeout) as s:
        try:
            s.sendall(data)
        except OSError:
            pass
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            out += chunk
        return out


def families(text):
    fams = {}
    for fam in text_string_to_metric_families(text):  # raises on a malformed page
        if fam.name in fams:
            raise ValueError(f"family {fam.name} declared twice")
        fams[fam.name] = fam
    return fams


def main(work):
    mport = free_port()
    d, sock, log = start_daemon(work, mport, 0)
    for _ in range(100):
        if os.path.exists(sock):
            break
        if d.poll() is not None:
            fail(f"conduitd exited with {d.returncode}", log)
        time.sleep(0.1)
    else:
        fail("conduitd did not open its socket", log)
    # The control socket is bound before the start-up lines are logged, so
    # give the log a moment (a sanitizer build is slow to get there).
    want = f"Prometheus endpoint on http://127.0.0.1:{mport}/metrics"
    for _ in range(100):
        with open(log) as f:
            if want in f.read():
                break
        if d.poll() is not None:
            fail(f"conduitd exited with {d.returncode}", log)
        time.sleep(0.1)
    else:
        fail("the log does not say where the endpoint listens", log)

    # An idle daemon: a valid page, with the build info and the port's counters.
    ctype, text = scrape(mport)
    if ctype != "text/plain; version=0.0.4; charset=utf-8":
        fail(f"content type {ctype!r}")
    fams = families(text)
    for name, kind in [("conduit_build_info", "gauge"), ("conduit_port_rx_packets", "counter"),
                       ("conduit_engine_loops", "counter"), ("conduit_port_mbufs_free", "gauge"),
                       ("conduit_control_qps", "gauge"), ("conduit_uptime_s", "gauge"),
                       ("conduit_qp_info", "gauge")]:
        if name not in fams or fams[name].type != kind:
            fail(f"{name}: missing or not a {kind} ({fams.get(name) and fams[name].type})")
    version = fams["conduit_build_info"].samples[0].labels.get("version", "")
    if not version or version not in ctl(sock, "status"):
        fail(f"conduit_build_info version {version!r} is not conduitctl status's")

    # Traffic through the daemon; scrape while it runs.
    tcp = random.randint(20000, 40000)
    server = subprocess.Popen([PERF, "write_bw", "-S", sock, "-x", ADDR, "-p", str(tcp), "-W", "30",
                               "-q", "4", "-s", "65536", "-D", "4"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    procs.append(server)
    time.sleep(0.3)
    client = subprocess.Popen([PERF, "write_bw", "127.0.0.1", "-S", sock, "-x", ADDR, "-p", str(tcp),
                               "-W", "30", "-q", "4", "-s", "65536", "-D", "4"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    procs.append(client)
    deadline = time.monotonic() + 20
    qps = []
    while time.monotonic() < deadline:
        qps = [q for q in json.loads(ctl(sock, "qps", "--json")) if q["state"] == "RTS"]
        if len(qps) >= 8 and all(q["tx_bytes"] + q["rx_bytes"] > 0 for q in qps):
            break
        time.sleep(0.2)
    else:
        fail(f"8 QPs in RTS moving data did not appear: {qps}", log)
    _, text = scrape(mport)
    stats = json.loads(ctl(sock, "stats", "--json"))
    fams = families(text)

    # Every daemon counter is on the page, with a value no later than conduitctl's.
    samples = {s.name: s for f in fams.values() for s in f.samples}
    checked = 0
    for key, value in stats.items():
        if not isinstance(value, int):
            continue
        gauge = ("conduit_" + key.replace(".", "_").replace("-", "_")) in samples
        name = "conduit_" + key.replace(".", "_").replace("-", "_") + ("" if gauge else "_total")
        if name not in samples:
            fail(f"stats key {key} is not on the page as {name}")
        scraped = samples[name].value
        fam_type = fams[name[:-len("_total")] if not gauge else name].type
        if fam_type != ("gauge" if gauge else "counter"):
            fail(f"{name}: type {fam_type}")
        if not gauge and scraped > value:
            fail(f"counter {key}: scraped {scraped} > {value} read after it")
        checked += 1
    if checked < 100:
        fail(f"only {checked} counters compared")
    if samples["conduit_port_tx_packets_total"].value == 0 and samples["conduit_engine_loopback_frames_total"].value == 0:
        fail("no traffic counted on the page")

    # One conduit_qp_info per QP, labelled as conduitctl qps shows it.
    info = {int(s.labels["qpn"]): s.labels for s in fams["conduit_qp_info"].samples}
    by_qpn = {q["qpn"]: q for q in qps}
    for qpn, q in by_qpn.items():
        if qpn not in info:
            fail(f"QP {qpn} has no conduit_qp_info")
        l = info[qpn]
        if l["state"] != "RTS" or l["peer"] != q["peer"] or int(l["peer_qpn"]) != q["dest_qpn"] or \
                int(l["pid"]) != q["pid"] or l["class"] != q["class"]:
            fail(f"QP {qpn}: labels {l} do not match conduitctl qps {q}")
    tx = {int(s.labels["qpn"]): s.value for s in fams["conduit_qp_tx_bytes"].samples}
    if sum(tx.get(qpn, 0) for qpn in by_qpn) == 0:
        fail(f"no QP sent bytes according to the page: {tx}")
    if fams["conduit_qp_series_omitted"].samples[0].value != 0:
        fail("QPs were left out under the default daemon.metrics_max_qps")

    # daemon.metrics_max_qps, applied on reload: 3 QPs keep their series, the rest are counted.
    cfg = os.path.join(work, "c0.yaml")
    with open(cfg) as f:
        text = f.read()
    with open(cfg, "w") as f:
        f.write(text.replace("  metrics_address:", "  metrics_max_qps: 3\n  metrics_address:", 1))
    ctl(sock, "policy", "reload")
    _, text = scrape(mport)
    fams = families(text)
    kept = [s.labels["qpn"] for s in fams["conduit_qp_info"].samples]
    omitted = fams["conduit_qp_series_omitted"].samples[0].value
    if len(kept) != 3 or omitted < 5:
        fail(f"metrics_max_qps 3: {len(kept)} QPs on the page, {omitted} omitted (8 or more exist)")
    for fam in ("conduit_qp_tx_bytes", "conduit_qp_retransmits"):
        if sorted(s.labels["qpn"] for s in fams[fam].samples) != sorted(kept):
            fail(f"metrics_max_qps 3: {fam} is not for the same QPs as conduit_qp_info ({kept})")

    for p in (client, server):
        out, _ = p.communicate(timeout=60)
        if p.returncode != 0:
            fail(f"conduit-perf failed:\n{out}", log)

    # Hostile clients: each gets its status (or is closed), the daemon keeps serving.
    cases = [
        (b"GET /metrics HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 20000 + b"\r\n\r\n", b"HTTP/1.1 431 "),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(64), b"HTTP/1.1 400 "),
        (b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nabcd", b"HTTP/1.1 405 "),
        (b"GET /../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n", b"HTTP/1.1 404 "),
        (b"GET /metrics HTTP/3.0\r\nHost: x\r\n\r\n", b"HTTP/1.1 505 "),
        (b"GET /metrics\r\n\r\n", b"HTTP/1.1 400 "),
    ]
    for req, want in cases:
        got = raw(mport, req)
        if not got.startswith(want):
            fail(f"{req[:40]!r}...: answered {got[:60]!r}, wanted {want!r}", log)
    # An idle connection is closed at the 5 s deadline; a flood beyond 16 gets 503.
    t0 = time.monotonic()
    idle = [socket.create_connection(("127.0.0.1", mport)) for _ in range(16)]
    time.sleep(0.3)
    flood = raw(mport, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    if not flood.startswith(b"HTTP/1.1 503 "):
        fail(f"the 17th connection was answered {flood[:60]!r}, wanted 503", log)
    for s in idle:
        s.settimeout(15)
        if s.recv(1) != b"":
            fail("an idle connection got data")
        s.close()
    waited = time.monotonic() - t0
    if waited > 12:
        fail(f"idle connections were held {waited:.1f} s (deadline 5 s)")
    _, text = scrape(mport)
    fams = families(text)
    got = {s.name: s.value for f in fams.values() for s in f.samples}
    for name, least in [("conduit_metrics_scrapes_total", 3), ("conduit_metrics_bad_requests_total", 5),
                        ("conduit_metrics_not_found_total", 1),
                        ("conduit_metrics_refused_connections_total", 1),
                        ("conduit_metrics_timeouts_total", 16)]:
        if got.get(name, -1) < least:
            fail(f"{name} = {got.get(name)}, expected at least {least}")
    st = json.loads(ctl(sock, "stats", "--json"))
    if st.get("metrics.scrapes", 0) < 3:  # idle, under traffic, after the hostile clients
        fail(f"conduitctl stats metrics.scrapes = {st.get('metrics.scrapes')}")

    # A second daemon on the same metrics port refuses to start and says why.
    d2, sock2, log2 = start_daemon(work, mport, 1)
    try:
        rc = d2.wait(timeout=30)
    except subprocess.TimeoutExpired:
        fail("a second conduitd on the same metrics port kept running", log2)
    with open(log2) as f:
        text2 = f.read()
    if rc == 0 or f"metrics endpoint 127.0.0.1:{mport}" not in text2 or \
            "daemon.metrics_address" not in text2:
        fail(f"second daemon: exit {rc}, log:\n{text2[-1500:]}")
    if os.path.exists(sock2):
        fail("the refused daemon left its control socket behind")

    d.terminate()
    if d.wait(timeout=30) != 0:
        fail(f"conduitd exit status {d.returncode}", log)
    try:
        socket.create_connection(("127.0.0.1", mport), timeout=2).close()
        fail("the metrics port is still open after conduitd stopped")
    except OSError:
        pass
    print(f"OK: {checked} counters agree, {len(by_qpn)} QPs on the page, hostile clients refused")


if __name__ == "__main__":
    # the work folder (configs, logs, sockets) goes when the test ends, pass or fail,
    # after the daemons it started are gone
    with tempfile.TemporaryDirectory(prefix="conduit-metrics-") as tmp:
        try:
            main(tmp)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
