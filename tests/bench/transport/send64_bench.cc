// One-way cost of a 64-byte SEND through the whole pure stack:
//   requester (post + poll_tx_frame: frame and ICRC) -> parse_frame (all
//   checks, ICRC) -> responder (placement, receive completion) -> ACK
//   poll_tx_frame -> parse_frame -> completer (ACK processing, send
//   completion) plus the receive re-post. Reports ns per message; for instruction counts
// run it under callgrind with two message counts and subtract (BENCHMARKS.md).
//
// usage: transport_send64_bench [messages]   (default 1,000,000)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "transport/heap_memory_regions.h"
#include "transport/qp.h"
#include "wire/frame.h"

using namespace conduit;
using namespace conduit::transport;

namespace {

constexpr uint64_t kBase = 0x10000;

void bring_up(Qp& qp, uint32_t remote_qpn) {
  QpAttr a;
  a.access_flags = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;
  a.pmtu_bytes = 4096;
  a.dest_qpn = remote_qpn;
  a.rq_psn = a.sq_psn = 0;
  a.state = QpState::kInit;
  qp.modify(a, kAttrState | kAttrAccessFlags);
  a.state = QpState::kRtr;
  qp.modify(a, kAttrState | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn | kAttrMaxDestRdAtomic |
                   kAttrMinRnrTimer);
  a.state = QpState::kRts;
  qp.modify(
      a, kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry | kAttrMaxRdAtomic);
}

struct Side {
  HeapMemoryRegions mrs;
  Qp qp;
  wire::FrameAddr addr;
  wire::FrameTemplate tmpl;  // made from addr once the addresses are set
  explicit Side(uint32_t qpn) : qp(make_cfg(qpn), mrs) {
    mrs.add(kBase, 1 << 16, kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead);
  }
  static QpConfig make_cfg(uint32_t qpn) {
    QpConfig c;
    c.qpn = qpn;
    c.sq_depth = 64;
    c.rq_depth = 64;
    return c;
  }
};

// Moves one packet from `from` to `to` as a frame, the way the engine does:
// the QP writes the frame (Qp::poll_tx_frame, from the per-QP template), the
// receiver validates all of it (parse_frame: Ethernet, IPv4 incl. checksum,
// UDP, BTH, lengths, ICRC) into a RoceView and the QP reads the packet from
// it (Qp::on_packet(RoceView)). Returns false if there was nothing to send.
struct Hop {
  wire::RoceView v;
  std::vector<uint8_t> buf = std::vector<uint8_t>(9000);
};

bool hop(Side& from, Side& to, Hop& h, const wire::ParseOptions& opt, uint64_t now_ns) {
  const wire::BuildResult r = from.qp.poll_tx_frame(now_ns, from.tmpl, h.buf);
  if (r.ok() && r.len_bytes == 0) return false;
  if (!r.ok() || wire::parse_frame(std::span<const uint8_t>(h.buf.data(), r.len_bytes), opt, h.v) !=
                     wire::DropReason::kNone) {
    std::fprintf(stderr, "frame did not round-trip\n");
    std::exit(1);
  }
  to.qp.on_packet(now_ns, h.v);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t messages = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1'000'000;
  Side a(0x11), b(0x22);
  bring_up(a.qp, 0x22);
  bring_up(b.qp, 0x11);
  a.addr.src_ip = b.addr.dst_ip = 0xC6120001;
  b.addr.src_ip = a.addr.dst_ip = 0xC6120002;
  a.addr.src_port = wire::udp_sport_for_qp(0x11, 0x22);
  b.addr.src_port = wire::udp_sport_for_qp(0x22, 0x11);
  a.tmpl = wire::make_frame_template(a.addr);
  b.tmpl = wire::make_frame_template(b.addr);
  wire::ParseOptions opt;
  Hop h;

  SendWr wr;
  wr.opcode = WrOpcode::kSend;
  wr.sge[0] = Sge{kBase, 64, 0x100};
  wr.num_sge = 1;
  RecvWr rr;
  rr.sge[0] = Sge{kBase + 4096, 64, 0x100};
  rr.num_sge = 1;
  for (int i = 0; i < 8; ++i) b.qp.post_recv(rr);

  Completion cq[4];
  uint64_t now_ns = 0, done = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < messages; ++i) {
    wr.wr_id = i;
    if (a.qp.post_send(wr) != Status::kOk) return 1;
    hop(a, b, h, opt, now_ns);  // the SEND
    hop(b, a, h, opt, now_ns);  // its ACK
    done += a.qp.poll_cq(cq);
    if (b.qp.poll_cq(cq) != 1) return 1;
    if (b.qp.post_recv(rr) != Status::kOk) return 1;
    now_ns += 100;
  }
  const auto t1 = std::chrono::steady_clock::now();
  if (done != messages) {
    std::fprintf(stderr, "only %llu of %llu completed\n", static_cast<unsigned long long>(done),
                 static_cast<unsigned long long>(messages));
    return 1;
  }
  const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count();
  std::printf("64-byte SEND one way (incl. ACK): %llu messages, %.1f ns/message\n",
              static_cast<unsigned long long>(messages), ns / static_cast<double>(messages));
  return 0;
}
