// conduit-perf --perftest: one session against a stock perftest tool (ib_send_bw,
// ib_write_bw, ib_read_bw) over perftest's own exchange (perftest_wire.h), either role.
//
// One QP, one MR (REMOTE_WRITE|REMOTE_READ: the peer writes into or reads from it), one size.
// The client drives the traffic (SEND, WRITE or READ, -n messages, -t in flight); the server
// of send_bw receives and counts, the server of write_bw/read_bw only answers the exchange
// and prints the client's report. Output: perftest's result line.
#pragma once

#include "perf_options.h"

namespace conduit::perf {

// Returns the process exit status: 0 ok, 1 failure (message on stderr).
int run_perftest_session(const PerfOptions& options);

}  // namespace conduit::perf
