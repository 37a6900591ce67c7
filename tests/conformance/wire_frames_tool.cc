// Helper for the wire conformance test (wire_conformance.py):
//
//   wire_frames_tool emit FILE.pcap   writes one frame of every kind the stack
//                                     emits and prints, per frame, a line
//                                     "INDEX OPCODE DESTQP PSN NAME" (decimal)
//   wire_frames_tool parse FILE.pcap [PMTU]
//                                     prints, per frame, "INDEX accept" or
//                                     "INDEX drop REASON" from parse_frame()
//                                     with default options and PMTU (4096)
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "pcap_file.h"
#include "wire/frame.h"
#include "wire/psn.h"

using namespace conduit::wire;
using conduit::wire::test::Frame;

namespace {

struct Emitted {
  Frame frame;
  RoceHeader hdr;
  std::string name;
};

FrameAddr addr(bool vlan) {
  FrameAddr a;
  a.dst_mac = {0x02, 0x00, 0x00, 0x00, 0x00, 0x02};
  a.src_mac = {0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
  a.has_vlan = vlan;
  a.vlan_tci = 0x6064;
  a.src_ip = 0xC6120001;  // 198.18.0.1 -> 198.18.0.2 (benchmarking range)
  a.dst_ip = 0xC6120002;
  a.src_port = udp_sport_for_qp(0x11, 0xABC);
  a.dscp = 26;
  a.ecn = kEcnEct0;
  return a;
}

int emit(const std::string& path) {
  std::vector<Emitted> out;
  uint32_t psn = 0xFFFFF0;  // crosses the 24-bit wrap
  auto add = [&](Opcode op, size_t payload_len, const std::string& name, bool vlan = false,
                 Aeth aeth = Aeth::ack(7)) {
    RoceHeader h;
    h.bth.opcode = static_cast<uint8_t>(op);
    h.bth.dest_qp = 0x000ABC;
    h.bth.psn = psn;
    psn = psn_next(psn);
    h.bth.ack_req = h.info().has(kOpLast) && h.info().has(kOpRequest);
    h.reth = Reth{0x00007F0012345000ull, 0x1234, static_cast<uint32_t>(payload_len)};
    h.aeth = aeth;
    h.imm = 0xDEADBEEF;
    h.ieth_rkey = 0x4321;
    h.atomic = AtomicEth{0x1000, 0x55, 1, 2};
    h.atomic_ack_orig = 0x0102030405060708ull;
    if (op == Opcode::kCnp) h = make_cnp_header(0x000011);
    std::vector<uint8_t> payload(payload_len);
    for (size_t i = 0; i < payload_len; ++i) payload[i] = static_cast<uint8_t>(i * 13 + 1);
    const FrameAddr a = addr(vlan);
    Frame f(frame_bytes(h, payload_len, vlan));
    const BuildResult r = build_frame(f, a, h, PayloadGather(payload));
    if (!r.ok()) {
      std::fprintf(stderr, "build %s: %s\n", name.c_str(), build_status_name(r.status));
      std::exit(1);
    }
    out.push_back({f, h, name});
  };
  constexpr size_t kPmtu = 256;  // the first/middle packets carry exactly this
  add(Opcode::kSendFirst, kPmtu, "send_first");
  add(Opcode::kSendMiddle, kPmtu, "send_middle");
  add(Opcode::kSendLast, 5, "send_last");
  add(Opcode::kSendLastImm, 6, "send_last_imm");
  add(Opcode::kSendOnly, 0, "send_only_empty");
  add(Opcode::kSendOnly, 7, "send_only");
  add(Opcode::kSendOnly, 64, "send_only_vlan", true);
  add(Opcode::kSendOnlyImm, 64, "send_only_imm");
  add(Opcode::kWriteFirst, kPmtu, "write_first");
  add(Opcode::kWriteMiddle, kPmtu, "write_middle");
  add(Opcode::kWriteLast, 1, "write_last");
  add(Opcode::kWriteLastImm, 2, "write_last_imm");
  add(Opcode::kWriteOnly, 3, "write_only");
  add(Opcode::kWriteOnlyImm, 4, "write_only_imm");
  add(Opcode::kWriteOnlyImm, 0, "write_only_imm_empty");
  add(Opcode::kReadRequest, 0, "read_request");
  add(Opcode::kReadResponseFirst, kPmtu, "read_response_first");
  add(Opcode::kReadResponseMiddle, kPmtu, "read_response_middle");
  add(Opcode::kReadResponseLast, 9, "read_response_last");
  add(Opcode::kReadResponseOnly, 10, "read_response_only");
  add(Opcode::kAcknowledge, 0, "ack");
  add(Opcode::kAcknowledge, 0, "nak_psn_sequence_error", false,
      Aeth::nak(7, NakCode::kPsnSequenceError));
  add(Opcode::kAcknowledge, 0, "nak_invalid_request", false,
      Aeth::nak(7, NakCode::kInvalidRequest));
  add(Opcode::kAcknowledge, 0, "nak_remote_access_error", false,
      Aeth::nak(7, NakCode::kRemoteAccessError));
  add(Opcode::kAcknowledge, 0, "nak_remote_operational_error", false,
      Aeth::nak(7, NakCode::kRemoteOperationalError));
  add(Opcode::kAcknowledge, 0, "rnr_nak", false, Aeth::rnr_nak(7, 14));
  add(Opcode::kAtomicAcknowledge, 0, "atomic_ack");
  add(Opcode::kCompareSwap, 0, "compare_swap");
  add(Opcode::kFetchAdd, 0, "fetch_add");
  add(Opcode::kSendLastInvalidate, 11, "send_last_invalidate");
  add(Opcode::kSendOnlyInvalidate, 12, "send_only_invalidate");
  add(Opcode::kCnp, 0, "cnp");

  std::vector<Frame> frames;
  for (size_t i = 0; i < out.size(); ++i) {
    frames.push_back(out[i].frame);
    const Bth& b = out[i].hdr.bth;
    std::printf("%zu %u %u %u %u %u %s\n", i, b.opcode, b.dest_qp, b.psn,
                unsigned{out[i].hdr.aeth.syndrome}, out[i].hdr.aeth.msn, out[i].name.c_str());
  }
  return conduit::wire::test::write_pcap(path, frames) ? 0 : 1;
}

int parse(const std::string& path, uint32_t pmtu_bytes) {
  std::vector<Frame> frames;
  std::string error;
  if (!conduit::wire::test::read_pcap(path, frames, error)) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  for (size_t i = 0; i < frames.size(); ++i) {
    ParsedFrame pf;
    ParseOptions opt;
    opt.pmtu_bytes = pmtu_bytes;
    const DropReason r = parse_frame(frames[i], opt, pf);
    if (r == DropReason::kNone) {
      std::printf("%zu accept\n", i);
    } else {
      std::printf("%zu drop %s\n", i, drop_reason_name(r));
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "emit") return emit(argv[2]);
  if ((argc == 3 || argc == 4) && std::string(argv[1]) == "parse") {
    return parse(argv[2], argc == 4 ? static_cast<uint32_t>(std::stoul(argv[3])) : 4096);
  }
  std::fprintf(stderr, "usage: %s emit|parse FILE.pcap\n", argv[0]);
  return 2;
}
