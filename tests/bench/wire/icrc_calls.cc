// icrc_calls MODE PAYLOAD N: N ICRCs of one SEND_ONLY datagram with PAYLOAD
// bytes, for counting instructions per call under callgrind (deterministic:
// no timing, a fixed iteration count). MODE is v4 or v6 (one span: the whole
// datagram, as the frame builders and parse_frame pass it), or v4split or
// v6split (the IP+UDP headers and the UDP payload as two spans, as
// parse_roce and the GSI parser pass them when they are apart). The
// difference between two runs' totals over the difference in N is the cost
// of one call:
//   valgrind --tool=callgrind --callgrind-out-file=cg.1 icrc_calls v6 64 1000
//   valgrind --tool=callgrind --callgrind-out-file=cg.2 icrc_calls v6 64 11000
//   (Ir of cg.2 - Ir of cg.1) / 10000
// valgrind has no AVX-512, so under it the AVX (VEX) build of each path runs.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "wire/frame.h"
#include "wire/icrc.h"

using namespace conduit::wire;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: icrc_calls v4|v6|v4split|v6split PAYLOAD N\n");
    return 2;
  }
  const std::string mode = argv[1];
  const bool ipv6 = mode == "v6" || mode == "v6split";
  const bool split = mode == "v4split" || mode == "v6split";
  if (!ipv6 && mode != "v4" && mode != "v4split") {
    std::fprintf(stderr, "icrc_calls: unknown mode %s\n", argv[1]);
    return 2;
  }
  const size_t payload_bytes = std::strtoul(argv[2], nullptr, 10);
  const unsigned long n = std::strtoul(argv[3], nullptr, 10);

  std::mt19937 rng(1);
  std::vector<uint8_t> payload(payload_bytes);
  for (auto& b : payload) b = static_cast<uint8_t>(rng());
  RoceHeader h;
  h.bth.opcode = static_cast<uint8_t>(Opcode::kSendOnly);
  h.bth.dest_qp = 0xABC;
  h.bth.psn = 17;
  h.bth.ack_req = true;
  FrameAddr a;
  a.src_ip = 0xC6120001;
  a.dst_ip = 0xC6120002;
  a.src_port = udp_sport_for_qp(0x11, 0xABC);
  a.dscp = 26;
  a.ecn = kEcnEct0;
  if (ipv6) {
    a.ipv6 = true;
    a.src_ip6 = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xc0, 0, 0x11};
    a.dst_ip6 = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xc0, 0, 0x12};
    a.flow_label = flow_label_for_qp(0x11, 0xABC);
  }
  std::vector<uint8_t> f(frame_bytes(h, payload.size(), false, ipv6));
  build_frame(f, a, h, PayloadGather(payload));
  const std::span<const uint8_t> dgram(f.data() + kEthHeaderBytes,
                                       f.size() - kEthHeaderBytes - kIcrcBytes);
  const size_t headers = ipv6 ? 48 : 28;
  // The split's second span in a buffer of its own (not right after the first).
  const std::vector<uint8_t> rest(dgram.begin() + static_cast<std::ptrdiff_t>(headers),
                                  dgram.end());
  const std::span<const uint8_t> first = split ? dgram.first(headers) : dgram;
  const std::span<const uint8_t> second = split ? std::span<const uint8_t>(rest) : dgram.first(0);

  const uint32_t want = icrc_load(f.data() + f.size() - kIcrcBytes);
  uint32_t acc = 0;
  for (unsigned long i = 0; i < n; ++i) {
    const uint32_t crc = ipv6 ? icrc_ipv6(first, second) : icrc_ipv4(first, second);
    if (crc != want) {
      std::fprintf(stderr, "icrc_calls: wrong ICRC %08x, want %08x\n", crc, want);
      return 1;
    }
    acc += crc;
    asm volatile("" : "+r"(acc));
  }
  std::printf("%s %zu-byte payload, %zu-byte datagram: %lu calls, sum %08x\n", mode.c_str(),
              payload_bytes, dgram.size(), n, acc);
  return 0;
}
