// Driving a NetStack in the unit tests: one frame in, its verdict and reply out; the
// actions it queued.
#pragma once

#include <cstdint>
#include <vector>

#include "net/net_stack.h"

namespace conduit::net::test {

struct Rx {
  RxResult result;
  std::vector<uint8_t> reply;  // the reply bytes (empty unless kReply)
};

inline Rx receive(NetStack& s, const std::vector<uint8_t>& f, uint64_t now = 0) {
  Rx rx;
  rx.reply.assign(2048, 0xAA);
  rx.result = s.on_rx_frame(f, now, rx.reply);
  rx.reply.resize(rx.result.reply_len);
  return rx;
}

// The drop reason of a frame, kNone when it was not dropped.
inline RxDrop drop_of(NetStack& s, const std::vector<uint8_t>& f) {
  const Rx rx = receive(s, f);
  if (rx.result.verdict != RxVerdict::kDrop) return RxDrop::kNone;
  return rx.result.drop;
}

inline std::vector<NetAction> take_all(NetStack& s) {
  std::vector<NetAction> out(64);
  out.resize(s.take_actions(out));
  return out;
}

}  // namespace conduit::net::test
