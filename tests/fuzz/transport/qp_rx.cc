// Fuzz target: a QP in RTS (requester, responder and completer all live) fed
// a byte-driven mix of posts, hand-made headers near the interesting PSNs,
// raw frames through wire::parse_frame, timer jumps and TX drains. Checks
// that nothing crashes, the completion queue never holds more than the
// queues can produce, and every WR posted is completed at most once.
//
// Differential: a twin QP gets the same inputs through the fused datapath
// (Qp::poll_tx_frame, Qp::on_packet with a wire::RoceView) and must behave
// exactly as the first one does through poll_tx/build_frame and
// on_packet(RoceHeader): same results, counters, completions and frame bytes.
// The op byte's top bits give the twin the engine's burst forms instead: a
// chain of WRs (post_send/post_recv of a span), a burst of received packets
// (on_packets) and a TX burst (poll_tx_frames), each against the first QP's
// one-at-a-time calls; or deregister a region in both (the memory-gone paths).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "transport/heap_memory_regions.h"
#include "transport/qp.h"
#include "wire/frame.h"
#include "wire/psn.h"

using namespace conduit;
using namespace conduit::transport;

namespace {

class Input {
 public:
  Input(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  bool empty() const { return i_ >= n_; }
  uint8_t u8() { return i_ < n_ ? d_[i_++] : 0; }
  uint16_t u16() { return static_cast<uint16_t>(u8() | (u8() << 8)); }
  uint32_t u32() { return u16() | (static_cast<uint32_t>(u16()) << 16); }
  std::span<const uint8_t> bytes(size_t len) {
    const size_t take = len < n_ - i_ ? len : n_ - i_;
    std::span<const uint8_t> s(d_ + i_, take);
    i_ += take;
    return s;
  }

 private:
  const uint8_t* d_;
  size_t n_;
  size_t i_ = 0;
};

constexpr uint64_t kBase = 0x10000;
constexpr uint32_t kMrBytes = 1 << 16;
constexpr uint8_t kOpcodes[] = {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
                                0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F, 0x10, 0x11,
                                0x12, 0x13, 0x14, 0x16, 0x17, 0x81, 0x42};

bool same(const Qp& x, const Qp& y) {
  return x.state() == y.state() && x.una_psn() == y.una_psn() &&
         x.expected_psn() == y.expected_psn() && x.cq_size() == y.cq_size() &&
         x.next_deadline_ns() == y.next_deadline_ns() &&
         std::memcmp(&x.counters(), &y.counters(), sizeof(QpCounters)) == 0;
}

bool same(const Completion& x, const Completion& y) {
  return x.wr_id == y.wr_id && x.status == y.status && x.opcode == y.opcode &&
         x.has_imm == y.has_imm && x.imm == y.imm && x.len_bytes == y.len_bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  HeapMemoryRegions mrs, fmrs;
  for (HeapMemoryRegions* m : {&mrs, &fmrs}) {
    m->add(kBase, kMrBytes,
           kAccessLocalWrite | kAccessRemoteRead | kAccessRemoteWrite | kAccessRemoteAtomic);
    m->add(kBase * 16, 4096, kAccessLocalWrite);  // no remote access
  }
  QpConfig cfg;
  cfg.qpn = 0x33;
  cfg.sq_depth = 16;
  cfg.rq_depth = 16;
  cfg.window_packets = 1 + in.u8();
  cfg.ack_req_every_packets = 1 + (in.u8() & 63);
  Qp qp(cfg, mrs);
  Qp fq(cfg, fmrs);  // the twin on the fused datapath
  QpAttr a;
  a.access_flags = in.u8() & 15;  // remote atomic too
  a.pmtu_bytes = 256u << (in.u8() % 5);
  a.dest_qpn = 0x44;
  a.rq_psn = in.u32() & wire::kPsnMask;
  a.sq_psn = in.u32() & wire::kPsnMask;
  a.timeout = static_cast<uint8_t>(in.u8() & 31);
  a.retry_cnt = in.u8() & 7;
  a.rnr_retry = in.u8() & 7;
  a.min_rnr_timer = in.u8() & 31;
  a.max_rd_atomic = static_cast<uint8_t>(1 + (in.u8() & 15));
  a.max_dest_rd_atomic = static_cast<uint8_t>(1 + (in.u8() & 15));
  a.selective_repeat = a.max_dest_rd_atomic & 1;  // both recovery modes
  a.state = QpState::kInit;
  for (Qp* q : {&qp, &fq}) {
    a.state = QpState::kInit;
    q->modify(a, kAttrState | kAttrAccessFlags);
    a.state = QpState::kRtr;
    q->modify(a, kAttrState | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn | kAttrMaxDestRdAtomic |
                     kAttrMinRnrTimer | kAttrSelectiveRepeat);
    a.state = QpState::kRts;
    q->modify(a, kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry |
                     kAttrMaxRdAtomic);
  }

  wire::ParseOptions popt;
  popt.pmtu_bytes = a.pmtu_bytes;
  uint64_t now_ns = 1000;
  uint64_t posted = 0, completed = 0;
  std::vector<uint8_t> payload_buf(8192);
  std::vector<uint8_t> frame_buf(9000);
  std::vector<uint8_t> fused_buf(9000);
  const wire::FrameAddr addr;
  const wire::FrameTemplate tmpl = wire::make_frame_template(addr);
  uint32_t last_tx_psn = a.sq_psn;

  // Room for an RX burst of hand-made frames and a TX burst.
  constexpr size_t kBurst = 6;
  std::vector<std::vector<uint8_t>> burst_bufs(kBurst, std::vector<uint8_t>(9000));
  std::vector<std::vector<uint8_t>> tx_bufs(kBurst, std::vector<uint8_t>(9000));

  // A hand-made packet with a PSN near what the QP expects; plen its payload bytes.
  auto make_header = [&](wire::RoceHeader& h, size_t& plen, bool& as_frame) {
    h = wire::RoceHeader{};
    h.bth.opcode = kOpcodes[in.u8() % sizeof(kOpcodes)];
    h.bth.dest_qp = (in.u8() & 0x80) ? 0x34 : 0x33;
    const int32_t delta = static_cast<int8_t>(in.u8()) / 8;
    const bool response = wire::opcode_info(h.bth.opcode).flags & wire::kOpResponse;
    const uint32_t around =
        response ? (in.u8() & 1 ? last_tx_psn : qp.una_psn()) : qp.expected_psn();
    h.bth.psn = wire::psn_add(around, static_cast<uint32_t>(delta));
    const uint8_t bits = in.u8();
    h.bth.ack_req = bits & 1;
    as_frame = bits & 2;  // through build_frame and both parsers
    h.aeth.syndrome = in.u8();
    h.aeth.msn = in.u32() & wire::kPsnMask;
    h.reth.va = kBase + in.u16() * (in.u8() & 3);
    h.reth.rkey = 0x8000 + (in.u8() & 3);
    h.reth.dma_len = in.u16() * ((in.u8() & 3) + 1);
    h.imm = in.u32();
    // AtomicETH (an unaligned VA now and then) and an atomic ACK's original value.
    h.atomic.va = kBase + 8 * (in.u16() % 1024) + ((in.u8() & 7) == 0 ? 4 : 0);
    h.atomic.rkey = 0x8000 + (in.u8() & 3);
    h.atomic.swap_add = in.u32();
    h.atomic.compare = in.u8() & 1 ? 0 : in.u32();
    h.atomic_ack_orig = in.u32();
    plen = in.u16() % 4200;
    if (in.u8() & 1) plen = a.pmtu_bytes;
  };
  auto make_send_wr = [&](SendWr& wr) {
    wr = SendWr{};
    wr.wr_id = posted;
    wr.opcode = static_cast<WrOpcode>(in.u8() % 7);  // atomics too
    wr.signaled = in.u8() & 1;
    uint32_t len = in.u16() % 9000;
    if (is_atomic(wr.opcode) && (len & 1)) len = kAtomicBytes;  // mostly well-formed
    wr.compare_add = in.u32();
    wr.swap = in.u32();
    wr.sge[0] = Sge{kBase + (in.u16() % 1024), len, 0x100};
    wr.num_sge = 1;
    wr.remote_addr = kBase + in.u16();
    wr.rkey = 0x8000 + (in.u8() & 1);
  };
  auto make_recv_wr = [&](RecvWr& r) {
    r = RecvWr{};
    r.wr_id = posted;
    r.sge[0] = Sge{kBase + in.u16() % 4096, static_cast<uint32_t>(in.u16() % 9000), 0x100};
    r.num_sge = 1;
  };

  while (!in.empty()) {
    const uint8_t op = in.u8();
    // Top bits 11: the burst form of ops 0, 1, 2/3 and 5 (bits 3-5 pick its length, 2 to 6);
    // for op 6, deregister a region (bit 3: which).
    const bool burst = (op >> 6) == 3;
    const size_t burst_len = 2 + ((op >> 3) & 7) % (kBurst - 1);
    switch (op % 8) {
      case 0: {
        if (burst) {  // a chain of send WRs: one at a time vs the twin's post_send(span)
          SendWr wrs[kBurst];
          for (size_t k = 0; k < burst_len; ++k) {
            make_send_wr(wrs[k]);
            wrs[k].wr_id = posted + k;
          }
          size_t n = 0;
          Status st = Status::kOk;
          for (; n < burst_len; ++n) {
            if ((st = qp.post_send(wrs[n])) != Status::kOk) break;
          }
          Status fst;
          if (fq.post_send(std::span<const SendWr>(wrs, burst_len), fst) != n || fst != st) {
            __builtin_trap();
          }
          posted += n;
          break;
        }
        // post a send WR
        SendWr wr;
        make_send_wr(wr);
        const Status st = qp.post_send(wr);
        if (fq.post_send(wr) != st) __builtin_trap();
        if (st == Status::kOk) ++posted;
        break;
      }
      case 1: {
        if (burst) {  // a chain of receives: one at a time vs the twin's post_recv(span)
          RecvWr wrs[kBurst];
          for (size_t k = 0; k < burst_len; ++k) {
            make_recv_wr(wrs[k]);
            wrs[k].wr_id = posted + k;
          }
          size_t n = 0;
          Status st = Status::kOk;
          for (; n < burst_len; ++n) {
            if ((st = qp.post_recv(wrs[n])) != Status::kOk) break;
          }
          Status fst;
          if (fq.post_recv(std::span<const RecvWr>(wrs, burst_len), fst) != n || fst != st) {
            __builtin_trap();
          }
          posted += n;
          break;
        }
        // post a receive
        RecvWr r;
        make_recv_wr(r);
        const Status st = qp.post_recv(r);
        if (fq.post_recv(r) != st) __builtin_trap();
        if (st == Status::kOk) ++posted;
        break;
      }
      case 2:
      case 3: {
        if (burst) {  // an RX burst of hand-made frames: one at a time vs the twin's on_packets
          wire::ParsedFrame fs[kBurst];
          wire::RoceView vs[kBurst];
          size_t m = 0;
          for (size_t k = 0; k < burst_len; ++k) {
            wire::RoceHeader h;
            size_t plen;
            bool as_frame;
            make_header(h, plen, as_frame);
            if (!(wire::opcode_info(h.bth.opcode).flags & wire::kOpPayload)) plen = 0;
            const wire::BuildResult r = wire::build_frame(
                burst_bufs[m], addr, h,
                wire::PayloadGather(std::span<const uint8_t>(payload_buf.data(), plen)));
            if (!r.ok()) continue;
            const auto frame = std::span<const uint8_t>(burst_bufs[m].data(), r.len_bytes);
            const wire::DropReason why = wire::parse_frame(frame, popt, fs[m]);
            if (wire::parse_frame(frame, popt, vs[m]) != why) __builtin_trap();
            if (why == wire::DropReason::kNone) ++m;
          }
          if (m == 0) break;
          RxResult res[kBurst];
          fq.on_packets(now_ns, std::span<const wire::RoceView>(vs, m), res);
          for (size_t k = 0; k < m; ++k) {
            if (qp.on_packet(now_ns, fs[k].hdr, fs[k].payload) != res[k]) __builtin_trap();
          }
          break;
        }
        wire::RoceHeader h;
        size_t plen;
        bool as_frame;
        make_header(h, plen, as_frame);
        if (!as_frame) {
          const auto payload = std::span<const uint8_t>(payload_buf.data(), plen);
          if (qp.on_packet(now_ns, h, payload) != fq.on_packet(now_ns, h, payload)) {
            __builtin_trap();
          }
          break;
        }
        if (!(wire::opcode_info(h.bth.opcode).flags & wire::kOpPayload)) plen = 0;
        const wire::BuildResult r = wire::build_frame(
            frame_buf, addr, h,
            wire::PayloadGather(std::span<const uint8_t>(payload_buf.data(), plen)));
        if (!r.ok()) break;
        const auto frame = std::span<const uint8_t>(frame_buf.data(), r.len_bytes);
        wire::ParsedFrame f;
        wire::RoceView v;
        const wire::DropReason why = wire::parse_frame(frame, popt, f);
        if (wire::parse_frame(frame, popt, v) != why) __builtin_trap();
        if (why == wire::DropReason::kNone &&
            qp.on_packet(now_ns, f.hdr, f.payload) != fq.on_packet(now_ns, v)) {
          __builtin_trap();
        }
        break;
      }
      case 4: {  // raw frame bytes through the parser
        const size_t len = in.u16() % 600;
        auto raw = in.bytes(len);
        wire::ParsedFrame f;
        wire::RoceView v;
        const wire::DropReason why = wire::parse_frame(raw, popt, f);
        if (wire::parse_frame(raw, popt, v) != why) __builtin_trap();
        if (why == wire::DropReason::kNone &&
            qp.on_packet(now_ns, f.hdr, f.payload) != fq.on_packet(now_ns, v)) {
          __builtin_trap();
        }
        break;
      }
      case 5: {
        if (burst) {  // a TX burst: poll_tx one at a time vs the twin's poll_tx_frames
          std::span<uint8_t> bufs[kBurst];
          for (size_t k = 0; k < burst_len; ++k) bufs[k] = tx_bufs[k];
          wire::BuildResult fr[kBurst];
          const size_t n = fq.poll_tx_frames(
              now_ns, tmpl, std::span<const std::span<uint8_t>>(bufs, burst_len), fr);
          if (n > burst_len) __builtin_trap();
          TxPacket tx;
          for (size_t k = 0; k < n; ++k) {
            if (!qp.poll_tx(now_ns, tx) || !fr[k].ok() || fr[k].len_bytes == 0) __builtin_trap();
            if (wire::opcode_info(tx.hdr.bth.opcode).flags & wire::kOpRequest) {
              last_tx_psn = tx.hdr.bth.psn;
            }
            wire::PayloadGather g;
            for (uint32_t i = 0; i < tx.payload_parts; ++i) g.add(tx.payload[i]);
            const wire::BuildResult r = wire::build_frame(frame_buf, addr, tx.hdr, g);
            if (!r.ok() || r.len_bytes != fr[k].len_bytes ||
                std::memcmp(frame_buf.data(), tx_bufs[k].data(), r.len_bytes) != 0) {
              __builtin_trap();
            }
          }
          // Stopped early only when there was nothing more to send.
          if (n < burst_len && qp.poll_tx(now_ns, tx)) __builtin_trap();
          break;
        }
        // drain some TX, building each frame as the engine would
        TxPacket tx;
        for (int n = in.u8() % 64; n > 0; --n) {
          const bool got = qp.poll_tx(now_ns, tx);
          const wire::BuildResult fr = fq.poll_tx_frame(now_ns, tmpl, fused_buf);
          if (!fr.ok() || got != (fr.len_bytes != 0)) __builtin_trap();
          if (!got) break;
          if (tx.payload_bytes > a.pmtu_bytes) __builtin_trap();
          if (wire::opcode_info(tx.hdr.bth.opcode).flags & wire::kOpRequest) {
            last_tx_psn = tx.hdr.bth.psn;
          }
          wire::PayloadGather g;
          for (uint32_t i = 0; i < tx.payload_parts; ++i) g.add(tx.payload[i]);
          const wire::BuildResult r = wire::build_frame(frame_buf, addr, tx.hdr, g);
          if (!r.ok() || r.len_bytes != fr.len_bytes ||
              std::memcmp(frame_buf.data(), fused_buf.data(), r.len_bytes) != 0) {
            __builtin_trap();
          }
        }
        break;
      }
      case 6: {
        if (burst) {  // deregister a region in both (a client's remove_mr)
          const size_t idx = (op >> 3) & 1;
          if (!mrs.region(idx).removed) {
            mrs.remove(idx);
            fmrs.remove(idx);
          }
          break;
        }
        // time passes
        const uint64_t d = qp.next_deadline_ns();
        now_ns = (in.u8() & 1) && d != Qp::kNoDeadline ? d : now_ns + in.u16() * 100ull;
        qp.on_timer(now_ns);
        fq.on_timer(now_ns);
        break;
      }
      case 7: {
        Completion cq[8], fcq[8];
        const size_t n = qp.poll_cq(cq);
        if (fq.poll_cq(fcq) != n) __builtin_trap();
        for (size_t i = 0; i < n; ++i) {
          if (!same(cq[i], fcq[i])) __builtin_trap();
        }
        completed += n;
        break;
      }
    }
    if (qp.cq_size() + completed > posted) __builtin_trap();  // a WR completed twice
    if (!same(qp, fq)) __builtin_trap();
  }
  for (size_t i = 0; i < mrs.size(); ++i) {
    if (mrs.region(i).bytes != fmrs.region(i).bytes) __builtin_trap();  // placed the same
  }
  return 0;
}
