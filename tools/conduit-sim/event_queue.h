// Min-heap of simulation events ordered by (time, insertion order), so
// simultaneous events run in the order they were scheduled: deterministic.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

namespace conduit::sim {

enum class EventType : uint8_t {
  kHostTx,        // a host's link may take the next packet
  kSwitchArrive,  // a data packet reaches the switch
  kPortTxDone,    // a switch egress port finished a packet
  kRecvArrive,    // a data packet reaches its receiver
  kCnpArrive,     // a CNP reaches the sender
  kRpTimer,       // a flow's controller deadline
  kFlowStart,
  kFlowStop,
  kSample,  // queue percentile sample
  kTrace,   // CSV sample
};

struct Event {
  uint64_t time_ps;
  uint64_t seq;
  EventType type;
  bool ce;        // data packets: CE mark
  uint32_t id;    // host, port, or flow depending on type
  uint32_t flow;  // data packets
  uint32_t len;   // data packets, bytes
};

struct EventLater {
  bool operator()(const Event& a, const Event& b) const {
    return a.time_ps != b.time_ps ? a.time_ps > b.time_ps : a.seq > b.seq;
  }
};

class EventQueue {
 public:
  void push(Event e) {
    e.seq = seq_++;
    heap_.push(e);
  }
  bool empty() const { return heap_.empty(); }
  Event pop() {
    Event e = heap_.top();
    heap_.pop();
    return e;
  }

 private:
  std::priority_queue<Event, std::vector<Event>, EventLater> heap_;
  uint64_t seq_ = 0;
};

}  // namespace conduit::sim
