#include "sched/tx_scheduler.h"

#include <algorithm>

namespace conduit::sched {

namespace {
SchedulerConfig sanitize(SchedulerConfig c) {
  c.slot_ns = std::clamp<uint32_t>(c.slot_ns, 1, 1000);
  c.num_slots = std::max<uint32_t>(c.num_slots, 64);
  c.flow_queue_packets = std::max<uint32_t>(c.flow_queue_packets, 1);
  c.dwrr_quantum_bytes = std::max<uint32_t>(c.dwrr_quantum_bytes, 1);
  return c;
}
}  // namespace

TxScheduler::TxScheduler(const SchedulerConfig& config)
    : config_(sanitize(config)),
      slot_ns_(config_.slot_ns),
      wheel_(config_.slot_ns, config_.num_slots) {}

ClassId TxScheduler::add_class(const ClassConfig& config) {
  if (!config.strict && config.weight == 0) return kInvalidId;
  const auto id = static_cast<ClassId>(classes_.size());
  Class c;
  c.config = config;
  c.quantum = uint64_t{config.weight} * config_.dwrr_quantum_bytes;
  classes_.push_back(c);
  shaper_last_.emplace_back();
  order_classes();
  return id;
}

bool TxScheduler::set_class(ClassId id, const ClassConfig& config) {
  if (id >= classes_.size() || (!config.strict && config.weight == 0)) return false;
  Class& c = classes_[id];
  // The shaper's gap after the class's last capped packet is re-derived at the new
  // max rate: a cap raised (or lifted and set again) does not keep the class
  // waiting out a gap of the old, slower one.
  ShaperLast& last = shaper_last_[id];
  if (config.max_rate_bps != c.config.max_rate_bps) last.frac = 0;
  if (config.max_rate_bps != 0 && config.max_rate_bps != c.config.max_rate_bps && last.valid) {
    c.next_tx = last.tx.plus_ps(wire_time_ps(last.len, config.max_rate_bps));
  }
  c.config = config;
  c.quantum = uint64_t{config.weight} * config_.dwrr_quantum_bytes;
  for (Class& k : classes_) k.deficit = 0;
  order_classes();
  return true;
}

bool TxScheduler::move_flow(FlowId id, ClassId cls) {
  if (id >= flows_.size() || flows_[id].state == State::kFree || cls >= classes_.size()) {
    return false;
  }
  Flow& f = flows_[id];
  if (f.cls == cls) return true;
  const bool ready = f.state == State::kReady;
  if (ready) unlink_ready(id);
  f.cls = cls;
  if (ready) push_ready(id);
  return true;
}

// Strict classes by rank (ties by id), weighted ones in id order; the DWRR
// round starts over.
void TxScheduler::order_classes() {
  strict_order_.clear();
  weighted_.clear();
  for (ClassId id = 0; id < classes_.size(); ++id) {
    (classes_[id].config.strict ? strict_order_ : weighted_).push_back(id);
  }
  std::stable_sort(strict_order_.begin(), strict_order_.end(), [this](ClassId a, ClassId b) {
    return classes_[a].config.strict_rank < classes_[b].config.strict_rank;
  });
  rr_ = 0;
  fresh_visit_ = true;
}

FlowId TxScheduler::add_flow(ClassId cls, uint64_t rate_bps) {
  if (cls >= classes_.size()) return kInvalidId;
  FlowId id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = static_cast<FlowId>(flows_.size());
    flows_.emplace_back();
    wheel_.reserve_ids(static_cast<uint32_t>(flows_.size()));
  }
  Flow& f = flows_[id];
  f = Flow{};
  f.queue = PacketRing(config_.flow_queue_packets);
  f.cls = cls;
  f.rate_bps = std::max<uint64_t>(rate_bps, 1);
  f.state = State::kIdle;
  return id;
}

uint32_t TxScheduler::remove_flow(FlowId id) {
  if (id >= flows_.size() || flows_[id].state == State::kFree) return 0;
  Flow& f = flows_[id];
  if (f.state == State::kWaiting) wheel_.remove(id);
  if (f.state == State::kReady) unlink_ready(id);
  const uint32_t dropped = f.queue.size();
  f.queue.clear();
  f.state = State::kFree;
  free_ids_.push_back(id);
  return dropped;
}

size_t TxScheduler::take_queued(FlowId id, PacketRef* out, size_t max) {
  if (id >= flows_.size() || flows_[id].state == State::kFree) return 0;
  Flow& f = flows_[id];
  size_t n = 0;
  while (n < max && !f.queue.empty()) out[n++] = f.queue.pop();
  if (f.queue.empty()) {
    if (f.state == State::kWaiting) wheel_.remove(id);
    if (f.state == State::kReady) unlink_ready(id);
    f.state = State::kIdle;
  }
  return n;
}

FineTime TxScheduler::lag_floor(uint64_t now_ns) const {
  return FineTime::from_ns(now_ns > config_.max_lag_ns ? now_ns - config_.max_lag_ns : 0);
}

void TxScheduler::push_ready(FlowId id) {
  Flow& f = flows_[id];
  Class& c = classes_[f.cls];
  // A class without an eligible packet is idle, and idle time earns its shaper no
  // credit (as a flow's earns it none): its next packet may go when it became
  // eligible, not max_lag_ns before.
  if (c.config.max_rate_bps != 0 && c.head == kInvalidId && c.next_tx < f.next_tx) {
    c.next_tx = f.next_tx;
  }
  f.state = State::kReady;
  f.next = kInvalidId;
  f.prev = c.tail;
  if (c.tail != kInvalidId) {
    flows_[c.tail].next = id;
  } else {
    c.head = id;
  }
  c.tail = id;
}

void TxScheduler::unlink_ready(FlowId id) {
  Flow& f = flows_[id];
  Class& c = classes_[f.cls];
  if (f.prev != kInvalidId) {
    flows_[f.prev].next = f.next;
  } else {
    c.head = f.next;
  }
  if (f.next != kInvalidId) {
    flows_[f.next].prev = f.prev;
  } else {
    c.tail = f.prev;
  }
  f.prev = f.next = kInvalidId;
}

// A flow with queued packets goes to its class's ready list if due, else to
// the wheel.
void TxScheduler::place(FlowId id, uint64_t now_ns) {
  Flow& f = flows_[id];
  if (due(f.next_tx, now_ns)) {
    push_ready(id);
  } else {
    f.state = State::kWaiting;
    wheel_.insert(id, f.next_tx.ns);
  }
}

void TxScheduler::set_rate(FlowId id, uint64_t rate_bps, uint64_t now_ns) {
  Flow& f = flows_[id];
  rate_bps = std::max<uint64_t>(rate_bps, 1);
  if (f.state == State::kFree || rate_bps == f.rate_bps) return;
  f.rate_bps = rate_bps;
  f.frac = 0;
  if (!f.has_last) return;
  // The gap after the last packet is re-derived at the new rate, but a raise does
  // not date the next packet back before now (or before it was due, if it was
  // already): time spent waiting out the old rate's gap earns no burst.
  const FineTime floor = std::min(f.next_tx, FineTime::from_ns(now_ns));
  f.next_tx = std::max(f.last_tx.plus_ps(wire_time_ps(f.last_len, rate_bps)), floor);
  if (f.state == State::kWaiting) {
    wheel_.remove(id);
    place(id, now_ns);
  } else if (f.state == State::kReady && !due(f.next_tx, now_ns)) {
    unlink_ready(id);
    f.state = State::kWaiting;
    wheel_.insert(id, f.next_tx.ns);
  }
}

bool TxScheduler::enqueue(FlowId id, PacketRef packet, uint64_t now_ns) {
  if (id >= flows_.size() || flows_[id].state == State::kFree || packet.len_bytes == 0 ||
      packet.len_bytes > kMaxPacketBytes) {
    ++enqueue_drops_;
    return false;
  }
  Flow& f = flows_[id];
  if (!f.queue.push(packet)) {
    ++enqueue_drops_;
    return false;
  }
  if (f.state == State::kIdle) {
    // Idle time earns no credit: the first packet may go now, not earlier.
    f.next_tx =
        f.has_last ? std::max(f.next_tx, FineTime::from_ns(now_ns)) : FineTime::from_ns(now_ns);
    place(id, now_ns);
  }
  return true;
}

void TxScheduler::expire(uint64_t now_ns) {
  wheel_.expire(now_ns, [this, now_ns](uint32_t id) {
    Flow& f = flows_[id];
    if (due(f.next_tx, now_ns)) {
      push_ready(id);
    } else {
      wheel_.insert(id, f.next_tx.ns);  // parked beyond the horizon: one more lap
    }
  });
}

bool TxScheduler::class_eligible(ClassId id, uint64_t now_ns) const {
  const Class& c = classes_[id];
  if (c.head == kInvalidId) return false;
  return c.config.max_rate_bps == 0 || due(c.next_tx, now_ns);
}

ClassId TxScheduler::pick_class(uint64_t now_ns) {
  for (ClassId id : strict_order_) {
    if (class_eligible(id, now_ns)) return id;
  }
  const size_t n = weighted_.size();
  size_t idle = 0;
  while (idle < n) {
    Class& c = classes_[weighted_[rr_]];
    if (!class_eligible(weighted_[rr_], now_ns)) {
      c.deficit = 0;  // DRR: a class with nothing to send keeps no credit
      rr_ = (rr_ + 1) % n;
      fresh_visit_ = true;
      ++idle;
      continue;
    }
    idle = 0;
    if (fresh_visit_) {
      c.deficit += static_cast<int64_t>(c.quantum);
      fresh_visit_ = false;
    }
    if (c.deficit >= static_cast<int64_t>(flows_[c.head].queue.front().len_bytes)) {
      return weighted_[rr_];
    }
    rr_ = (rr_ + 1) % n;
    fresh_visit_ = true;
  }
  return kInvalidId;
}

bool TxScheduler::dequeue(uint64_t now_ns, Departure* out) {
  expire(now_ns);
  const ClassId cid = pick_class(now_ns);
  if (cid == kInvalidId) return false;
  Class& c = classes_[cid];
  const FlowId id = c.head;
  unlink_ready(id);
  Flow& f = flows_[id];
  const PacketRef p = f.queue.pop();

  const FineTime t = std::max(f.next_tx, lag_floor(now_ns));
  f.last_tx = t;
  f.last_len = p.len_bytes;
  f.has_last = true;
  f.next_tx = t.plus_ps(wire_time_ps(p.len_bytes, f.rate_bps, &f.frac));
  if (c.config.max_rate_bps != 0) {
    const FineTime ct = std::max(c.next_tx, lag_floor(now_ns));
    ShaperLast& last = shaper_last_[cid];
    last.tx = ct;
    last.len = p.len_bytes;
    last.valid = true;
    c.next_tx = ct.plus_ps(wire_time_ps(p.len_bytes, c.config.max_rate_bps, &last.frac));
  }
  if (!c.config.strict) c.deficit -= p.len_bytes;

  if (f.queue.empty()) {
    f.state = State::kIdle;
  } else {
    place(id, now_ns);  // due again: the back of the class's list (round robin)
  }
  out->flow = id;
  out->cls = cid;
  out->packet = p;
  ++dequeued_;
  return true;
}

size_t TxScheduler::dequeue_burst(uint64_t now_ns, Departure* out, size_t max) {
  size_t n = 0;
  while (n < max && dequeue(now_ns, &out[n])) ++n;
  return n;
}

uint64_t TxScheduler::next_wakeup_ns(uint64_t now_ns) const {
  uint64_t best = wheel_.next_expiry_ns();
  for (const Class& c : classes_) {
    if (c.head == kInvalidId) continue;
    const uint64_t t = c.config.max_rate_bps == 0 ? now_ns : c.next_tx.ns / slot_ns_ * slot_ns_;
    best = std::min(best, t);
  }
  return best == kNever ? kNever : std::max(best, now_ns);
}

}  // namespace conduit::sched
