// The fused datapath (Qp::poll_tx_frame, Qp::on_packet with a RoceView)
// against the general one (poll_tx + wire::build_frame, parse_frame into a
// RoceHeader + on_packet): two worlds of two QPs each get the same posts,
// timer ticks and link events (loss, duplication, reordering, corruption,
// RNR, receive buffers too small), and must produce the same frame bytes,
// results, counters, completions and memory at every step.
#include <catch2/catch.hpp>
#include <cstring>
#include <deque>

#include "qp_pair.h"
#include "wire/frame.h"

namespace conduit::transport::test {
namespace {

struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(next() % n); }
};

void require_same(const Qp& x, const Qp& y) {
  REQUIRE(x.state() == y.state());
  REQUIRE(x.una_psn() == y.una_psn());
  REQUIRE(x.expected_psn() == y.expected_psn());
  REQUIRE(x.cq_size() == y.cq_size());
  REQUIRE(x.next_deadline_ns() == y.next_deadline_ns());
  REQUIRE(std::memcmp(&x.counters(), &y.counters(), sizeof(QpCounters)) == 0);
}

struct Lockstep {
  QpPair g;  // general API
  QpPair f;  // fused API
  wire::FrameTemplate tmpl_a, tmpl_b;
  wire::ParseOptions opt;
  std::deque<std::vector<uint8_t>> to_b, to_a;  // frames in flight (identical in both worlds)
  uint64_t now_ns = 1'000'000;
  uint64_t fused_frames = 0;

  Lockstep(QpAttr attr, QpConfig ca, QpConfig cb)
      : g(attr, 100, 0xFFFFF0, ca, cb), f(attr, 100, 0xFFFFF0, ca, cb) {
    wire::FrameAddr a, b;
    a.src_ip = b.dst_ip = 0xC6120001;
    b.src_ip = a.dst_ip = 0xC6120002;
    a.src_port = wire::udp_sport_for_qp(ca.qpn, cb.qpn);
    b.src_port = wire::udp_sport_for_qp(cb.qpn, ca.qpn);
    b.has_vlan = true;  // one side with an 802.1Q tag
    b.vlan_tci = 0x2005;
    tmpl_a = wire::make_frame_template(a);
    tmpl_b = wire::make_frame_template(b);
    opt.pmtu_bytes = attr.pmtu_bytes;
  }

  // One frame from `from` in both worlds; the bytes must be equal.
  void transmit(bool from_a, Rng& rng) {
    Qp& gq = from_a ? g.a.qp : g.b.qp;
    Qp& fq = from_a ? f.a.qp : f.b.qp;
    const wire::FrameTemplate& t = from_a ? tmpl_a : tmpl_b;
    TxPacket tx;
    const bool got = gq.poll_tx(now_ns, tx);
    std::vector<uint8_t> gbuf(9000), fbuf(9000);
    // Sometimes a buffer too small for the frame: both consume the packet.
    const size_t room = rng.below(16) == 0 ? 60 : fbuf.size();
    const wire::BuildResult fr = fq.poll_tx_frame(now_ns, t, std::span(fbuf).first(room));
    REQUIRE(got == !(fr.ok() && fr.len_bytes == 0));
    if (!got) return;
    const wire::BuildResult gr = wire::build_frame(
        std::span(gbuf).first(room), t, tx.hdr,
        std::span<const std::span<const uint8_t>>(tx.payload.data(), tx.payload_parts));
    REQUIRE(gr.status == fr.status);
    REQUIRE(gr.len_bytes == fr.len_bytes);
    if (!gr.ok()) return;
    ++fused_frames;
    REQUIRE(std::memcmp(gbuf.data(), fbuf.data(), gr.len_bytes) == 0);
    gbuf.resize(gr.len_bytes);
    auto& link = from_a ? to_b : to_a;
    const uint32_t fate = rng.below(100);
    if (fate < 5) return;                                                       // lost
    if (fate < 8) gbuf[rng.below(static_cast<uint32_t>(gbuf.size()))] ^= 0x10;  // corrupted
    if (fate < 11) link.push_back(gbuf);                                        // duplicated
    if (fate < 16 && !link.empty()) {
      link.insert(link.begin() + rng.below(static_cast<uint32_t>(link.size())), gbuf);  // reordered
    } else {
      link.push_back(std::move(gbuf));
    }
  }

  void deliver(bool to_b_side) {
    auto& link = to_b_side ? to_b : to_a;
    if (link.empty()) return;
    const std::vector<uint8_t> frame = std::move(link.front());
    link.pop_front();
    wire::ParsedFrame pf;
    wire::RoceView v;
    const wire::DropReason why = wire::parse_frame(frame, opt, pf);
    REQUIRE(wire::parse_frame(frame, opt, v) == why);
    if (why != wire::DropReason::kNone) return;
    Qp& gq = to_b_side ? g.b.qp : g.a.qp;
    Qp& fq = to_b_side ? f.b.qp : f.a.qp;
    REQUIRE(gq.on_packet(now_ns, pf.hdr, pf.payload) == fq.on_packet(now_ns, v));
  }

  void post_send(Rng& rng, uint64_t id, uint32_t pmtu) {
    SendWr wr;
    wr.wr_id = id;
    const uint32_t kind = rng.below(10);
    wr.opcode = kind < 5   ? WrOpcode::kSend
                : kind < 6 ? WrOpcode::kSendImm
                : kind < 8 ? WrOpcode::kWrite
                : kind < 9 ? WrOpcode::kWriteImm
                           : WrOpcode::kRead;
    wr.signaled = rng.below(8) != 0;
    wr.solicited = rng.below(4) == 0;
    wr.imm = static_cast<uint32_t>(rng.next());
    const uint32_t lens[] = {0, 1, 3, 63, 64, 65, pmtu - 1, pmtu, pmtu + 1, 3 * pmtu + 7};
    const uint32_t len = lens[rng.below(10)];
    const uint64_t src = kBase + 0x1000 * rng.below(64);
    wr.remote_addr = kBase + 0x80000 + 0x1000 * rng.below(64);
    wr.rkey = 0x8000;
    if (rng.below(4) == 0 && len > 1) {  // two SGEs
      wr.sge[0] = Sge{src, len / 2, 0x100};
      wr.sge[1] = Sge{src + 0x40000, len - len / 2, 0x100};
      wr.num_sge = 2;
    } else {
      wr.sge[0] = Sge{src, len, 0x100};
      wr.num_sge = rng.below(8) == 0 && len == 0 ? 0 : 1;
    }
    REQUIRE(g.a.qp.post_send(wr) == f.a.qp.post_send(wr));
  }

  void post_recv(Rng& rng, uint64_t id, uint32_t pmtu) {
    RecvWr r;
    r.wr_id = id;
    // Now and then a buffer too small: a local length error and ERR.
    const uint32_t len = rng.below(200) == 0 ? 2 : 4 * pmtu;
    r.sge[0] = Sge{kBase + 0xC0000 + 0x4000 * rng.below(16), len, 0x100};
    r.num_sge = 1;
    REQUIRE(g.b.qp.post_recv(r) == f.b.qp.post_recv(r));
  }

  void tick(Rng& rng) {
    now_ns += rng.below(8) ? 1000 : 5'000'000;  // now and then past the ACK timeout
    for (QpPair* w : {&g, &f}) {
      for (Qp* q : {&w->a.qp, &w->b.qp}) {
        if (q->next_deadline_ns() <= now_ns) q->on_timer(now_ns);
      }
    }
    for (bool side : {true, false}) {
      std::vector<Completion> gc = (side ? g.a : g.b).drain_cq();
      std::vector<Completion> fc = (side ? f.a : f.b).drain_cq();
      REQUIRE(gc.size() == fc.size());
      for (size_t i = 0; i < gc.size(); ++i) {
        REQUIRE(gc[i].wr_id == fc[i].wr_id);
        REQUIRE(gc[i].status == fc[i].status);
        REQUIRE(gc[i].opcode == fc[i].opcode);
        REQUIRE(gc[i].has_imm == fc[i].has_imm);
        REQUIRE(gc[i].imm == fc[i].imm);
        REQUIRE(gc[i].len_bytes == fc[i].len_bytes);
      }
    }
  }

  void run(uint64_t seed, int steps, uint32_t pmtu) {
    Rng rng{seed};
    // Distinct bytes to move around.
    for (uint32_t i = 0; i < kMrBytes; ++i) {
      g.a.mem()[i] = f.a.mem()[i] = static_cast<uint8_t>(i * 7 + (i >> 9));
      g.b.mem()[i] = f.b.mem()[i] = static_cast<uint8_t>(i * 13 + (i >> 11));
    }
    uint64_t id = 0;
    for (int s = 0; s < steps; ++s) {
      const uint32_t act = rng.below(20);
      if (act < 3) {
        post_send(rng, ++id, pmtu);
      } else if (act < 6) {
        post_recv(rng, ++id, pmtu);
      } else if (act < 10) {
        transmit(true, rng);
      } else if (act < 13) {
        transmit(false, rng);
      } else if (act < 16) {
        deliver(true);
      } else if (act < 19) {
        deliver(false);
      } else {
        tick(rng);
      }
      require_same(g.a.qp, f.a.qp);
      require_same(g.b.qp, f.b.qp);
    }
    REQUIRE(std::memcmp(g.a.mem(), f.a.mem(), kMrBytes) == 0);
    REQUIRE(std::memcmp(g.b.mem(), f.b.mem(), kMrBytes) == 0);
  }
};

QpConfig cfg(uint32_t qpn, uint32_t window) {
  QpConfig c = QpPair::make_cfg(qpn);
  c.window_packets = window;
  c.ack_req_every_packets = 3;
  return c;
}

void run_modes(bool sr) {
  uint64_t frames = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    QpAttr attr = default_attr();
    attr.selective_repeat = sr;
    attr.pmtu_bytes = seed % 3 == 0 ? 256 : 1024;
    attr.retry_cnt = 7;
    attr.rnr_retry = seed % 2 ? 7 : 2;
    attr.max_rd_atomic = attr.max_dest_rd_atomic = 4;
    Lockstep l(attr, cfg(0x11, seed % 4 == 0 ? 2 : 64), cfg(0x22, 64));
    INFO("seed " << seed);
    l.run(seed, 4000, attr.pmtu_bytes);
    frames += l.fused_frames;
  }
  REQUIRE(frames > 12 * 300);  // the runs did move traffic (some end early in ERR)
}

TEST_CASE("fused datapath: go-back-N behaves exactly as the general path") { run_modes(false); }

TEST_CASE("fused datapath: selective repeat behaves exactly as the general path") {
  run_modes(true);
}

TEST_CASE("fused datapath: a SEND only and its ACK take the direct path, byte-identical") {
  QpPair g, f;
  SendWr wr;
  wr.wr_id = 7;
  wr.opcode = WrOpcode::kSendImm;
  wr.imm = 0xA1B2C3D4;
  wr.solicited = true;
  wr.sge[0] = Sge{kBase, 61, 0x100};  // pad 3
  wr.num_sge = 1;
  RecvWr r;
  r.wr_id = 9;
  r.sge[0] = Sge{kBase + 0x1000, 100, 0x100};
  r.num_sge = 1;
  for (QpPair* p : {&g, &f}) {
    REQUIRE(p->a.qp.post_send(wr) == Status::kOk);
    REQUIRE(p->b.qp.post_recv(r) == Status::kOk);
  }
  wire::FrameAddr addr;
  const wire::FrameTemplate t = wire::make_frame_template(addr);
  std::vector<uint8_t> gbuf(2048), fbuf(2048);
  for (int hop = 0; hop < 2; ++hop) {
    Qp& gs = hop == 0 ? g.a.qp : g.b.qp;
    Qp& fs = hop == 0 ? f.a.qp : f.b.qp;
    TxPacket tx;
    REQUIRE(gs.poll_tx(g.now_ns, tx));
    const wire::BuildResult gr = wire::build_frame(
        gbuf, t, tx.hdr,
        std::span<const std::span<const uint8_t>>(tx.payload.data(), tx.payload_parts));
    const wire::BuildResult fr = fs.poll_tx_frame(f.now_ns, t, fbuf);
    REQUIRE(gr.ok());
    REQUIRE(fr.ok());
    REQUIRE(fr.len_bytes == gr.len_bytes);
    REQUIRE(std::memcmp(gbuf.data(), fbuf.data(), gr.len_bytes) == 0);
    wire::ParsedFrame pf;
    wire::RoceView v;
    const auto frame = std::span<const uint8_t>(fbuf.data(), fr.len_bytes);
    REQUIRE(wire::parse_frame(frame, wire::ParseOptions{}, pf) == wire::DropReason::kNone);
    REQUIRE(wire::parse_frame(frame, wire::ParseOptions{}, v) == wire::DropReason::kNone);
    REQUIRE(v.opcode() == pf.hdr.bth.opcode);
    REQUIRE(v.psn() == pf.hdr.bth.psn);
    REQUIRE(v.dest_qp() == pf.hdr.bth.dest_qp);
    REQUIRE(v.ack_req() == pf.hdr.bth.ack_req);
    REQUIRE(v.solicited() == pf.hdr.bth.solicited);
    Qp& gd = hop == 0 ? g.b.qp : g.a.qp;
    Qp& fd = hop == 0 ? f.b.qp : f.a.qp;
    REQUIRE(gd.on_packet(g.now_ns, pf.hdr, pf.payload) == RxResult::kAccepted);
    REQUIRE(fd.on_packet(f.now_ns, v) == RxResult::kAccepted);
    require_same(gd, fd);
  }
  const auto gc = g.b.drain_cq();
  const auto fc = f.b.drain_cq();
  REQUIRE(fc.size() == 1);
  REQUIRE(fc[0].wr_id == 9);
  REQUIRE(fc[0].imm == 0xA1B2C3D4);
  REQUIRE(fc[0].len_bytes == 61);
  REQUIRE(std::memcmp(f.b.mem() + 0x1000, f.a.mem(), 61) == 0);
  REQUIRE(f.a.drain_cq().size() == 1);
  // Nothing more to send: no frame, no error.
  const wire::BuildResult none = f.a.qp.poll_tx_frame(f.now_ns, t, fbuf);
  REQUIRE(none.ok());
  REQUIRE(none.len_bytes == 0);
}

}  // namespace
}  // namespace conduit::transport::test
