// Helper for the wire conformance test (wire_conformance.py):
//
//   wire_frames_tool emit FILE.pcap   writes one frame of every kind the stack
//                                     emits and prints, per frame, a line
//                                     "INDEX OPCODE DESTQP PSN SYNDROME MSN NAME"
//                                     (decimal); the last ones are written by
//                                     a queue pair's fused datapath
//                                     (Qp::poll_tx_frame), not build_frame()
//   wire_frames_tool parse FILE.pcap [PMTU]
//                                     prints, per frame, "INDEX accept" or
//                                     "INDEX drop REASON" from parse_frame()
//                                     with default options and PMTU (4096)
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "pcap_file.h"
#include "transport/heap_memory_regions.h"
#include "transport/qp.h"
#include "wire/frame.h"
#include "wire/psn.h"

using namespace conduit::wire;
namespace tp = conduit::transport;
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

  // The frames a QP writes itself (Qp::poll_tx_frame: template headers,
  // BTH/ImmDt/AETH words, inline payload copy, ICRC): SEND only, SEND only
  // with immediate over VLAN (pad bytes), and the ACK the peer answers with.
  {
    constexpr uint64_t kBase = 0x10000;
    struct Side {
      tp::HeapMemoryRegions mrs;
      tp::Qp qp;
      explicit Side(uint32_t qpn) : qp(cfg(qpn), mrs) {
        mrs.add(kBase, 1 << 16, tp::kAccessLocalWrite);
      }
      static tp::QpConfig cfg(uint32_t qpn) {
        tp::QpConfig c;
        c.qpn = qpn;
        return c;
      }
    };
    auto bring_up = [](tp::Qp& qp, uint32_t remote, uint32_t psn0) {
      tp::QpAttr at;
      at.pmtu_bytes = 4096;
      at.dest_qpn = remote;
      at.rq_psn = at.sq_psn = psn0;
      at.state = tp::QpState::kInit;
      qp.modify(at, tp::kAttrState);
      at.state = tp::QpState::kRtr;
      qp.modify(at, tp::kAttrState | tp::kAttrPathMtu | tp::kAttrDestQpn | tp::kAttrRqPsn |
                        tp::kAttrMaxDestRdAtomic | tp::kAttrMinRnrTimer);
      at.state = tp::QpState::kRts;
      qp.modify(at, tp::kAttrState | tp::kAttrSqPsn | tp::kAttrTimeout | tp::kAttrRetryCnt |
                        tp::kAttrRnrRetry | tp::kAttrMaxRdAtomic);
    };
    Side a(0x11), b(0xABC);
    bring_up(a.qp, 0xABC, 0xFFFFFE);  // the QP's PSNs cross the 24-bit wrap too
    bring_up(b.qp, 0x11, 0xFFFFFE);
    for (size_t i = 0; i < 64; ++i) a.mrs.region(0).bytes[i] = static_cast<uint8_t>(i * 7 + 3);
    tp::RecvWr rr;
    rr.sge[0] = tp::Sge{kBase, 256, 0x100};
    rr.num_sge = 1;
    b.qp.post_recv(rr);
    b.qp.post_recv(rr);
    auto take = [&](Side& from, Side& to, const FrameTemplate& t, const std::string& name) {
      Frame f(512);
      const BuildResult r = from.qp.poll_tx_frame(0, t, f);
      ParsedFrame pf;
      if (!r.ok() || r.len_bytes == 0 ||
          parse_frame(std::span<const uint8_t>(f.data(), r.len_bytes), ParseOptions{}, pf) !=
              DropReason::kNone) {
        std::fprintf(stderr, "fused %s: not written or not accepted\n", name.c_str());
        std::exit(1);
      }
      f.resize(r.len_bytes);
      RoceView v;
      parse_frame(f, ParseOptions{}, v);
      to.qp.on_packet(0, v);
      out.push_back({f, pf.hdr, name});
    };
    const FrameTemplate ta = make_frame_template(addr(false));
    const FrameTemplate ta_vlan = make_frame_template(addr(true));
    FrameAddr back = addr(false);
    std::swap(back.src_ip, back.dst_ip);
    std::swap(back.src_mac, back.dst_mac);
    back.src_port = udp_sport_for_qp(0xABC, 0x11);
    const FrameTemplate tb = make_frame_template(back);
    tp::SendWr wr;
    wr.opcode = tp::WrOpcode::kSend;
    wr.sge[0] = tp::Sge{kBase, 64, 0x100};
    wr.num_sge = 1;
    a.qp.post_send(wr);
    take(a, b, ta, "fused_send_only");
    wr.opcode = tp::WrOpcode::kSendImm;
    wr.imm = 0xCAFEF00D;
    wr.sge[0].len_bytes = 7;
    a.qp.post_send(wr);
    take(a, b, ta_vlan, "fused_send_only_imm_vlan");
    take(b, a, tb, "fused_ack");  // one ACK for both (coalesced)
  }

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
