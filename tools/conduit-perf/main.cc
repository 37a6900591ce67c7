// conduit-perf: perftest-style bandwidth and latency tests over conduitd.
// perf_options.h documents the command line, exchange.h the TCP exchange,
// perf_runner.h the buffers and the test loops.
#include <conduit/conduit.h>

#include <cstdio>
#include <string>

#include "perf_options.h"
#include "perf_runner.h"

int main(int argc, char** argv) {
  conduit::perf::PerfOptions options;
  const auto parsed = conduit::perf::parse_args(argc, argv, options);
  if (!parsed.ok) {
    std::fprintf(stderr, "conduit-perf: %s\n", parsed.error.c_str());
    return conduit::perf::parse_exit_status(parsed, options);  // 2; --perftest: 1, as perftest
  }
  for (const std::string& note : parsed.notes) {
    std::fprintf(stderr, "conduit-perf: note: %s\n", note.c_str());
  }
  if (options.help) {
    std::fputs(conduit::perf::usage_text().c_str(), stdout);
    return conduit::perf::parse_exit_status(parsed, options);  // 0; --perftest: 1, as perftest
  }
  if (options.version) {
    std::printf("conduit-perf (libconduit %s)\n", conduit_version());
    return conduit::perf::parse_exit_status(parsed, options);
  }
  return conduit::perf::run_session(options);
}
