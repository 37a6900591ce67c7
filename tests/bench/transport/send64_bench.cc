// One-way cost of a 64-byte SEND through the whole pure stack:
//   requester (post + poll_tx_frame: frame and ICRC) -> parse_frame (all
//   checks, ICRC) -> responder (placement, receive completion) -> ACK
//   poll_tx_frame -> parse_frame -> completer (ACK processing, send
//   completion) plus the receive re-post. Reports ns per message; for instruction counts
// run it under callgrind with two message counts and subtract (BENCHMARKS.md).
//
// Two modes, both with every step of the path in the count:
//   burst 1 (default): post one SEND, send it, parse it, deliver it, the ACK
//     for it back the same way, both completions polled, the receive
//     re-posted; one message at a time.
//   burst N (streaming, as the engine runs): N SENDs posted, all N written as
//     frames, all N parsed and delivered (the responder coalesces its queued
//     ACKs, as the engine's does within one RX burst), then ONE ACK frame
//     written, parsed and processed, then the completions polled (one call
//     per side) and N receives re-posted. N = 32 is the engine's RX burst.
//
//   burst 1 "calls": the streaming loop with bursts of one (the burst and
//     chain calls with one element each, as the engine makes them when one
//     message at a time arrives).
//
// usage: transport_send64_bench [messages] [burst] [calls]   (default
// 1,000,000, 1; messages is rounded up to a whole number of bursts)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string_view>
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
  wire::RxExpect rx;         // the peer's frames to this QP, also per connection
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
// The parser takes the receiver's per-connection RxExpect (the same checks
// and result as parse_frame with its ParseOptions; BENCHMARKS.md).
// The engine's receive fast path (NetStack::on_rx_expected) parses with
// parse_frame_matched: a frame that matches the expectation is accepted
// with the full parser's verdict; the bench's frames always match.
bool parse_ok(std::span<const uint8_t> frame, const wire::RxExpect& exp, wire::RoceView& v) {
  wire::DropReason why;
  return wire::parse_frame_matched(frame, exp, v, why) && why == wire::DropReason::kNone;
}

struct Hop {
  wire::RoceView v;
  std::vector<uint8_t> buf = std::vector<uint8_t>(9000);
  size_t len = 0;
};

bool hop(Side& from, Side& to, Hop& h, uint64_t now_ns) {
  const wire::BuildResult r = from.qp.poll_tx_frame(now_ns, from.tmpl, h.buf);
  if (r.ok() && r.len_bytes == 0) return false;
  if (!r.ok() || !parse_ok(std::span<const uint8_t>(h.buf.data(), r.len_bytes), to.rx, h.v)) {
    std::fprintf(stderr, "frame did not round-trip\n");
    std::exit(1);
  }
  to.qp.on_packet(now_ns, h.v);
  return true;
}

// One burst of `burst` SENDs a -> b and the one ACK b -> a for all of them.
bool streaming_burst(Side& a, Side& b, std::vector<Hop>& frames, Hop& ack, std::span<SendWr> wrs,
                     std::span<const RecvWr> rrs, std::span<const std::span<uint8_t>> tx_bufs,
                     wire::BuildResult* tx_res, wire::RoceView* views, RxResult* rx_res,
                     uint64_t& next_id, uint64_t now_ns, std::span<Completion> cq, uint64_t& done) {
  const size_t burst = frames.size();
  // The burst's WRs as one chain (as the engine posts what it took from the
  // client's ring in one go).
  for (SendWr& wr : wrs) wr.wr_id = next_id++;
  Status st;
  if (a.qp.post_send(wrs, st) != burst) return false;
  // The TX burst: every frame written (one call) before any is received.
  if (a.qp.poll_tx_frames(now_ns, a.tmpl, tx_bufs, tx_res) != burst) return false;
  // The RX burst at b: each frame (all written now) checked and parsed where
  // it was written, then all delivered in one call; the ACKs coalesce in b's
  // queue.
  for (size_t i = 0; i < burst; ++i) {
    if (!tx_res[i].ok() || !parse_ok(tx_bufs[i].first(tx_res[i].len_bytes), b.rx, views[i])) {
      return false;
    }
  }
  b.qp.on_packets(now_ns, std::span<const wire::RoceView>(views, burst), rx_res);
  // One ACK for the burst, back to a.
  if (!hop(b, a, ack, now_ns)) return false;
  if (hop(b, a, ack, now_ns)) return false;  // nothing more queued
  done += a.qp.poll_cq(cq);
  if (b.qp.poll_cq(cq) != burst) return false;
  return b.qp.post_recv(rrs, st) == burst;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t messages = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1'000'000;
  const uint64_t burst = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1;
  // "calls": burst 1 through the burst and chain calls, as the engine makes
  // them for one message at a time (the default burst 1 uses the single calls).
  const bool burst_calls = burst > 1 || (argc > 3 && std::string_view(argv[3]) == "calls");
  if (burst == 0 || burst > 64) {
    std::fprintf(stderr, "burst must be 1..64\n");
    return 2;
  }
  messages = (messages + burst - 1) / burst * burst;
  Side a(0x11), b(0x22);
  bring_up(a.qp, 0x22);
  bring_up(b.qp, 0x11);
  a.addr.src_ip = b.addr.dst_ip = 0xC6120001;
  b.addr.src_ip = a.addr.dst_ip = 0xC6120002;
  a.addr.src_port = wire::udp_sport_for_qp(0x11, 0x22);
  b.addr.src_port = wire::udp_sport_for_qp(0x22, 0x11);
  a.tmpl = wire::make_frame_template(a.addr);
  b.tmpl = wire::make_frame_template(b.addr);
  const wire::ParseOptions opt;  // PMTU 4096, P_Key, IPv4 checksum, ICRC: all checked
  a.rx = wire::make_rx_expect(b.addr, 0x11, opt);
  b.rx = wire::make_rx_expect(a.addr, 0x22, opt);
  Hop h;

  SendWr wr;
  wr.opcode = WrOpcode::kSend;
  wr.sge[0] = Sge{kBase, 64, 0x100};
  wr.num_sge = 1;
  RecvWr rr;
  rr.sge[0] = Sge{kBase + 4096, 64, 0x100};
  rr.num_sge = 1;
  for (uint64_t i = 0; i < (burst_calls ? burst : 8); ++i) b.qp.post_recv(rr);

  Completion cq[64];
  uint64_t now_ns = 0, done = 0;
  const auto t0 = std::chrono::steady_clock::now();
  if (!burst_calls) {
    for (uint64_t i = 0; i < messages; ++i) {
      wr.wr_id = i;
      if (a.qp.post_send(wr) != Status::kOk) return 1;
      hop(a, b, h, now_ns);  // the SEND
      hop(b, a, h, now_ns);  // its ACK
      done += a.qp.poll_cq(std::span<Completion>(cq, 4));
      if (b.qp.poll_cq(std::span<Completion>(cq, 4)) != 1) return 1;
      if (b.qp.post_recv(rr) != Status::kOk) return 1;
      now_ns += 100;
    }
  } else {
    std::vector<Hop> frames(burst);
    for (Hop& f : frames) f.buf.resize(256);
    std::vector<SendWr> wrs(burst, wr);
    const std::vector<RecvWr> rrs(burst, rr);
    std::vector<std::span<uint8_t>> tx_bufs;
    for (Hop& f : frames) tx_bufs.emplace_back(f.buf);
    std::vector<wire::BuildResult> tx_res(burst);
    std::vector<wire::RoceView> views(burst);
    std::vector<RxResult> rx_res(burst);
    uint64_t next_id = 0;
    for (uint64_t i = 0; i < messages; i += burst) {
      if (!streaming_burst(a, b, frames, h, wrs, rrs, tx_bufs, tx_res.data(), views.data(),
                           rx_res.data(), next_id, now_ns, cq, done)) {
        std::fprintf(stderr, "burst %llu failed\n", static_cast<unsigned long long>(i / burst));
        return 1;
      }
      now_ns += 100 * burst;
    }
  }
  const auto t1 = std::chrono::steady_clock::now();
  if (done != messages) {
    std::fprintf(stderr, "only %llu of %llu completed\n", static_cast<unsigned long long>(done),
                 static_cast<unsigned long long>(messages));
    return 1;
  }
  const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count();
  std::printf("64-byte SEND one way (incl. ACK), burst %llu: %llu messages, %.1f ns/message\n",
              static_cast<unsigned long long>(burst), static_cast<unsigned long long>(messages),
              ns / static_cast<double>(messages));
  return 0;
}
