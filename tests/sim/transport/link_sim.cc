#include "link_sim.h"

#include <algorithm>
#include <memory>

namespace conduit::transport::sim {

void Link::send(uint64_t now_ns, std::span<const uint8_t> frame) {
  ++stats_.frames;
  // 20 B of preamble and inter-frame gap per frame, as on Ethernet.
  const auto ser_ns =
      static_cast<uint64_t>(static_cast<double>(frame.size() + 24) * 8.0 / cfg_.rate_gbps);
  busy_until_ns_ = now_ns + (ser_ns == 0 ? 1 : ser_ns);
  if (rng_.chance(cfg_.loss)) {
    ++stats_.lost;
    return;
  }
  int copies = 1;
  if (rng_.chance(cfg_.duplicate)) {
    ++stats_.duplicated;
    copies = 2;
  }
  for (int c = 0; c < copies; ++c) {
    InFlight f{busy_until_ns_ + cfg_.delay_ns, seq_++, false,
               std::vector<uint8_t>(frame.begin(), frame.end())};
    if (rng_.chance(cfg_.reorder)) {
      ++stats_.reordered;
      f.arrive_ns += 1 + rng_.below(cfg_.reorder_extra_ns);
    }
    if (rng_.chance(cfg_.corrupt)) {
      ++stats_.corrupted;
      const uint64_t bit = rng_.below(f.bytes.size() * 8);
      f.bytes[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      f.corrupted = true;
    }
    q_.push(std::move(f));
  }
}

uint64_t Link::next_arrival_ns() const { return q_.empty() ? UINT64_MAX : q_.top().arrive_ns; }

bool Link::receive(uint64_t now_ns, std::vector<uint8_t>& frame, bool& corrupted) {
  if (q_.empty() || q_.top().arrive_ns > now_ns) return false;
  // priority_queue::top is const; the frame is copied out (test code).
  frame = q_.top().bytes;
  corrupted = q_.top().corrupted;
  q_.pop();
  return true;
}

namespace {

void bring_up(Qp& qp, QpAttr a, uint32_t remote_qpn, uint32_t sq_psn, uint32_t rq_psn) {
  a.dest_qpn = remote_qpn;
  a.sq_psn = sq_psn;
  a.rq_psn = rq_psn;
  a.state = QpState::kInit;
  qp.modify(a, kAttrState | kAttrAccessFlags);
  a.state = QpState::kRtr;
  qp.modify(a, kAttrState | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn | kAttrMaxDestRdAtomic |
                   kAttrMinRnrTimer | kAttrSelectiveRepeat);
  a.state = QpState::kRts;
  qp.modify(
      a, kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry | kAttrMaxRdAtomic);
}

}  // namespace

Sim::Sim(const QpConfig& cfg_a, const QpConfig& cfg_b, const QpAttr& attr, const LinkConfig& link,
         uint64_t seed)
    : a_(std::make_unique<Endpoint>(cfg_a)),
      b_(std::make_unique<Endpoint>(cfg_b)),
      ab_(link, seed * 2 + 1),
      ba_(link, seed * 2 + 2) {
  Rng r(seed);
  const uint32_t psn_a = static_cast<uint32_t>(r.next()) & 0xFFFFFF;
  const uint32_t psn_b = static_cast<uint32_t>(r.next()) & 0xFFFFFF;
  bring_up(a_->qp, attr, cfg_b.qpn, psn_a, psn_b);
  bring_up(b_->qp, attr, cfg_a.qpn, psn_b, psn_a);
  a_->addr.src_ip = 0xC6120001;  // 198.18.0.1
  a_->addr.dst_ip = 0xC6120002;
  b_->addr.src_ip = 0xC6120002;
  b_->addr.dst_ip = 0xC6120001;
  a_->addr.src_port = wire::udp_sport_for_qp(cfg_a.qpn, cfg_b.qpn);
  b_->addr.src_port = wire::udp_sport_for_qp(cfg_b.qpn, cfg_a.qpn);
  a_->addr.ecn = b_->addr.ecn = wire::kEcnEct0;
  a_->parse.pmtu_bytes = b_->parse.pmtu_bytes = attr.pmtu_bytes;
  a_->tmpl = wire::make_frame_template(a_->addr);
  b_->tmpl = wire::make_frame_template(b_->addr);
}

void Sim::transmit(Endpoint& e, Link& link) {
  while (link.free_at(now_ns_)) {
    const wire::BuildResult r = e.qp.poll_tx_frame(now_ns_, e.tmpl, e.tx_buf);
    if (r.ok() && r.len_bytes == 0) {
      e.maybe_tx = false;
      return;
    }
    if (!r.ok()) {
      ++build_errors_;
      continue;
    }
    link.send(now_ns_, std::span<const uint8_t>(e.tx_buf.data(), r.len_bytes));
  }
  e.maybe_tx = true;
}

void Sim::deliver(Link& link, Endpoint& to, bool a_to_b) {
  bool corrupted = false;
  while (link.receive(now_ns_, rx_buf_, corrupted)) {
    wire::RoceView v;
    if (wire::parse_frame(rx_buf_, to.parse, v) != wire::DropReason::kNone) {
      ++link.stats().parse_drops;
      continue;
    }
    if (corrupted) ++link.stats().corrupted_accepted;
    if (trace) {
      wire::ParsedFrame f;
      wire::parse_frame(rx_buf_, to.parse, f);
      trace(a_to_b, now_ns_, f);
    }
    to.qp.on_packet(now_ns_, v);
    to.maybe_tx = true;
  }
}

bool Sim::run(const std::function<void()>& on_step, const std::function<bool()>& done,
              uint64_t max_events) {
  for (uint64_t ev = 0; ev < max_events; ++ev) {
    deliver(ab_, *b_, true);
    deliver(ba_, *a_, false);
    if (a_->qp.next_deadline_ns() <= now_ns_) {
      a_->qp.on_timer(now_ns_);
      a_->maybe_tx = true;
    }
    if (b_->qp.next_deadline_ns() <= now_ns_) {
      b_->qp.on_timer(now_ns_);
      b_->maybe_tx = true;
    }
    on_step();
    a_->maybe_tx = true;  // the workload may have posted
    b_->maybe_tx = true;
    transmit(*a_, ab_);
    transmit(*b_, ba_);
    if (done()) return true;
    uint64_t next = std::min({ab_.next_arrival_ns(), ba_.next_arrival_ns(),
                              a_->qp.next_deadline_ns(), b_->qp.next_deadline_ns()});
    if (a_->maybe_tx) next = std::min(next, ab_.busy_until_ns());
    if (b_->maybe_tx) next = std::min(next, ba_.busy_until_ns());
    if (next == UINT64_MAX) return done();
    now_ns_ = std::max(now_ns_ + 1, next);
  }
  return done();
}

}  // namespace conduit::transport::sim
