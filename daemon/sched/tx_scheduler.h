// Transmit scheduler: per-flow pacing plus traffic classes.
//
// Each flow (QP) has a FIFO of packets (by length and caller tag), a rate
// set by its congestion controller, and a class. A packet becomes eligible
// when its flow's pacing time comes (the timing wheel holds flows waiting for
// that); eligible flows wait in their class's ready list; dequeue() picks a
// class by strict priority, then by deficit-weighted round robin among the
// weighted classes, honouring each class's optional max rate, and round-robins
// the flows inside the class.
//
// Timing: pacing is exact to the picosecond in the long run; a packet may
// leave up to one wheel slot (slot_ns, <= 1 us) before its exact time, so
// several small packets of a fast flow leave together (burst-friendly). A
// flow that falls behind (polled late) catches up by at most max_lag_ns of its
// rate, so the engine's poll interval should stay below max_lag_ns. Idle time
// (a flow with nothing queued, a class with no eligible packet) earns no such
// credit. A rate change applies to the flow's next packet (the gap after its
// last one), not earlier than the change.
//
// Use from the engine:  enqueue() packets as the transport produces them;
// when the port can take packets, dequeue()/dequeue_burst() at now_ns; when
// nothing is eligible, arm a wake-up at next_wakeup_ns().
//
// Costs: O(1) per packet (wheel insert/expire, list moves, one division),
// plus O(classes) to pick a class. No allocation after add_flow().
// Thread role: single owner (the engine lcore). now_ns must not go backwards.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "sched/fine_time.h"
#include "sched/packet_ring.h"
#include "sched/timing_wheel.h"

namespace conduit::sched {

using FlowId = uint32_t;
using ClassId = uint32_t;
inline constexpr uint32_t kInvalidId = std::numeric_limits<uint32_t>::max();
inline constexpr uint32_t kMaxPacketBytes = 1u << 20;

struct SchedulerConfig {
  uint32_t slot_ns = 256;              // pacing granularity, 1..1000 ns
  uint32_t num_slots = 8192;           // wheel size (power of two); horizon = product
  uint32_t max_lag_ns = 4000;          // a late flow or class catches up at most this much
  uint32_t flow_queue_packets = 256;   // per-flow queue capacity (rounded to a power of two)
  uint32_t dwrr_quantum_bytes = 9216;  // bytes per unit of weight per DWRR round
};

struct ClassConfig {
  bool strict = false;        // strict classes are served before all weighted ones
  uint32_t strict_rank = 0;   // among strict classes, the lower rank goes first
  uint32_t weight = 1;        // DWRR weight among weighted classes, >= 1
  uint64_t max_rate_bps = 0;  // class rate cap; 0 = none
};

struct Departure {
  FlowId flow = kInvalidId;
  ClassId cls = kInvalidId;
  PacketRef packet;
};

class TxScheduler {
 public:
  explicit TxScheduler(const SchedulerConfig& config = {});

  // Setup path. add_class returns kInvalidId for a weight of 0.
  ClassId add_class(const ClassConfig& config);
  // Returns kInvalidId for an unknown class. rate_bps 0 is treated as 1 bit/s.
  FlowId add_flow(ClassId cls, uint64_t rate_bps);
  // Forgets the flow and its queued packets; returns how many were queued.
  uint32_t remove_flow(FlowId flow);
  // Takes up to max of the flow's queued packets, oldest first, as if they left now, without
  // pacing (a flow that stops sends what it queued before its last word); returns how many.
  // The flow stays; it is idle once its queue is empty.
  size_t take_queued(FlowId flow, PacketRef* out, size_t max);
  // A policy reload. set_class gives class `cls` a new configuration (false,
  // and nothing changed, for an unknown class or a weight of 0); its flows and
  // their queues stay, the DWRR round starts over. A new max rate applies to
  // the class's next packet, as set_rate does to a flow's. move_flow puts a flow, with
  // its queued packets, into another class (false for an unknown flow or
  // class); a flow that was ready is ready in the new class, at its back.
  bool set_class(ClassId cls, const ClassConfig& config);
  bool move_flow(FlowId flow, ClassId cls);

  // Datapath.
  void set_rate(FlowId flow, uint64_t rate_bps, uint64_t now_ns);
  // False if the flow's queue is full or the packet is invalid (counted).
  bool enqueue(FlowId flow, PacketRef packet, uint64_t now_ns);
  // The next packet eligible at now_ns, if any.
  bool dequeue(uint64_t now_ns, Departure* out);
  size_t dequeue_burst(uint64_t now_ns, Departure* out, size_t max);
  // now_ns if a packet is eligible now; else the earliest time one may be;
  // kNever when nothing is queued. May be early (a parked slow flow).
  uint64_t next_wakeup_ns(uint64_t now_ns) const;

  uint64_t rate_bps(FlowId flow) const { return flows_[flow].rate_bps; }
  uint32_t queued_packets(FlowId flow) const { return flows_[flow].queue.size(); }
  uint64_t enqueue_drops() const { return enqueue_drops_; }
  uint64_t dequeued_packets() const { return dequeued_; }
  const SchedulerConfig& config() const { return config_; }

 private:
  enum class State : uint8_t { kFree, kIdle, kWaiting, kReady };
  struct Flow {
    PacketRing queue;
    ClassId cls = kInvalidId;
    uint64_t rate_bps = 1;
    uint64_t frac = 0;  // wire_time_ps's carry at rate_bps
    FineTime next_tx;   // when the head packet may leave
    FineTime last_tx;   // scheduled time of the last packet released
    uint32_t last_len = 0;
    bool has_last = false;
    State state = State::kFree;
    uint32_t prev = kInvalidId;  // ready-list links
    uint32_t next = kInvalidId;
  };
  struct Class {
    ClassConfig config;
    uint32_t head = kInvalidId;
    uint32_t tail = kInvalidId;
    int64_t deficit = 0;
    uint64_t quantum = 0;
    FineTime next_tx;  // max-rate shaper
  };
  // A class's last packet sent under a max rate, for a reload's new max rate (set_class),
  // and the shaper's rounding carry. Apart from Class, which stays 64 bytes for the
  // per-packet path.
  struct ShaperLast {
    FineTime tx;  // its shaper time
    uint32_t len = 0;
    bool valid = false;
    uint64_t frac = 0;  // wire_time_ps's carry at the max rate
  };

  bool due(FineTime t, uint64_t now_ns) const { return t.ns / slot_ns_ <= now_ns / slot_ns_; }
  FineTime lag_floor(uint64_t now_ns) const;
  void place(FlowId f, uint64_t now_ns);
  void push_ready(FlowId f);
  void unlink_ready(FlowId f);
  bool class_eligible(ClassId c, uint64_t now_ns) const;
  ClassId pick_class(uint64_t now_ns);
  void expire(uint64_t now_ns);
  void order_classes();

  SchedulerConfig config_;
  uint64_t slot_ns_;
  TimingWheel wheel_;
  std::vector<Flow> flows_;
  std::vector<FlowId> free_ids_;
  std::vector<Class> classes_;
  std::vector<ShaperLast> shaper_last_;  // per class
  std::vector<ClassId> strict_order_;    // by rank
  std::vector<ClassId> weighted_;        // DWRR ring
  size_t rr_ = 0;
  bool fresh_visit_ = true;
  uint64_t enqueue_drops_ = 0;
  uint64_t dequeued_ = 0;
};

}  // namespace conduit::sched
