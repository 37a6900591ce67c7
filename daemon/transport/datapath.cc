// The fused receive path: the common received packets (ACK, in-order SEND
// only) are read straight from the frame (a wire::RoceView). Everything else,
// and every condition the direct path does not cover, is decoded into a
// RoceHeader and goes through on_packet(), so both routes share one
// implementation of the protocol; the direct path only skips the RoceHeader
// round trip and the dispatch whose checks it repeats. The transmit side,
// Qp::poll_tx_frame, is in requester.cc.
#include <cstring>

#include "transport/qp.h"
#include "wire/byte_order.h"
#include "wire/psn.h"

namespace conduit::transport {
using wire::Opcode;

RxResult Qp::on_packet(uint64_t now_ns, const wire::RoceView& pkt) {
  const uint8_t* b = pkt.bth;
  const uint8_t opcode = b[0];
  const uint32_t w2 = wire::get_be32(b + 8);
  const uint32_t psn = w2 & wire::kPsnMask;
  if ((wire::get_be32(b + 4) & wire::kPsnMask) == config_.qpn) {
    if (opcode == static_cast<uint8_t>(Opcode::kAcknowledge)) {
      // on_packet() -> completer_rx() -> completer_ack() for an ACK/NAK.
      if ((state_ == QpState::kRts || state_ == QpState::kSqd) && pkt.payload.empty()) {
        ++counters_.rx_packets;
        if (wire::psn_ge(psn, snd_max_psn_)) {
          ++counters_.drop_stale_response;
          return RxResult::kDropped;
        }
        const uint32_t a = wire::get_be32(b + wire::kBthBytes);
        return completer_ack(now_ns, psn, wire::Aeth{static_cast<uint8_t>(a >> 24), a & 0xFFFFFF});
      }
    } else if ((opcode == static_cast<uint8_t>(Opcode::kSendOnly) ||
                opcode == static_cast<uint8_t>(Opcode::kSendOnlyImm)) &&
               !sr_ && psn == epsn_ && in_msg_ == InMessage::kNone &&
               (state_ == QpState::kRtr || state_ == QpState::kRts || state_ == QpState::kSqd) &&
               pkt.payload.size() <= attr_.pmtu_bytes) {
      // on_packet() -> responder_rx() for the expected PSN outside a message:
      // every check there passes for a SEND only, which goes to responder_send().
      ++counters_.rx_packets;
      const bool imm = opcode == static_cast<uint8_t>(Opcode::kSendOnlyImm);
      return responder_send(wire::opcode_info(opcode).flags, psn, (w2 >> 31) != 0,
                            imm ? wire::get_be32(b + wire::kBthBytes) : 0, pkt.payload);
    }
  }
  wire::RoceHeader hdr;
  wire::decode_roce_header(pkt, hdr);
  return on_packet(now_ns, hdr, pkt.payload);
}

}  // namespace conduit::transport
