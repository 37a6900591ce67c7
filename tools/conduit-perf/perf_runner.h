// Runs one conduit-perf session (client or server) against the local conduitd.
//
// Memory: one MR per QP (buffer_layout.h).
//
// Per size every sender posts exactly the same number of messages on every QP
// (-n, or in -D mode as many as the busiest QP had posted at the deadline,
// rounded up to the completion interval), so the receiver of SENDs and the
// target of WRITEs know what to expect and check.
#pragma once

#include <cstdint>
#include <cstdio>

#include "buffer_layout.h"
#include "perf_options.h"
#include "tcp_line_channel.h"

namespace conduit::perf {

// Returns the process exit status: 0 ok, 1 failure (message on stderr).
int run_session(const PerfOptions& options);

// The TCP connection of the out-of-band exchange: the server waits four -W for a
// client (and says so on stderr); a client retries a refused connection as long.
// false with the reason printed on stderr.
bool open_exchange_channel(const PerfOptions& options, TcpLineChannel& ch);

}  // namespace conduit::perf
