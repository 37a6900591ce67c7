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

// Every ACK/NAK frame the fused world's `fq` has to send now (poll_tx_frame),
// with the general world's `gq` polled in step (poll_tx + build_frame): the
// same frames, byte for byte. Returns them.
std::vector<std::vector<uint8_t>> drain_responses_same(Qp& gq, uint64_t g_now, Qp& fq,
                                                       uint64_t f_now,
                                                       const wire::FrameTemplate& t) {
  std::vector<std::vector<uint8_t>> out;
  for (;;) {
    std::vector<uint8_t> gb(2048), fb(2048);
    const wire::BuildResult br = fq.poll_tx_frame(f_now, t, fb);
    TxPacket tx;
    const bool got = gq.poll_tx(g_now, tx);
    REQUIRE(got == (br.len_bytes != 0));
    if (!got) break;
    const wire::BuildResult gr = wire::build_frame(gb, t, tx.hdr, {});
    REQUIRE(gr.len_bytes == br.len_bytes);
    REQUIRE(std::memcmp(gb.data(), fb.data(), gr.len_bytes) == 0);
    fb.resize(br.len_bytes);
    out.push_back(std::move(fb));
  }
  return out;
}

// A TX burst of up to k frames from a in the fused world (poll_tx_frames),
// one at a time in the general one (poll_tx + build_frame): the same frames
// and state. Returns the frames.
std::vector<std::vector<uint8_t>> tx_burst_same(QpPair& g, QpPair& f, const wire::FrameTemplate& t,
                                                size_t k) {
  std::vector<std::vector<uint8_t>> bufs(k, std::vector<uint8_t>(2048));
  std::vector<std::span<uint8_t>> rooms(bufs.begin(), bufs.end());
  std::vector<wire::BuildResult> res(k);
  const size_t n = f.a.qp.poll_tx_frames(f.now_ns, t, rooms, res.data());
  std::vector<std::vector<uint8_t>> frames;
  for (size_t i = 0; i < n; ++i) {
    TxPacket tx;
    REQUIRE(g.a.qp.poll_tx(g.now_ns, tx));
    std::vector<uint8_t> gb(2048);
    const wire::BuildResult gr = wire::build_frame(
        gb, t, tx.hdr,
        std::span<const std::span<const uint8_t>>(tx.payload.data(), tx.payload_parts));
    REQUIRE(gr.ok());
    REQUIRE(res[i].ok());
    REQUIRE(gr.len_bytes == res[i].len_bytes);
    REQUIRE(std::memcmp(gb.data(), bufs[i].data(), gr.len_bytes) == 0);
    frames.emplace_back(gb.begin(), gb.begin() + gr.len_bytes);
  }
  TxPacket more;
  if (n < k) REQUIRE_FALSE(g.a.qp.poll_tx(g.now_ns, more));
  require_same(g.a.qp, f.a.qp);
  return frames;
}

// The frames (all valid) as one RX burst at b: parsed and delivered one at a
// time in the general world, in one on_packets call in the fused world. Same
// results and state; returns the results.
std::vector<RxResult> rx_burst_to_b_same(QpPair& g, QpPair& f,
                                         const std::vector<std::vector<uint8_t>>& burst,
                                         const wire::ParseOptions& popt) {
  std::vector<wire::RoceView> views(burst.size());
  std::vector<RxResult> gres, fres(burst.size());
  for (size_t i = 0; i < burst.size(); ++i) {
    wire::ParsedFrame pf;
    REQUIRE(wire::parse_frame(burst[i], popt, pf) == wire::DropReason::kNone);
    REQUIRE(wire::parse_frame(burst[i], popt, views[i]) == wire::DropReason::kNone);
    gres.push_back(g.b.qp.on_packet(g.now_ns, pf.hdr, pf.payload));
  }
  f.b.qp.on_packets(f.now_ns, views, fres.data());
  REQUIRE(gres == fres);
  require_same(g.b.qp, f.b.qp);
  return fres;
}

// The ACK/NAK frames b has to send now, the same in both worlds, delivered
// to a in both: one at a time in the general world (g), as bursts of one in
// the fused world (f). Same results and state.
void responses_to_a_same(QpPair& g, QpPair& f, const wire::FrameTemplate& t,
                         const wire::ParseOptions& popt) {
  for (const auto& fr : drain_responses_same(g.b.qp, g.now_ns, f.b.qp, f.now_ns, t)) {
    wire::ParsedFrame pf;
    wire::RoceView v;
    REQUIRE(wire::parse_frame(fr, popt, pf) == wire::DropReason::kNone);
    REQUIRE(wire::parse_frame(fr, popt, v) == wire::DropReason::kNone);
    RxResult fres;
    f.a.qp.on_packets(f.now_ns, std::span(&v, 1), &fres);
    REQUIRE(g.a.qp.on_packet(g.now_ns, pf.hdr, pf.payload) == fres);
  }
  require_same(g.a.qp, f.a.qp);
}

struct Lockstep {
  QpPair g;  // general API
  QpPair f;  // fused API
  wire::FrameTemplate tmpl_a, tmpl_b;
  wire::ParseOptions opt;
  std::deque<std::vector<uint8_t>> to_b, to_a;  // frames in flight (identical in both worlds)
  uint64_t now_ns = 1'000'000;
  uint64_t fused_frames = 0;
  uint64_t bursts = 0;
  uint64_t chains = 0;

  Lockstep(QpAttr attr, QpConfig ca, QpConfig cb, bool ipv6 = false)
      : g(attr, 100, 0xFFFFF0, ca, cb), f(attr, 100, 0xFFFFF0, ca, cb) {
    wire::FrameAddr a, b;
    a.src_ip = b.dst_ip = 0xC6120001;
    b.src_ip = a.dst_ip = 0xC6120002;
    if (ipv6) {  // fe80::1 and 2001:db8::2: IPv6 templates in the fused writers
      a.ipv6 = b.ipv6 = true;
      a.src_ip6 = b.dst_ip6 = {0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
      b.src_ip6 = a.dst_ip6 = {0x20, 0x01, 0x0D, 0xB8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    }
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

  // A TX burst of up to k frames: the general world polls and builds one at
  // a time; the fused world writes them in one Qp::poll_tx_frames call (some
  // buffers too small). Same frames, results and count.
  void transmit_burst(bool from_a, Rng& rng, size_t k) {
    Qp& gq = from_a ? g.a.qp : g.b.qp;
    Qp& fq = from_a ? f.a.qp : f.b.qp;
    const wire::FrameTemplate& t = from_a ? tmpl_a : tmpl_b;
    std::vector<std::vector<uint8_t>> fbufs(k, std::vector<uint8_t>(9000));
    std::vector<std::span<uint8_t>> rooms;
    for (auto& b : fbufs) rooms.emplace_back(b.data(), rng.below(16) == 0 ? 60 : b.size());
    std::vector<wire::BuildResult> fr(k);
    const size_t n = fq.poll_tx_frames(now_ns, t, rooms, fr.data());
    ++bursts;
    size_t gn = 0;
    for (; gn < k; ++gn) {
      TxPacket tx;
      if (!gq.poll_tx(now_ns, tx)) break;
      std::vector<uint8_t> gbuf(9000);
      const wire::BuildResult gr = wire::build_frame(
          std::span(gbuf).first(rooms[gn].size()), t, tx.hdr,
          std::span<const std::span<const uint8_t>>(tx.payload.data(), tx.payload_parts));
      REQUIRE(gn < n);
      REQUIRE(gr.status == fr[gn].status);
      REQUIRE(gr.len_bytes == fr[gn].len_bytes);
      if (!gr.ok()) continue;
      ++fused_frames;
      REQUIRE(std::memcmp(gbuf.data(), fbufs[gn].data(), gr.len_bytes) == 0);
      gbuf.resize(gr.len_bytes);
      auto& link = from_a ? to_b : to_a;
      const uint32_t fate = rng.below(100);
      if (fate < 3) continue;                                                     // lost
      if (fate < 5) gbuf[rng.below(static_cast<uint32_t>(gbuf.size()))] ^= 0x10;  // corrupted
      if (fate < 7) link.push_back(gbuf);                                         // duplicated
      link.push_back(std::move(gbuf));
    }
    REQUIRE(gn == n);
  }

  // An RX burst of up to k frames: the general world parses into RoceHeaders
  // and calls on_packet per packet; the fused world parses into views and
  // delivers them in one Qp::on_packets call. Same results.
  void deliver_burst(bool to_b_side, size_t k) {
    auto& link = to_b_side ? to_b : to_a;
    std::vector<std::vector<uint8_t>> frames;
    while (frames.size() < k && !link.empty()) {
      frames.push_back(std::move(link.front()));
      link.pop_front();
    }
    Qp& gq = to_b_side ? g.b.qp : g.a.qp;
    Qp& fq = to_b_side ? f.b.qp : f.a.qp;
    std::vector<wire::RoceView> views;
    std::vector<RxResult> gres;
    for (const auto& frame : frames) {
      wire::ParsedFrame pf;
      wire::RoceView v;
      const wire::DropReason why = wire::parse_frame(frame, opt, pf);
      REQUIRE(wire::parse_frame(frame, opt, v) == why);
      if (why != wire::DropReason::kNone) continue;
      gres.push_back(gq.on_packet(now_ns, pf.hdr, pf.payload));
      views.push_back(v);
    }
    std::vector<RxResult> fres(views.size());
    fq.on_packets(now_ns, views, fres.data());
    REQUIRE(gres == fres);
  }

  // A chain of up to k send WRs (random, as post_send makes them; now and then
  // a bad one): the general world posts them one by one until one is refused,
  // the fused world as one chain.
  void post_send_chain(Rng& rng, uint64_t& id, uint32_t pmtu, size_t k) {
    std::vector<SendWr> wrs;
    for (size_t i = 0; i < k; ++i) {
      wrs.push_back(make_send_wr(rng, ++id, pmtu));
      if (rng.below(30) == 0) wrs.back().sge[0].lkey = 0x999;  // no such region
    }
    size_t gn = 0;
    Status gst = Status::kOk;
    for (; gn < k; ++gn) {
      gst = g.a.qp.post_send(wrs[gn]);
      if (gst != Status::kOk) break;
    }
    Status fst;
    REQUIRE(f.a.qp.post_send(wrs, fst) == gn);
    REQUIRE(fst == gst);
    ++chains;
  }

  void post_recv_chain(Rng& rng, uint64_t& id, uint32_t pmtu, size_t k) {
    std::vector<RecvWr> wrs;
    for (size_t i = 0; i < k; ++i) {
      wrs.push_back(make_recv_wr(rng, ++id, pmtu));
      if (rng.below(30) == 0) wrs.back().sge[0].lkey = 0x999;
    }
    size_t gn = 0;
    Status gst = Status::kOk;
    for (; gn < k; ++gn) {
      gst = g.b.qp.post_recv(wrs[gn]);
      if (gst != Status::kOk) break;
    }
    Status fst;
    REQUIRE(f.b.qp.post_recv(wrs, fst) == gn);
    REQUIRE(fst == gst);
    ++chains;
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
    const SendWr wr = make_send_wr(rng, id, pmtu);
    REQUIRE(g.a.qp.post_send(wr) == f.a.qp.post_send(wr));
  }

  static SendWr make_send_wr(Rng& rng, uint64_t id, uint32_t pmtu) {
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
    return wr;
  }

  void post_recv(Rng& rng, uint64_t id, uint32_t pmtu) {
    const RecvWr r = make_recv_wr(rng, id, pmtu);
    REQUIRE(g.b.qp.post_recv(r) == f.b.qp.post_recv(r));
  }

  static RecvWr make_recv_wr(Rng& rng, uint64_t id, uint32_t pmtu) {
    RecvWr r;
    r.wr_id = id;
    // Now and then a buffer too small: a local length error and ERR.
    const uint32_t len = rng.below(200) == 0 ? 2 : 4 * pmtu;
    r.sge[0] = Sge{kBase + 0xC0000 + 0x4000 * rng.below(16), len, 0x100};
    r.num_sge = 1;
    return r;
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

  // batched: the fused world uses the burst and chain calls (sizes 1..12)
  // as often as the single ones.
  void run(uint64_t seed, int steps, uint32_t pmtu, bool batched = false) {
    Rng rng{seed};
    // Distinct bytes to move around.
    for (uint32_t i = 0; i < kMrBytes; ++i) {
      g.a.mem()[i] = f.a.mem()[i] = static_cast<uint8_t>(i * 7 + (i >> 9));
      g.b.mem()[i] = f.b.mem()[i] = static_cast<uint8_t>(i * 13 + (i >> 11));
    }
    uint64_t id = 0;
    for (int s = 0; s < steps; ++s) {
      const uint32_t act = rng.below(20);
      if (batched && rng.below(2) == 0 && act < 19) {
        const size_t k = 1 + rng.below(12);
        if (act < 3) {
          post_send_chain(rng, id, pmtu, k);
        } else if (act < 6) {
          post_recv_chain(rng, id, pmtu, k);
        } else if (act < 13) {
          transmit_burst(act < 10, rng, k);
        } else {
          deliver_burst(act < 16, k);
        }
      } else if (act < 3) {
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

void run_modes(bool sr, bool batched = false, bool ipv6 = false) {
  uint64_t frames = 0, bursts = 0, chains = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    QpAttr attr = default_attr();
    attr.selective_repeat = sr;
    attr.pmtu_bytes = seed % 3 == 0 ? 256 : 1024;
    attr.retry_cnt = 7;
    attr.rnr_retry = seed % 2 ? 7 : 2;
    attr.max_rd_atomic = attr.max_dest_rd_atomic = 4;
    Lockstep l(attr, cfg(0x11, seed % 4 == 0 ? 2 : 64), cfg(0x22, 64), ipv6);
    INFO("seed " << seed);
    l.run(seed, 4000, attr.pmtu_bytes, batched);
    frames += l.fused_frames;
    bursts += l.bursts;
    chains += l.chains;
  }
  REQUIRE(frames > 12 * 300);  // the runs did move traffic (some end early in ERR)
  if (batched) {
    REQUIRE(bursts > 12 * 100);
    REQUIRE(chains > 12 * 100);
  }
}

TEST_CASE("fused datapath: go-back-N behaves exactly as the general path") { run_modes(false); }

TEST_CASE("fused datapath: selective repeat behaves exactly as the general path") {
  run_modes(true);
}

TEST_CASE("burst and chain calls: go-back-N behaves exactly as the general path") {
  run_modes(false, true);
}

TEST_CASE("burst and chain calls: selective repeat behaves exactly as the general path") {
  run_modes(true, true);
}

TEST_CASE("IPv6 QPs: the burst and chain calls behave exactly as the general path") {
  run_modes(false, true, true);
  run_modes(true, true, true);
}

// The edges of the burst and chain calls, directed: a chain refused midway
// (a bad SGE, then a full queue), a TX burst that stops at the window with a
// build error inside it, an RX burst with a gap, an RNR and a receive too
// small inside it; each against the one-at-a-time calls on a twin pair.
TEST_CASE("burst and chain calls: partial bursts, errors mid-burst, window full") {
  QpConfig ca = QpPair::make_cfg(0x11);
  ca.window_packets = 6;
  ca.sq_depth = 8;
  QpPair g(default_attr(), 100, 5000, ca), f(default_attr(), 100, 5000, ca);
  wire::ParseOptions popt;
  popt.pmtu_bytes = 1024;
  const wire::FrameTemplate t = wire::make_frame_template(wire::FrameAddr{});
  auto send_wr = [](uint64_t id) {
    SendWr wr;
    wr.wr_id = id;
    wr.sge[0] = Sge{kBase + 64 * id, 64, 0x100};
    wr.num_sge = 1;
    return wr;
  };
  // A chain of 5 whose third names no region: 2 posted, kInvalidSge.
  std::vector<SendWr> wrs;
  for (uint64_t i = 0; i < 5; ++i) wrs.push_back(send_wr(i));
  wrs[2].sge[0].lkey = 0x999;
  Status st;
  REQUIRE(f.a.qp.post_send(wrs, st) == 2);
  REQUIRE(st == Status::kInvalidSge);
  for (int i = 0; i < 2; ++i) REQUIRE(g.a.qp.post_send(wrs[i]) == Status::kOk);
  REQUIRE(g.a.qp.post_send(wrs[2]) == Status::kInvalidSge);
  // A chain of 10 into the 6 free slots: 6 posted, kQueueFull.
  wrs.clear();
  for (uint64_t i = 10; i < 20; ++i) wrs.push_back(send_wr(i));
  REQUIRE(f.a.qp.post_send(wrs, st) == 6);
  REQUIRE(st == Status::kQueueFull);
  for (int i = 0; i < 6; ++i) REQUIRE(g.a.qp.post_send(wrs[i]) == Status::kOk);
  REQUIRE(g.a.qp.post_send(wrs[6]) == Status::kQueueFull);
  REQUIRE(f.a.qp.sq_free() == 0);
  require_same(g.a.qp, f.a.qp);

  // Receives: 2 posted, the third too small for a 64-byte SEND (it fails
  // the QP on arrival), then a chain with a bad key.
  std::vector<RecvWr> rrs(4);
  for (size_t i = 0; i < rrs.size(); ++i) {
    rrs[i].wr_id = 100 + i;
    rrs[i].sge[0] = Sge{kBase + 0x8000 + 0x100 * i, i == 2 ? 8u : 128u, 0x100};
    rrs[i].num_sge = 1;
  }
  rrs[3].sge[0].lkey = 0x999;
  REQUIRE(f.b.qp.post_recv(rrs, st) == 3);
  REQUIRE(st == Status::kInvalidSge);
  for (int i = 0; i < 3; ++i) REQUIRE(g.b.qp.post_recv(rrs[i]) == Status::kOk);
  REQUIRE(g.b.qp.post_recv(rrs[3]) == Status::kInvalidSge);

  // TX burst of 8 buffers, the second too small: the window (6) ends it.
  std::vector<std::vector<uint8_t>> bufs(8, std::vector<uint8_t>(2048));
  std::vector<std::span<uint8_t>> rooms;
  for (auto& b : bufs) rooms.emplace_back(b);
  rooms[1] = rooms[1].first(60);
  std::vector<wire::BuildResult> res(8);
  REQUIRE(f.a.qp.poll_tx_frames(f.now_ns, t, rooms, res.data()) == 6);
  REQUIRE(res[1].status == wire::BuildStatus::kBufferTooSmall);
  std::vector<std::vector<uint8_t>> frames;
  for (size_t i = 0; i < 6; ++i) {
    TxPacket tx;
    REQUIRE(g.a.qp.poll_tx(g.now_ns, tx));
    std::vector<uint8_t> gb(2048);
    const wire::BuildResult gr = wire::build_frame(
        std::span(gb).first(rooms[i].size()), t, tx.hdr,
        std::span<const std::span<const uint8_t>>(tx.payload.data(), tx.payload_parts));
    REQUIRE(gr.status == res[i].status);
    REQUIRE(gr.len_bytes == res[i].len_bytes);
    if (!gr.ok()) continue;
    REQUIRE(std::memcmp(gb.data(), bufs[i].data(), gr.len_bytes) == 0);
    frames.emplace_back(gb.begin(), gb.begin() + gr.len_bytes);
  }
  TxPacket none;
  REQUIRE_FALSE(g.a.qp.poll_tx(g.now_ns, none));
  REQUIRE(f.a.qp.poll_tx_frames(f.now_ns, t, rooms, res.data()) == 0);  // window full
  require_same(g.a.qp, f.a.qp);

  // RX burst at b: PSN 100, then 102.. (101 was the too-small buffer's
  // frame): a gap (NAK), duplicates; then in order again after a resend.
  auto deliver = [&](const std::vector<std::vector<uint8_t>>& burst) {
    return rx_burst_to_b_same(g, f, burst, popt);
  };
  const auto r1 = deliver({frames[0], frames[1], frames[0], frames[2]});
  REQUIRE(r1[0] == RxResult::kAccepted);
  REQUIRE(r1[1] == RxResult::kOutOfSequence);
  REQUIRE(r1[2] == RxResult::kDuplicate);
  // The NAK and ACK back to a, as a burst of its own; a rewinds.
  responses_to_a_same(g, f, t, popt);
  // Resent from PSN 101 (the NAK's): a burst of 6, PSNs 101..106, as the window allows.
  frames.clear();
  for (auto& r : rooms) r = std::span<uint8_t>(r.data(), 2048);
  const size_t n = f.a.qp.poll_tx_frames(f.now_ns, t, rooms, res.data());
  REQUIRE(n == 6);
  for (size_t i = 0; i < n; ++i) {
    TxPacket tx;
    REQUIRE(g.a.qp.poll_tx(g.now_ns, tx));
    REQUIRE(res[i].ok());
    frames.emplace_back(bufs[i].begin(), bufs[i].begin() + res[i].len_bytes);
  }
  require_same(g.a.qp, f.a.qp);
  // 101 lands in the 128-byte receive, 102 in the 8-byte one (local length
  // error: b fails), the rest after it see a QP in ERR.
  const auto r2 = deliver(frames);
  REQUIRE(r2[0] == RxResult::kAccepted);
  REQUIRE(f.b.qp.state() == QpState::kErr);
  const auto gc = g.b.drain_cq();
  const auto fc = f.b.drain_cq();
  REQUIRE(gc.size() == fc.size());
  for (size_t i = 0; i < gc.size(); ++i) {
    REQUIRE(gc[i].wr_id == fc[i].wr_id);
    REQUIRE(gc[i].status == fc[i].status);
    REQUIRE(gc[i].len_bytes == fc[i].len_bytes);
  }
  REQUIRE(std::memcmp(g.b.mem(), f.b.mem(), kMrBytes) == 0);
}

// An RX burst with no receive posted for its second SEND: RNR NAK in the
// middle of a run, the run's coalesced ACK before it.
TEST_CASE("burst and chain calls: RNR in the middle of an RX burst") {
  QpPair g, f;
  wire::ParseOptions popt;
  popt.pmtu_bytes = 1024;
  const wire::FrameTemplate t = wire::make_frame_template(wire::FrameAddr{});
  RecvWr r;
  r.wr_id = 1;
  r.sge[0] = Sge{kBase + 0x8000, 256, 0x100};
  r.num_sge = 1;
  std::vector<std::vector<uint8_t>> frames;
  for (QpPair* p : {&g, &f}) {
    REQUIRE(p->b.qp.post_recv(r) == Status::kOk);
    for (uint64_t i = 0; i < 3; ++i) {
      SendWr wr;
      wr.wr_id = i;
      wr.sge[0] = Sge{kBase + 64 * i, 64, 0x100};
      wr.num_sge = 1;
      REQUIRE(p->a.qp.post_send(wr) == Status::kOk);
    }
  }
  for (int i = 0; i < 3; ++i) {
    std::vector<uint8_t> fb(2048);
    const wire::BuildResult br = f.a.qp.poll_tx_frame(f.now_ns, t, fb);
    TxPacket tx;
    REQUIRE(g.a.qp.poll_tx(g.now_ns, tx));
    REQUIRE(br.ok());
    fb.resize(br.len_bytes);
    frames.push_back(fb);
  }
  REQUIRE(frames.size() == 3);
  const std::vector<RxResult> fres = rx_burst_to_b_same(g, f, frames, popt);
  REQUIRE(fres[0] == RxResult::kAccepted);
  REQUIRE(fres[1] == RxResult::kDropped);  // RNR
  require_same(g.b.qp, f.b.qp);
  REQUIRE(f.b.qp.counters().rnr_naks_sent == 1);
  // What b sends now (the ACK of the first, then the RNR NAK) is the same.
  REQUIRE(drain_responses_same(g.b.qp, g.now_ns, f.b.qp, f.now_ns, t).size() == 2);
}

// A TX burst's run of SEND onlys takes its PSNs and retransmission count
// from the cursor alone (each WQE one PSN, starting at the cursor's): check
// that against the general path after a go-back-N rewind (a burst that
// resends and then sends new PSNs past snd_max) and after an ACK overtakes a
// rewind (the cursor moved by the completion, not by a send).
// Streaming through queues of 8 (CQs of 16) in chains and bursts of 1..8, so
// that chains, TX bursts, RX runs and ACKs start at every ring offset and
// cross the wrap: the burst calls walk each stretch of a ring with a pointer
// and must start again at the ring's start exactly where it wraps. A walk
// past a ring's end reads or writes outside it: the sanitizer build reports
// it (checked: each of the four stretch bounds widened fails there), and a
// wrong slot shows as a different completion, result or byte here.
TEST_CASE("burst and chain calls: chains and runs across the ends of the rings") {
  QpConfig ca = QpPair::make_cfg(0x11), cb = QpPair::make_cfg(0x22);
  for (QpConfig* c : {&ca, &cb}) c->sq_depth = c->rq_depth = 8;
  QpPair g(default_attr(), 100, 5000, ca, cb), f(default_attr(), 100, 5000, ca, cb);
  wire::ParseOptions popt;
  popt.pmtu_bytes = 1024;
  const wire::FrameTemplate t = wire::make_frame_template(wire::FrameAddr{});
  for (uint32_t i = 0; i < kMrBytes; ++i) {
    g.a.mem()[i] = f.a.mem()[i] = static_cast<uint8_t>(i * 7 + (i >> 9));
  }
  auto same_completions = [](Endpoint& gs, Endpoint& fs, uint64_t first_id, size_t n) {
    const auto gc = gs.drain_cq();
    const auto fc = fs.drain_cq();
    REQUIRE(gc.size() == n);
    REQUIRE(fc.size() == n);
    for (size_t i = 0; i < n; ++i) {
      REQUIRE(fc[i].wr_id == first_id + i);
      REQUIRE(gc[i].wr_id == fc[i].wr_id);
      REQUIRE(fc[i].status == WcStatus::kSuccess);
      REQUIRE(gc[i].status == fc[i].status);
      REQUIRE(gc[i].opcode == fc[i].opcode);
      REQUIRE(gc[i].has_imm == fc[i].has_imm);
      REQUIRE(gc[i].imm == fc[i].imm);
      REQUIRE(gc[i].len_bytes == fc[i].len_bytes);
    }
  };
  // First one SEND b -> a, so that b's CQ (receives and this send) runs one
  // slot ahead of its receive queue and the two wrap at different packets.
  {
    RecvWr r;
    r.wr_id = 900;
    r.sge[0] = Sge{kBase + 0x60000, 128, 0x100};
    r.num_sge = 1;
    SendWr w;
    w.wr_id = 901;
    w.sge[0] = Sge{kBase, 16, 0x100};
    w.num_sge = 1;
    for (QpPair* p : {&g, &f}) {
      REQUIRE(p->a.qp.post_recv(r) == Status::kOk);
      REQUIRE(p->b.qp.post_send(w) == Status::kOk);
      REQUIRE(p->pump() == 2);  // the SEND and its ACK
      REQUIRE(p->a.drain_cq().size() == 1);
      REQUIRE(p->b.drain_cq().size() == 1);
    }
  }
  uint64_t id = 0;
  uint64_t packets = 0;
  for (int round = 0; round < 60; ++round) {
    const size_t k = 1 + static_cast<size_t>(round * 5) % 8;  // 1, 6, 3, 8, 5, 2, 7, 4, ...
    const uint64_t first = id + 1;
    std::vector<RecvWr> rrs(k);
    std::vector<SendWr> wrs(k);
    for (size_t i = 0; i < k; ++i) {
      ++id;
      rrs[i].wr_id = id;
      rrs[i].sge[0] = Sge{kBase + 0x40000 + 0x100 * (id % 64), 128, 0x100};
      rrs[i].num_sge = 1;
      wrs[i].wr_id = id;
      wrs[i].opcode = id % 3 == 0 ? WrOpcode::kSendImm : WrOpcode::kSend;
      wrs[i].imm = static_cast<uint32_t>(id * 0x01000193);
      wrs[i].sge[0] = Sge{kBase + 97 * id, static_cast<uint32_t>(1 + id % 100), 0x100};
      wrs[i].num_sge = 1;
    }
    Status st;
    REQUIRE(f.b.qp.post_recv(rrs, st) == k);
    REQUIRE(f.a.qp.post_send(wrs, st) == k);
    for (size_t i = 0; i < k; ++i) {
      REQUIRE(g.b.qp.post_recv(rrs[i]) == Status::kOk);
      REQUIRE(g.a.qp.post_send(wrs[i]) == Status::kOk);
    }
    // The TX burst, then the RX burst of all of it at b.
    const auto frames = tx_burst_same(g, f, t, k);
    REQUIRE(frames.size() == k);
    REQUIRE(rx_burst_to_b_same(g, f, frames, popt) ==
            std::vector<RxResult>(k, RxResult::kAccepted));
    packets += k;
    // The ACKs back to a: every SEND completes.
    responses_to_a_same(g, f, t, popt);
    same_completions(g.a, f.a, first, k);
    same_completions(g.b, f.b, first, k);
    REQUIRE(std::memcmp(g.b.mem(), f.b.mem(), kMrBytes) == 0);
  }
  REQUIRE(packets == 270);  // 60 rounds of 1..8 (seven of each, then 1, 6, 3, 8)
  // The last receive buffers hold the last SENDs' bytes.
  const uint64_t last = id;
  const uint32_t len = static_cast<uint32_t>(1 + last % 100);
  REQUIRE(std::memcmp(f.b.mem() + 0x40000 + 0x100 * (last % 64), f.a.mem() + 97 * last, len) == 0);
}

TEST_CASE("burst and chain calls: TX bursts after a rewind and after an overtaken rewind") {
  QpPair g, f;
  wire::ParseOptions popt;
  popt.pmtu_bytes = 1024;
  const wire::FrameTemplate t = wire::make_frame_template(wire::FrameAddr{});
  for (QpPair* p : {&g, &f}) {
    for (uint64_t i = 0; i < 8; ++i) {
      SendWr wr;
      wr.wr_id = i;
      wr.opcode = i % 3 == 1 ? WrOpcode::kSendImm : WrOpcode::kSend;
      wr.imm = 0x1000u + static_cast<uint32_t>(i);
      wr.sge[0] = Sge{kBase + 64 * i, 61 + static_cast<uint32_t>(i), 0x100};
      wr.num_sge = 1;
      REQUIRE(p->a.qp.post_send(wr) == Status::kOk);
      RecvWr r;
      r.wr_id = 100 + i;
      r.sge[0] = Sge{kBase + 0x8000 + 0x100 * i, 128, 0x100};
      r.num_sge = 1;
      REQUIRE(p->b.qp.post_recv(r) == Status::kOk);
    }
  }
  auto burst = [&](size_t k) { return tx_burst_same(g, f, t, k); };
  auto timeout = [&]() {
    for (QpPair* p : {&g, &f}) {
      p->now_ns += 5'000'000;  // past the 4.2 ms ACK timeout
      p->a.qp.on_timer(p->now_ns);
    }
    require_same(g.a.qp, f.a.qp);
  };
  // Both worlds' QPs: the frames to `to` (b or a), parsed and delivered.
  auto deliver = [&](const std::vector<std::vector<uint8_t>>& frames, bool to_b) {
    for (const auto& fr : frames) {
      wire::ParsedFrame pf;
      wire::RoceView v;
      REQUIRE(wire::parse_frame(fr, popt, pf) == wire::DropReason::kNone);
      REQUIRE(wire::parse_frame(fr, popt, v) == wire::DropReason::kNone);
      Qp& gq = to_b ? g.b.qp : g.a.qp;
      Qp& fq = to_b ? f.b.qp : f.a.qp;
      REQUIRE(gq.on_packet(g.now_ns, pf.hdr, pf.payload) == fq.on_packet(f.now_ns, v));
      require_same(gq, fq);
    }
  };
  REQUIRE(burst(3).size() == 3);  // PSNs 100..102, lost
  timeout();                      // back to 100
  REQUIRE(f.a.qp.counters().retries == 1);
  // 100..102 again, then 103..105 new: 3 retransmissions.
  const auto sent = burst(6);
  REQUIRE(sent.size() == 6);
  REQUIRE(f.a.qp.counters().tx_retransmits == 3);
  deliver(sent, true);
  const auto acks = drain_responses_same(g.b.qp, g.now_ns, f.b.qp, f.now_ns, t);
  REQUIRE_FALSE(acks.empty());
  timeout();  // the ACKs are late: back to 100 again
  REQUIRE(f.a.qp.counters().retries == 2);
  deliver(acks, false);  // they complete 100..105: the cursor moves to 106
  REQUIRE(f.a.qp.una_psn() == 106);
  const uint64_t retransmits = f.a.qp.counters().tx_retransmits;
  REQUIRE(burst(8).size() == 2);  // 106, 107: new, the queue's last two
  REQUIRE(f.a.qp.counters().tx_retransmits == retransmits);
  REQUIRE(g.a.drain_cq().size() == f.a.drain_cq().size());
}

// The send chain numbers no receives without SR (only SR reads the
// numbers): a QP that posted chains without SR, reset and brought up again
// with SR, must still have its SENDs consume the peer's receives in order.
TEST_CASE("burst and chain calls: SR after a reset of a QP that posted chains without it") {
  QpPair p;
  auto post = [&](uint64_t first, size_t k, bool chain) {
    std::vector<SendWr> wrs(k);
    for (size_t i = 0; i < k; ++i) {
      wrs[i].wr_id = first + i;
      wrs[i].opcode = i % 2 ? WrOpcode::kSendImm : WrOpcode::kSend;
      wrs[i].sge[0] = Sge{kBase + 0x100 * (first + i), 40 + static_cast<uint32_t>(i), 0x100};
      wrs[i].num_sge = 1;
      RecvWr r;
      r.wr_id = 1000 + first + i;
      r.sge[0] = Sge{kBase + 0x40000 + 0x100 * (first + i), 128, 0x100};
      r.num_sge = 1;
      REQUIRE(p.b.qp.post_recv(r) == Status::kOk);
    }
    Status st;
    if (chain) {
      REQUIRE(p.a.qp.post_send(wrs, st) == k);
    } else {
      for (const SendWr& wr : wrs) REQUIRE(p.a.qp.post_send(wr) == Status::kOk);
    }
    p.pump();
    const auto got = p.b.drain_cq();
    REQUIRE(got.size() == k);
    for (size_t i = 0; i < k; ++i) {
      REQUIRE(got[i].wr_id == 1000 + first + i);
      REQUIRE(got[i].status == WcStatus::kSuccess);
      REQUIRE(got[i].len_bytes == 40 + i);
      REQUIRE(std::memcmp(p.b.mem() + 0x40000 + 0x100 * (first + i),
                          p.a.mem() + 0x100 * (first + i), 40 + i) == 0);
    }
    REQUIRE(p.a.drain_cq().size() == k);
  };
  post(0, 5, true);
  post(5, 3, false);
  post(8, 4, true);
  for (Qp* q : {&p.a.qp, &p.b.qp}) {
    QpAttr r;
    r.state = QpState::kReset;
    REQUIRE(q->modify(r, kAttrState) == Status::kOk);
  }
  QpAttr sr = default_attr();
  sr.selective_repeat = true;
  bring_up(p.a.qp, sr, 0x22, 300, 7000);
  bring_up(p.b.qp, sr, 0x11, 7000, 300);
  post(20, 6, false);
  post(26, 4, true);  // under SR the chain takes its SENDs one by one
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
TEST_CASE("burst and chain calls: an RX burst does not write a deregistered receive") {
  QpPair f;
  wire::ParseOptions popt;
  popt.pmtu_bytes = 1024;
  const wire::FrameTemplate t = wire::make_frame_template(wire::FrameAddr{});
  const std::vector<RecvWr> recvs = {make_recv(1, 0x8000, 64), make_recv(2, 0x9000, 64)};
  Status st;
  REQUIRE(f.b.qp.post_recv(recvs, st) == 2);
  for (uint64_t i = 0; i < 2; ++i) {
    REQUIRE(f.a.qp.post_send(make_wr(WrOpcode::kSend, i, 64 * i, 64)) == Status::kOk);
  }
  std::memset(f.a.mem(), 0x77, 128);
  std::vector<std::vector<uint8_t>> frames;
  for (int i = 0; i < 2; ++i) {
    std::vector<uint8_t> fb(2048);
    const wire::BuildResult br = f.a.qp.poll_tx_frame(f.now_ns, t, fb);
    REQUIRE(br.ok());
    fb.resize(br.len_bytes);
    frames.push_back(fb);
  }
  f.b.mrs.remove(0);
  std::vector<wire::RoceView> views(2);
  for (size_t i = 0; i < 2; ++i) {
    REQUIRE(wire::parse_frame(frames[i], popt, views[i]) == wire::DropReason::kNone);
  }
  std::vector<RxResult> res(2);
  f.b.qp.on_packets(f.now_ns, views, res.data());
  CHECK(res[0] == RxResult::kDropped);
  CHECK(f.b.mem()[0x8000] == 0);
  CHECK(f.b.mem()[0x9000] == 0);
  auto c = f.b.drain_cq();
  REQUIRE(c.size() == 2);
  CHECK(c[0].status == WcStatus::kLocalProtectionError);
  CHECK(c[1].status == WcStatus::kWrFlushError);
}

TEST_CASE("burst and chain calls: a TX burst does not read a deregistered region") {
  QpPair f;
  const wire::FrameTemplate t = wire::make_frame_template(wire::FrameAddr{});
  std::vector<SendWr> wrs;
  for (uint64_t i = 0; i < 3; ++i) wrs.push_back(make_wr(WrOpcode::kSend, i, 64 * i, 64));
  Status st;
  REQUIRE(f.a.qp.post_send(wrs, st) == 3);  // the chain post
  std::vector<std::vector<uint8_t>> bufs(4, std::vector<uint8_t>(2048));
  std::vector<std::span<uint8_t>> rooms(bufs.begin(), bufs.end());
  std::vector<wire::BuildResult> res(4);
  SECTION("another region registered meanwhile: sent") {
    f.a.mrs.add(kBase + kMrBytes, 4096, kAllAccess);
    CHECK(f.a.qp.poll_tx_frames(f.now_ns, t, rooms, res.data()) == 3);
    CHECK(f.a.drain_cq().empty());
  }
  SECTION("the region deregistered: nothing sent, local protection error") {
    f.a.mrs.remove(0);
    SECTION("burst") { CHECK(f.a.qp.poll_tx_frames(f.now_ns, t, rooms, res.data()) == 0); }
    SECTION("one frame") {
      const wire::BuildResult br = f.a.qp.poll_tx_frame(f.now_ns, t, bufs[0]);
      CHECK(br.ok());
      CHECK(br.len_bytes == 0);
    }
    CHECK(f.a.qp.counters().tx_packets == 0);
    auto ca = f.a.drain_cq();
    REQUIRE(ca.size() == 3);
    CHECK(ca[0].wr_id == 0);
    CHECK(ca[0].status == WcStatus::kLocalProtectionError);
    CHECK(ca[1].status == WcStatus::kWrFlushError);
    CHECK(ca[2].status == WcStatus::kWrFlushError);
    CHECK(f.a.qp.state() == QpState::kErr);
  }
}

// send_run() compares no WQE's epoch while every WQE in the send queue is of
// the current one (Qp::sq_epoch_): that covers the WQEs sent and not yet
// acknowledged, which a retransmission sends again.
TEST_CASE("burst and chain calls: a region deregistered under a sent WQE stops its resend") {
  QpPair f;
  const wire::FrameTemplate t = wire::make_frame_template(wire::FrameAddr{});
  REQUIRE(add_second_region(f) == kSecondLkey);
  REQUIRE(f.a.qp.post_send(from_second_region(make_wr(WrOpcode::kSend, 0, 0, 64), 64)) ==
          Status::kOk);
  std::vector<uint8_t> first(2048);
  const wire::BuildResult b0 = f.a.qp.poll_tx_frame(f.now_ns, t, first);
  REQUIRE(b0.ok());
  REQUIRE(b0.len_bytes > 0);
  f.a.mrs.remove(1);  // the second region, under the SEND in flight
  std::vector<SendWr> wrs;
  for (uint64_t i = 1; i <= 3; ++i) wrs.push_back(make_wr(WrOpcode::kSend, i, 64 * i, 64));
  Status st;
  REQUIRE(f.a.qp.post_send(wrs, st) == 3);
  std::vector<std::vector<uint8_t>> bufs(4, std::vector<uint8_t>(2048));
  std::vector<std::span<uint8_t>> rooms(bufs.begin(), bufs.end());
  std::vector<wire::BuildResult> res(4);
  // The SENDs posted after the change: their memory is current, all sent.
  CHECK(f.a.qp.poll_tx_frames(f.now_ns, t, rooms, res.data()) == 3);
  CHECK(f.a.qp.counters().tx_packets == 4);
  // No ACK: the timeout goes back to the first SEND, whose region is gone.
  f.now_ns = f.a.qp.next_deadline_ns();
  f.a.qp.on_timer(f.now_ns);
  CHECK(f.a.qp.poll_tx_frames(f.now_ns, t, rooms, res.data()) == 0);
  CHECK(f.a.qp.counters().tx_packets == 4);
  auto ca = f.a.drain_cq();
  REQUIRE(ca.size() == 4);
  CHECK(ca[0].wr_id == 0);
  CHECK(ca[0].status == WcStatus::kLocalProtectionError);
  CHECK(ca[1].status == WcStatus::kWrFlushError);
  CHECK(f.a.qp.state() == QpState::kErr);
}

}  // namespace conduit::transport::test
