// conduit-perf --perftest: one session against a stock perftest tool (ib_send_bw,
// ib_write_bw, ib_read_bw, ib_send_lat, ib_write_lat, ib_read_lat) over perftest's own exchange
// (perftest_wire.h, whose PerftestPlan orders the steps), either role.
//
// -q QPs (bandwidth tests; latency: one) on one CQ, one MR (REMOTE_WRITE|REMOTE_READ) in two
// halves: ours to send from, and the one every QP advertises, which the peer writes into or
// reads from. Bandwidth: one size (-s) or perftest's -a sweep; the client drives the traffic
// (SEND, WRITE or READ, -n messages per QP, -t in flight per QP; #iterations, as perftest
// prints it, counts all QPs), the server of send_bw receives and counts, the server of
// write_bw/read_bw only answers the exchange and prints the client's report. Latency: one size
// or perftest's -a (every size in turn, as perftest_plan orders them), a ping-pong of -n messages
// each way per size (write_lat: WRITEs whose last byte counts the round trips, polled in
// memory; send_lat: SENDs into the size's posted receives; read_lat: the client's READs), or
// with -D (one size) for that long, with perftest's margins, and its duration report (the
// average over the sampled part); both sides print (read_lat: the client). Output: perftest's
// result lines.
//
// -R (perftest's rdma_cm mode): no TCP. The exchange runs as SENDs on an rdma_cm connection of
// its own, made first (the server listens on -p through the IB CM, the client connects to the
// server's RoCE address), with the same steps and binary connection records
// (perftest_wire.h); after the MTU, a handshake of zeros, one rdma_cm connection per test QP
// (a client retries while perftest's server has no listener up yet), another handshake of
// zeros, then the plan as over TCP without the manual connect and without the closing "done".
#pragma once

#include "perf_options.h"

namespace conduit::perf {

// Returns the process exit status: 0 ok, 1 failure (message on stderr).
int run_perftest_session(const PerfOptions& options);

}  // namespace conduit::perf
