// Fuzzes what conduit-perf accepts from a peer (exchange lines) and from its
// command line: anything must be rejected or accepted without crashing, and
// what is accepted must re-encode to the same meaning.
#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "exchange.h"
#include "perf_options.h"

namespace {

bool same_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace conduit::perf;
  const std::string_view in(reinterpret_cast<const char*>(data), size);

  Message m;
  if (parse_message(in, m)) {
    if (format_message(m) != in) std::abort();  // one canonical spelling
    RunReport r;
    if (parse_report(m, r)) {
      RunReport back;
      if (!parse_report(report_message(r), back) || !(back == r)) std::abort();
    }
  }

  QpRecord rec;
  if (parse_qp_record(in, rec) && !same_ignoring_case(format_qp_record(rec), in)) std::abort();

  TestParams p;
  std::string error;
  if (parse_params(in, p, error)) {
    TestParams back;
    if (!parse_params(format_params(p), back, error) || !(back == p)) std::abort();
    if (p.sizes.empty() || p.sizes.size() > kMaxSizes) std::abort();
  } else if (error.empty()) {
    std::abort();  // every rejection says why
  }

  // The command line: arguments separated by newlines.
  std::vector<std::string> args{"conduit-perf"};
  size_t start = 0;
  while (start <= in.size() && args.size() < 64) {
    const size_t nl = in.find('\n', start);
    args.emplace_back(in.substr(start, nl == std::string_view::npos ? nl : nl - start));
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  PerfOptions o;
  const ParseResult pr = parse_args(static_cast<int>(argv.size()), argv.data(), o);
  if (pr.ok && !o.help && !o.version) {
    if (o.sizes.empty()) std::abort();
    for (uint64_t s : o.sizes) {
      if (s == 0 || s > kMaxMessageBytes) std::abort();
    }
    if (o.qps == 0 || o.qps > kMaxQps) std::abort();
    if (o.post_list == 0) std::abort();  // -l 0 is taken as 1 or refused
    if (o.effective_cq_mod() == 0 || o.effective_cq_mod() > o.effective_tx_depth()) std::abort();
  } else if (!pr.ok && pr.error.empty()) {
    std::abort();
  }
  return 0;
}
