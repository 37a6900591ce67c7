#include "simulator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <memory>

#include "cc/notification_point.h"
#include "event_queue.h"

namespace conduit::sim {

namespace {

constexpr uint64_t kNeverPs = UINT64_MAX;
constexpr uint32_t kBacklogPackets = 2;  // packets kept queued per active flow

uint64_t wire_ps(uint64_t len_bytes, uint64_t rate_bps) {
  return len_bytes * 8'000'000'000'000ULL / rate_bps;
}

// splitmix64: a small, fully specified PRNG, so runs match across toolchains.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t s_;
};

struct Host {
  std::unique_ptr<sched::TxScheduler> sched;
  std::vector<uint32_t> flow_of;  // sched FlowId -> flow index
  uint64_t busy_until_ps = 0;
  uint64_t armed_ps = kNeverPs;
};

struct QueuedPacket {
  uint32_t flow;
  uint32_t len;
};

struct Port {
  std::deque<QueuedPacket> queue;
  uint64_t queue_bytes = 0;
  bool busy = false;
  uint64_t tx_bytes_window = 0;
};

struct Flow {
  std::unique_ptr<cc::RateController> ctrl;
  cc::NotificationPoint np;
  sched::FlowId sid = sched::kInvalidId;
  bool active = false;
  uint64_t rate_bps = 0;
  uint64_t armed_timer_ps = kNeverPs;
  uint64_t rx_bytes = 0;
  uint64_t rx_window = 0;
  uint64_t rx_at_last_trace = 0;
};

class Simulation {
 public:
  Simulation(const Scenario& s, uint64_t seed, Trace* trace)
      : s_(s), rng_(seed), trace_(trace), ports_(s.hosts.size()) {
    sched::SchedulerConfig sc;
    sc.slot_ns = 256;
    sc.num_slots = 4096;
    sc.flow_queue_packets = 8;
    hosts_.resize(s.hosts.size());
    for (auto& h : hosts_) {
      h.sched = std::make_unique<sched::TxScheduler>(sc);
      for (const auto& c : s.classes) h.sched->add_class(c.config);
    }
    flows_.reserve(s.flows.size());
    for (const auto& f : s.flows) {
      flows_.push_back(Flow{nullptr, cc::NotificationPoint(s.np), sched::kInvalidId});
      Host& h = hosts_[f.src];
      flows_.back().sid = h.sched->add_flow(f.cls, s.hosts[f.src].rate_bps);
      if (h.flow_of.size() <= flows_.back().sid) h.flow_of.resize(flows_.back().sid + 1);
      h.flow_of[flows_.back().sid] = f.id;
    }
  }

  Result run() {
    for (const auto& f : s_.flows) {
      push({f.start_ns * 1000, 0, EventType::kFlowStart, false, f.id, 0, 0});
      push({f.stop_ns * 1000, 0, EventType::kFlowStop, false, f.id, 0, 0});
    }
    push({s_.window_start_ns * 1000, 0, EventType::kSample, false, 0, 0, 0});
    if (trace_ != nullptr) push({0, 0, EventType::kTrace, false, 0, 0, 0});
    const uint64_t end_ps = s_.duration_ns * 1000;
    while (!q_.empty()) {
      const Event e = q_.pop();
      if (e.time_ps > end_ps) break;
      ++r_.events;
      dispatch(e);
    }
    return finish();
  }

 private:
  void push(const Event& e) { q_.push(e); }
  bool in_window(uint64_t t_ps) const {
    return t_ps >= s_.window_start_ns * 1000 && t_ps < s_.window_end_ns * 1000;
  }

  void dispatch(const Event& e) {
    switch (e.type) {
      case EventType::kHostTx:
        if (e.time_ps == hosts_[e.id].armed_ps) {
          hosts_[e.id].armed_ps = kNeverPs;
          host_send(e.id, e.time_ps);
        }
        break;
      case EventType::kSwitchArrive:
        switch_arrive(e);
        break;
      case EventType::kPortTxDone:
        ports_[e.id].busy = false;
        if (in_window(e.time_ps)) ports_[e.id].tx_bytes_window += e.len;
        if (!ports_[e.id].queue.empty()) port_start(e.id, e.time_ps);
        break;
      case EventType::kRecvArrive:
        recv_arrive(e);
        break;
      case EventType::kCnpArrive: {
        Flow& f = flows_[e.id];
        if (f.active) {
          f.ctrl->on_cnp(e.time_ps / 1000);
          apply_rate(e.id, e.time_ps);
        }
        break;
      }
      case EventType::kRpTimer: {
        Flow& f = flows_[e.id];
        if (f.active && e.time_ps == f.armed_timer_ps) {
          f.armed_timer_ps = kNeverPs;
          f.ctrl->on_timer(e.time_ps / 1000);
          apply_rate(e.id, e.time_ps);
        }
        break;
      }
      case EventType::kFlowStart:
        flow_start(e.id, e.time_ps);
        break;
      case EventType::kFlowStop:
        flows_[e.id].active = false;
        flows_[e.id].armed_timer_ps = kNeverPs;
        break;
      case EventType::kSample:
        samples_.push_back(ports_[s_.monitor_host].queue_bytes);
        if (e.time_ps + s_.queue_sample_ns * 1000 < s_.window_end_ns * 1000) {
          push({e.time_ps + s_.queue_sample_ns * 1000, 0, EventType::kSample, false, 0, 0, 0});
        }
        break;
      case EventType::kTrace:
        trace_sample(e.time_ps);
        break;
    }
  }

  void arm_host(uint32_t h, uint64_t t_ps) {
    Host& host = hosts_[h];
    if (t_ps < host.armed_ps) {
      host.armed_ps = t_ps;
      push({t_ps, 0, EventType::kHostTx, false, h, 0, 0});
    }
  }

  // Arms the host's next transmit opportunity after a change (new packets, a rate change).
  void kick_host(uint32_t h, uint64_t t_ps) {
    Host& host = hosts_[h];
    if (host.busy_until_ps > t_ps) {
      arm_host(h, host.busy_until_ps);
      return;
    }
    const uint64_t w = host.sched->next_wakeup_ns(t_ps / 1000);
    if (w != sched::kNever) arm_host(h, std::max(w * 1000, t_ps));
  }

  void refill(uint32_t fi, uint64_t t_ps) {
    Flow& f = flows_[fi];
    if (!f.active) return;
    Host& h = hosts_[s_.flows[fi].src];
    while (h.sched->queued_packets(f.sid) < kBacklogPackets) {
      if (!h.sched->enqueue(f.sid, {s_.packet_bytes, 0}, t_ps / 1000)) break;
    }
  }

  void host_send(uint32_t hi, uint64_t t_ps) {
    Host& h = hosts_[hi];
    if (t_ps < h.busy_until_ps) {
      arm_host(hi, h.busy_until_ps);
      return;
    }
    sched::Departure d;
    if (!h.sched->dequeue(t_ps / 1000, &d)) {
      const uint64_t w = h.sched->next_wakeup_ns(t_ps / 1000);
      if (w != sched::kNever) arm_host(hi, std::max(w * 1000, (t_ps / 1000 + 1) * 1000));
      return;
    }
    const uint32_t fi = h.flow_of[d.flow];
    const FlowSpec& fs = s_.flows[fi];
    const HostSpec& link = s_.hosts[hi];
    const uint64_t ser = wire_ps(d.packet.len_bytes, link.rate_bps);
    h.busy_until_ps = t_ps + ser;
    push({t_ps + ser + link.delay_ns * 1000, 0, EventType::kSwitchArrive, false, fs.dst, fi,
          d.packet.len_bytes});
    arm_host(hi, h.busy_until_ps);
    Flow& f = flows_[fi];
    if (f.ctrl) {
      f.ctrl->on_bytes_sent(t_ps / 1000, d.packet.len_bytes);
      apply_rate(fi, t_ps);
    }
    refill(fi, t_ps);
  }

  void apply_rate(uint32_t fi, uint64_t t_ps) {
    Flow& f = flows_[fi];
    const uint32_t hi = s_.flows[fi].src;
    const uint64_t r = f.ctrl->rate_bps();
    if (r != f.rate_bps) {
      f.rate_bps = r;
      hosts_[hi].sched->set_rate(f.sid, r, t_ps / 1000);
      kick_host(hi, t_ps);
    }
    const uint64_t d = f.ctrl->next_deadline_ns();
    if (d == cc::kNoDeadline) return;
    const uint64_t at = std::max(d * 1000, t_ps);
    if (at < f.armed_timer_ps) {
      f.armed_timer_ps = at;
      push({at, 0, EventType::kRpTimer, false, fi, 0, 0});
    }
  }

  void flow_start(uint32_t fi, uint64_t t_ps) {
    Flow& f = flows_[fi];
    const FlowSpec& fs = s_.flows[fi];
    f.ctrl = cc::make_controller(fs.cc, s_.hosts[fs.src].rate_bps, t_ps / 1000);
    if (!f.ctrl) return;  // the loader validated the config; keep the flow off otherwise
    f.active = true;
    f.rate_bps = 0;
    f.armed_timer_ps = kNeverPs;
    apply_rate(fi, t_ps);
    refill(fi, t_ps);
    kick_host(fs.src, t_ps);
  }

  void switch_arrive(const Event& e) {
    Port& p = ports_[e.id];
    if (p.queue_bytes + e.len > s_.sw.buffer_bytes) {
      ++r_.drops;
      if (in_window(e.time_ps)) ++r_.drops_window;
      return;
    }
    p.queue.push_back({e.flow, e.len});
    p.queue_bytes += e.len;
    if (e.id == s_.monitor_host && in_window(e.time_ps)) {
      r_.queue_max_bytes = std::max(r_.queue_max_bytes, p.queue_bytes);
    }
    if (!p.busy) port_start(e.id, e.time_ps);
  }

  bool red_mark(uint64_t q_bytes) {
    const SwitchSpec& sw = s_.sw;
    if (q_bytes <= sw.kmin_bytes) return false;
    if (q_bytes > sw.kmax_bytes) return true;
    const double p = sw.pmax * static_cast<double>(q_bytes - sw.kmin_bytes) /
                     static_cast<double>(sw.kmax_bytes - sw.kmin_bytes);
    return rng_.uniform() < p;
  }

  void port_start(uint32_t pi, uint64_t t_ps) {
    Port& p = ports_[pi];
    const QueuedPacket pkt = p.queue.front();
    // Marking at dequeue on the queue this packet was part of.
    const bool ce = red_mark(p.queue_bytes);
    p.queue.pop_front();
    p.queue_bytes -= pkt.len;
    if (ce) ++r_.marks;
    p.busy = true;
    const HostSpec& link = s_.hosts[pi];
    const uint64_t ser = wire_ps(pkt.len, link.rate_bps);
    push({t_ps + ser, 0, EventType::kPortTxDone, false, pi, 0, pkt.len});
    push({t_ps + ser + link.delay_ns * 1000, 0, EventType::kRecvArrive, ce, pi, pkt.flow, pkt.len});
  }

  void recv_arrive(const Event& e) {
    Flow& f = flows_[e.flow];
    f.rx_bytes += e.len;
    if (in_window(e.time_ps)) f.rx_window += e.len;
    if (!e.ce || !f.np.on_ce_marked(e.time_ps / 1000)) return;
    ++r_.cnps;
    const FlowSpec& fs = s_.flows[e.flow];
    const HostSpec& rx = s_.hosts[fs.dst];
    const HostSpec& tx = s_.hosts[fs.src];
    const uint64_t delay = (rx.delay_ns + tx.delay_ns) * 1000 + wire_ps(s_.cnp_bytes, rx.rate_bps) +
                           wire_ps(s_.cnp_bytes, tx.rate_bps);
    push({e.time_ps + delay, 0, EventType::kCnpArrive, false, e.flow, 0, 0});
  }

  void trace_sample(uint64_t t_ps) {
    const uint64_t interval = s_.csv_interval_ns;
    for (uint32_t i = 0; i < flows_.size(); ++i) {
      Flow& f = flows_[i];
      const uint64_t rate = f.active && f.ctrl ? f.ctrl->rate_bps() : 0;
      const uint64_t thr = (f.rx_bytes - f.rx_at_last_trace) * 8'000'000'000ULL / interval;
      f.rx_at_last_trace = f.rx_bytes;
      trace_->rates.push_back({t_ps / 1000, i, rate, t_ps == 0 ? 0 : thr});
    }
    trace_->queue.push_back({t_ps / 1000, ports_[s_.monitor_host].queue_bytes});
    push({t_ps + interval * 1000, 0, EventType::kTrace, false, 0, 0, 0});
  }

  Result finish() {
    const double window_s = static_cast<double>(s_.window_end_ns - s_.window_start_ns) * 1e-9;
    const double cap = static_cast<double>(s_.hosts[s_.monitor_host].rate_bps) * window_s;
    r_.utilization = static_cast<double>(ports_[s_.monitor_host].tx_bytes_window) * 8 / cap;
    double sum = 0;
    double sum_sq = 0;
    uint32_t n = 0;
    for (uint32_t i = 0; i < flows_.size(); ++i) {
      const FlowSpec& fs = s_.flows[i];
      FlowResult fr;
      fr.id = i;
      fr.throughput_bps =
          static_cast<uint64_t>(static_cast<double>(flows_[i].rx_window) * 8 / window_s);
      fr.delivered_bytes = flows_[i].rx_bytes;
      fr.final_rate_bps = flows_[i].ctrl ? flows_[i].ctrl->rate_bps() : 0;
      fr.active_whole_window = fs.start_ns <= s_.window_start_ns && fs.stop_ns >= s_.window_end_ns;
      if (fr.active_whole_window) {
        const auto x = static_cast<double>(fr.throughput_bps);
        sum += x;
        sum_sq += x * x;
        ++n;
      }
      r_.flows.push_back(fr);
    }
    r_.jain_index = (n == 0 || sum_sq == 0) ? 0 : sum * sum / (n * sum_sq);
    std::sort(samples_.begin(), samples_.end());
    if (!samples_.empty()) {
      auto pct = [&](double p) {
        const auto rank = static_cast<size_t>(std::ceil(p * static_cast<double>(samples_.size())));
        return samples_[std::clamp<size_t>(rank, 1, samples_.size()) - 1];
      };
      r_.queue_p50_bytes = pct(0.50);
      r_.queue_p99_bytes = pct(0.99);
      r_.queue_max_bytes = std::max(r_.queue_max_bytes, samples_.back());
    }
    return r_;
  }

  const Scenario& s_;
  Rng rng_;
  Trace* trace_;
  EventQueue q_;
  std::vector<Host> hosts_;
  std::vector<Port> ports_;
  std::vector<Flow> flows_;
  std::vector<uint64_t> samples_;
  Result r_;
};

}  // namespace

Result run(const Scenario& scenario, uint64_t seed, Trace* trace) {
  Simulation sim(scenario, seed, trace);
  return sim.run();
}

std::string to_json(const Scenario& s, uint64_t seed, const Result& r) {
  std::string out;
  char buf[256];
  auto add = [&](const char* fmt, auto... args) {
    std::snprintf(buf, sizeof buf, fmt, args...);
    out += buf;
  };
  std::string name;
  for (char ch : s.name) {
    if (ch == '"' || ch == '\\') name += '\\';
    if (static_cast<unsigned char>(ch) >= 0x20) name += ch;
  }
  out += "{\n  \"scenario\": \"" + name + "\",\n";
  add("  \"seed\": %llu,\n", static_cast<unsigned long long>(seed));
  add("  \"duration_ns\": %llu,\n", static_cast<unsigned long long>(s.duration_ns));
  add("  \"steady_state_ns\": [%llu, %llu],\n", static_cast<unsigned long long>(s.window_start_ns),
      static_cast<unsigned long long>(s.window_end_ns));
  add("  \"utilization\": %.6f,\n", r.utilization);
  add("  \"jain_index\": %.6f,\n", r.jain_index);
  add("  \"queue_p50_bytes\": %llu,\n", static_cast<unsigned long long>(r.queue_p50_bytes));
  add("  \"queue_p99_bytes\": %llu,\n", static_cast<unsigned long long>(r.queue_p99_bytes));
  add("  \"queue_max_bytes\": %llu,\n", static_cast<unsigned long long>(r.queue_max_bytes));
  add("  \"drops\": %llu,\n", static_cast<unsigned long long>(r.drops));
  add("  \"drops_window\": %llu,\n", static_cast<unsigned long long>(r.drops_window));
  add("  \"marks\": %llu,\n", static_cast<unsigned long long>(r.marks));
  add("  \"cnps\": %llu,\n", static_cast<unsigned long long>(r.cnps));
  add("  \"events\": %llu,\n", static_cast<unsigned long long>(r.events));
  add("  \"wall_seconds\": %.3f,\n", r.wall_seconds);
  add("  \"cpu_seconds\": %.3f,\n", r.cpu_seconds);
  add("  \"events_per_second\": %.0f,\n",
      r.wall_seconds > 0 ? static_cast<double>(r.events) / r.wall_seconds : 0.0);
  add("  \"events_per_cpu_second\": %.0f,\n",
      r.cpu_seconds > 0 ? static_cast<double>(r.events) / r.cpu_seconds : 0.0);
  out += "  \"flows\": [";
  for (size_t i = 0; i < r.flows.size(); ++i) {
    const FlowResult& f = r.flows[i];
    add("%s\n    {\"id\": %u, \"throughput_bps\": %llu, \"delivered_bytes\": %llu, "
        "\"final_rate_bps\": %llu, \"in_window\": %s}",
        i == 0 ? "" : ",", f.id, static_cast<unsigned long long>(f.throughput_bps),
        static_cast<unsigned long long>(f.delivered_bytes),
        static_cast<unsigned long long>(f.final_rate_bps),
        f.active_whole_window ? "true" : "false");
  }
  out += "\n  ]\n}\n";
  return out;
}

}  // namespace conduit::sim
