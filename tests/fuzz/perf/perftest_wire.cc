// Fuzzes what conduit-perf --perftest accepts from a perftest peer: the version, MTU, 108-byte
// connection record (and -R's 56-byte binary one) and the 5-field report, each taken from the
// front of the input. Anything must be rejected or accepted without crashing; what is accepted
// must re-encode to itself.
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "perftest_wire.h"

namespace {

template <size_t N>
std::array<uint8_t, N> front(const uint8_t* data, size_t size) {
  std::array<uint8_t, N> a{};
  std::memcpy(a.data(), data, std::min(size, N));
  return a;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace conduit::perf;

  std::string version;
  const auto v = front<kPerftestVersionBytes>(data, size);
  if (parse_perftest_version(v, version) && (version.empty() || version.size() > v.size())) {
    std::abort();
  }
  // A conduit-perf peer's run after the NUL: what parses re-encodes to the same bytes.
  if (const auto shape = parse_perftest_run_shape(v);
      shape && perftest_version_message(*shape) != v) {
    std::abort();
  }

  uint32_t mtu = 0;
  const auto m = front<2>(data, size);
  if (parse_perftest_mtu(m, mtu) && perftest_mtu_message(mtu) != m) std::abort();

  QpRecord rec;
  const auto r = front<kPerftestRecordBytes>(data, size);
  if (parse_perftest_record(r, rec)) {
    QpRecord back;
    if (!parse_perftest_record(perftest_record(rec), back) || !(back == rec)) std::abort();
  }

  const auto cm = front<kPerftestCmRecordBytes>(data, size);
  if (parse_perftest_cm_record(cm, rec)) {
    QpRecord back;
    if (!parse_perftest_cm_record(perftest_cm_record(rec), back) || !(back == rec)) std::abort();
  }

  std::array<PerftestU64, kPerftestReportFields> fields{};
  for (size_t i = 0; i < kPerftestReportFields; ++i) {
    const size_t at = i * 8;
    if (at < size) fields[i] = front<8>(data + at, size - at);
  }
  PerftestReport rep;
  if (parse_perftest_report(fields, rep)) {
    if (rep.size_bytes == 0 || !std::isfinite(rep.bw_avg)) std::abort();
    PerftestReport back;
    if (!parse_perftest_report(perftest_report_messages(rep), back) ||
        back.size_bytes != rep.size_bytes || back.iterations != rep.iterations) {
      std::abort();
    }
  }
  return 0;
}
