// Fuzz target: the CM message parser and a ConnectionManager fed a session of
// hostile datagrams, API calls and timer ticks.
//
// Input: a sequence of records. Each starts with an op byte:
//   0: a datagram (next byte = length n, then n bytes) from peer (byte)
//   1: connect (service byte)      2: accept the oldest request
//   3: reject the oldest request   4: disconnect connection (byte)
//   5: advance time (byte * 10 ms) and run timers   6: forget owner 2
//   7: an IB CM MAD (the next 256 bytes, zero-padded) from IB peer (byte)
//   8: connect to an IB peer (service byte: < 128 an rdma_cm port, else a raw id)
// Invariants: a message parse accepts (either dialect) re-encodes to the same
// fields; the manager never holds more than max_connections, its actions are
// well formed (sends parse back in their peer's dialect; over the IB CM the one
// exception is the GetResp 'unsupported' echo of a Get/Set), and it never crashes.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cm/connection_manager.h"
#include "cm/ib_cm_mad.h"

using namespace conduit::cm;

namespace {

#define check(ok) check_at((ok), __LINE__)
void check_at(bool ok, int line) {
  if (!ok) {
    std::fprintf(stderr, "cm_session.cc:%d: invariant violated\n", line);
    std::abort();
  }
}

void check_roundtrip(const uint8_t* data, size_t len) {
  CmMessage m;
  if (parse_cm_message(data, len, m) != CmParseError::kOk) return;
  uint8_t buf[kMaxMessageBytes];
  const size_t n = build_cm_message(m, buf);
  CmMessage again;
  check(parse_cm_message(buf, n, again) == CmParseError::kOk);
  check(again.type == m.type && again.src_conn == m.src_conn && again.dst_conn == m.dst_conn);
  if (m.type == CmType::kReq || m.type == CmType::kRep) {
    check(again.service == m.service && again.params.qpn == m.params.qpn &&
          again.params.psn == m.params.psn && again.params.pmtu_bytes == m.params.pmtu_bytes &&
          again.private_len == m.private_len && again.private_data == m.private_data);
  }
}

void check_ib_roundtrip(const uint8_t* data, size_t len) {
  CmMessage m;
  if (parse_ib_cm_mad(data, len, m) != CmParseError::kOk) return;
  IbCmBuildContext ctx;
  ctx.local_addr = m.ib.src_addr;
  ctx.peer_addr = m.ib.dst_addr;
  ctx.peer_qpn = m.params.qpn;  // a DREQ's remote QPN
  uint8_t buf[kMadBytes];
  check(build_ib_cm_mad(m, ctx, buf) == kMadBytes);
  CmMessage again;
  check(parse_ib_cm_mad(buf, kMadBytes, again) == CmParseError::kOk);
  check(again.type == m.type && again.src_conn == m.src_conn && again.dst_conn == m.dst_conn &&
        again.ib.tid == m.ib.tid);
  if (m.type == CmType::kReq || m.type == CmType::kRep) {
    check(again.params.qpn == m.params.qpn && again.params.psn == m.params.psn &&
          again.params.pmtu_bytes == m.params.pmtu_bytes && again.private_len == m.private_len &&
          again.private_data == m.private_data);
  }
  if (m.type == CmType::kReq) {
    check(again.service == m.service && again.ib.rdma_cm == m.ib.rdma_cm &&
          again.ib.src_addr == m.ib.src_addr && again.ib.dst_addr == m.ib.dst_addr);
  }
  if (m.type == CmType::kRej) check(again.reason == m.reason);
  if (m.type == CmType::kDreq) check(again.params.qpn == m.params.qpn);
}

// Peer k of eight: 198.18.0.k (0..3) or fe80::c0:k (4..7).
CmAddr peer_addr(uint8_t k) {
  k %= 8;
  if (k < 4) return cm_addr_v4(0xC6120000u + k);
  return {0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xC0, 0, k};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check_roundtrip(data, size);
  check_ib_roundtrip(data, size);
  CmConfig cfg;
  cfg.local_addr4 = cm_addr_v4(0xC6120001u);
  cfg.local_addr6 = peer_addr(5);
  cfg.max_connections = 16;
  cfg.max_retries = 3;
  cfg.retry_timeout_ns = 10'000'000;
  ConnectionManager cm(cfg);
  cm.listen(1, 1);
  cm.listen(2, 2);
  uint64_t now = 0;
  std::vector<CmAction> requests;
  std::vector<uint32_t> conns;
  CmAction acts[16];
  size_t i = 0;
  auto byte = [&]() -> uint8_t { return i < size ? data[i++] : 0; };
  while (i < size) {
    const uint8_t op = byte() % 9;
    switch (op) {
      case 0: {
        const CmPeer from{peer_addr(byte()), 4792};
        const size_t n = byte();
        const size_t take = n < size - i ? n : size - i;
        cm.on_message(now, from, data + i, take);
        i += take;
        break;
      }
      case 1: {
        QpParams q;
        q.qpn = 100 + byte();
        const CmPeer to{peer_addr(byte()), 4792};
        const int64_t id = cm.connect(now, 1, to, byte() % 3, q);
        if (id > 0) conns.push_back(static_cast<uint32_t>(id));
        break;
      }
      case 2:
      case 3:
        if (!requests.empty()) {
          const CmAction r = requests.front();
          requests.erase(requests.begin());
          QpParams q;
          q.qpn = 500;
          if (op == 2) {
            cm.accept(now, r.owner, r.conn, q);
          } else {
            cm.reject(now, r.owner, r.conn, static_cast<RejectReason>(byte() % 8));
          }
        }
        break;
      case 4:
        if (!conns.empty()) cm.disconnect(now, 1, conns[byte() % conns.size()]);
        break;
      case 5:
        now += uint64_t{byte()} * 10'000'000;
        cm.on_timer(now);
        break;
      case 6:
        cm.forget_owner(now, 2);
        break;
      case 7: {
        const CmPeer from{peer_addr(byte()), 0, true};
        uint8_t mad[kMadBytes] = {};
        const size_t take = kMadBytes < size - i ? kMadBytes : size - i;
        for (size_t k = 0; k < take; ++k) mad[k] = data[i + k];
        i += take;
        cm.on_message(now, from, mad, kMadBytes);
        break;
      }
      case 8: {
        QpParams q;
        q.qpn = 100 + byte();
        q.initiator_depth = q.responder_resources = 4;
        const uint8_t s = byte();
        const uint64_t service = s < 128 ? s % 3 : 0x1234567800000000ull | s;
        const CmPeer to{peer_addr(byte()), 0, true};
        const int64_t id = cm.connect(now, 1, to, service, q);
        if (id > 0) conns.push_back(static_cast<uint32_t>(id));
        break;
      }
    }
    check(cm.connection_count() <= cfg.max_connections);
    size_t n;
    while ((n = cm.poll_actions(acts, 16)) > 0) {
      for (size_t k = 0; k < n; ++k) {
        const CmAction& a = acts[k];
        if (a.kind == CmAction::Kind::kSend) {
          CmMessage m;
          if (a.peer.ib) {
            // A CM MAD we build, or the GetResp 'unsupported' echo of a Get/Set.
            check(a.len == kMadBytes);
            check(parse_ib_cm_mad(a.bytes.data(), a.len, m) == CmParseError::kOk ||
                  is_ib_mad_unsupported_resp(a.bytes.data(), a.len));
          } else {
            check(a.len <= kMaxMessageBytes);
            check(parse_cm_message(a.bytes.data(), a.len, m) == CmParseError::kOk);
          }
        } else if (a.kind == CmAction::Kind::kRequest) {
          if (requests.size() < 64) requests.push_back(a);
        } else if (a.kind == CmAction::Kind::kEstablished) {
          check(valid_pmtu(a.pmtu_bytes));
        }
      }
    }
  }
  return 0;
}
