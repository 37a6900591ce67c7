#include "proto/control_codec.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <type_traits>
#include <utility>

namespace conduit::proto {

std::string cm_addr_text(const CmAddr& a) {
  uint32_t ip = 0;
  if (cm_addr_ipv4(a, ip)) return ipv4_text(ip);
  char text[INET6_ADDRSTRLEN] = {};
  return ::inet_ntop(AF_INET6, a.data(), text, sizeof text) != nullptr ? text : "?";
}

namespace {

// ---- primitive writer/reader (little-endian, byte by byte: no struct casts) ----

class Writer {
 public:
  void u8(uint8_t v) { buf_.push_back(v); }
  void u16(uint16_t v) { le(v, 2); }
  void u32(uint32_t v) { le(v, 4); }
  void i32(int32_t v) { le(static_cast<uint32_t>(v), 4); }
  void u64(uint64_t v) { le(v, 8); }
  void bytes16(const std::array<uint8_t, 16>& b) { buf_.insert(buf_.end(), b.begin(), b.end()); }
  // Strings longer than the field allows are cut, so an encoder can never
  // produce a message the decoder must reject for length (reasons, versions).
  void str(const std::string& s, size_t max_bytes) {
    size_t n = s.size() < max_bytes ? s.size() : max_bytes;
    u16(static_cast<uint16_t>(n));
    buf_.insert(buf_.end(), s.begin(), s.begin() + static_cast<std::ptrdiff_t>(n));
  }
  void blob(const std::vector<uint8_t>& b, size_t max_bytes) {
    size_t n = b.size() < max_bytes ? b.size() : max_bytes;
    u16(static_cast<uint16_t>(n));
    buf_.insert(buf_.end(), b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
  }
  std::vector<uint8_t>& buf() { return buf_; }

 private:
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) buf_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> buf_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> b) : b_(b) {}

  bool u8(uint8_t& v) {
    uint64_t x;
    if (!le(x, 1)) return false;
    v = static_cast<uint8_t>(x);
    return true;
  }
  bool u16(uint16_t& v) {
    uint64_t x;
    if (!le(x, 2)) return false;
    v = static_cast<uint16_t>(x);
    return true;
  }
  bool u32(uint32_t& v) {
    uint64_t x;
    if (!le(x, 4)) return false;
    v = static_cast<uint32_t>(x);
    return true;
  }
  bool i32(int32_t& v) {
    uint32_t x;
    if (!u32(x)) return false;
    v = static_cast<int32_t>(x);
    return true;
  }
  bool u64(uint64_t& v) { return le(v, 8); }
  bool bytes16(std::array<uint8_t, 16>& out) {
    if (!need(16)) return false;
    for (auto& x : out) x = b_[pos_++];
    return true;
  }
  // `name` strings must match is_valid_name; free text must be printable
  // ASCII or UTF-8 bytes >= 0x80, plus newline and tab (policy text, reasons).
  bool str(std::string& out, size_t max_bytes, bool name, const char* field) {
    uint16_t n;
    if (!u16(n)) return false;
    if (n > max_bytes)
      return fail(-EINVAL,
                  std::string(field) + " longer than " + std::to_string(max_bytes) + " bytes");
    if (!need(n)) return false;
    out.assign(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    if (name && !is_valid_name(out, max_bytes)) {
      return fail(-EINVAL, std::string(field) + " may only contain letters, digits, '_', '.', '-'");
    }
    if (!name) {
      for (unsigned char c : out) {
        if (c < 0x20 && c != '\n' && c != '\t') {
          return fail(-EINVAL, std::string(field) + " contains control characters");
        }
      }
    }
    return true;
  }
  // Opaque bytes (u16 length + bytes), at most max_bytes.
  bool blob(std::vector<uint8_t>& out, size_t max_bytes, const char* field) {
    uint16_t n;
    if (!u16(n)) return false;
    if (n > max_bytes) {
      return fail(-EINVAL,
                  std::string(field) + " longer than " + std::to_string(max_bytes) + " bytes");
    }
    if (!need(n)) return false;
    out.assign(b_.begin() + static_cast<std::ptrdiff_t>(pos_),
               b_.begin() + static_cast<std::ptrdiff_t>(pos_ + n));
    pos_ += n;
    return true;
  }
  bool fail(int code, std::string why) {
    if (err_.code == 0) err_ = CodecError{code, std::move(why)};
    return false;
  }
  bool at_end() const { return pos_ == b_.size(); }
  CodecError& err() { return err_; }

 private:
  bool need(size_t n) {
    if (b_.size() - pos_ < n) return fail(-EBADMSG, "message body truncated");
    return true;
  }
  bool le(uint64_t& v, int n) {
    if (!need(static_cast<size_t>(n))) return false;
    v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(b_[pos_++]) << (8 * i);
    return true;
  }
  std::span<const uint8_t> b_;
  size_t pos_ = 0;
  CodecError err_;
};

bool range(Reader& r, uint64_t v, uint64_t lo, uint64_t hi, const char* field) {
  if (v < lo || v > hi) {
    return r.fail(-EINVAL, std::string(field) + " = " + std::to_string(v) + " is outside [" +
                               std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return true;
}

bool valid_state(uint8_t s) { return s <= static_cast<uint8_t>(QpState::kError); }

// ---- QpAttr ---------------------------------------------------------------------

void put(Writer& w, const QpAttr& a) {
  w.u32(a.mask);
  w.u8(static_cast<uint8_t>(a.state));
  w.u32(a.access);
  w.u8(a.path_mtu);
  w.u32(a.dest_qpn);
  w.u32(a.rq_psn);
  w.u32(a.sq_psn);
  w.bytes16(a.dgid);
  w.u8(a.timeout);
  w.u8(a.retry_cnt);
  w.u8(a.rnr_retry);
  w.u8(a.min_rnr_timer);
  w.u8(a.max_rd_atomic);
  w.u8(a.max_dest_rd_atomic);
}

bool get(Reader& r, QpAttr& a) {
  uint8_t state;
  if (!(r.u32(a.mask) && r.u8(state) && r.u32(a.access) && r.u8(a.path_mtu) && r.u32(a.dest_qpn) &&
        r.u32(a.rq_psn) && r.u32(a.sq_psn) && r.bytes16(a.dgid) && r.u8(a.timeout) &&
        r.u8(a.retry_cnt) && r.u8(a.rnr_retry) && r.u8(a.min_rnr_timer) && r.u8(a.max_rd_atomic) &&
        r.u8(a.max_dest_rd_atomic))) {
    return false;
  }
  if (!valid_state(state)) return r.fail(-EINVAL, "unknown QP state " + std::to_string(state));
  a.state = static_cast<QpState>(state);
  std::string why;
  if (!validate_qp_attr(a, why)) return r.fail(-EINVAL, why);
  return true;
}

// ---- requests ----------------------------------------------------------------------

void put(Writer& w, const AttachRequest& m) {
  w.u32(m.shm_abi_version);
  w.u64(m.region_bytes);
  w.str(m.client_name, kMaxClientNameBytes);
}
bool get(Reader& r, AttachRequest& m) {
  return r.u32(m.shm_abi_version) && r.u64(m.region_bytes) &&
         r.str(m.client_name, kMaxClientNameBytes, true, "client name");
}
void put(Writer&, const DetachRequest&) {}
bool get(Reader&, DetachRequest&) { return true; }
void put(Writer& w, const CreateCqRequest& m) {
  w.u32(m.entries);
  w.u8(m.wants_wakeup ? 1 : 0);
}
bool get(Reader& r, CreateCqRequest& m) {
  uint8_t wake_flag;
  if (!(r.u32(m.entries) && r.u8(wake_flag))) return false;
  if (!range(r, m.entries, 1, kMaxQueueEntries, "CQ entries")) return false;
  if (!range(r, wake_flag, 0, 1, "wants_wakeup")) return false;
  m.wants_wakeup = wake_flag == 1;
  return true;
}
void put(Writer& w, const DestroyCqRequest& m) { w.u32(m.cq_id); }
bool get(Reader& r, DestroyCqRequest& m) { return r.u32(m.cq_id); }
void put(Writer& w, const CreateQpRequest& m) {
  w.u32(m.send_cq);
  w.u32(m.recv_cq);
  w.u32(m.sq_entries);
  w.u32(m.rq_entries);
  w.str(m.traffic_class, kMaxClassNameBytes);
}
bool get(Reader& r, CreateQpRequest& m) {
  return r.u32(m.send_cq) && r.u32(m.recv_cq) && r.u32(m.sq_entries) && r.u32(m.rq_entries) &&
         r.str(m.traffic_class, kMaxClassNameBytes, true, "traffic class") &&
         range(r, m.sq_entries, 1, kMaxQueueEntries, "send queue entries") &&
         range(r, m.rq_entries, 1, kMaxQueueEntries, "receive queue entries");
}
void put(Writer& w, const DestroyQpRequest& m) { w.u32(m.qpn); }
bool get(Reader& r, DestroyQpRequest& m) {
  return r.u32(m.qpn) && range(r, m.qpn, 0, kMax24Bit, "QPN");
}
void put(Writer& w, const RegMrRequest& m) {
  w.u64(m.offset);
  w.u64(m.length);
  w.u32(m.access);
}
bool get(Reader& r, RegMrRequest& m) {
  if (!(r.u64(m.offset) && r.u64(m.length) && r.u32(m.access))) return false;
  if (m.length == 0) return r.fail(-EINVAL, "memory region length is 0");
  if (m.offset + m.length < m.offset) return r.fail(-EINVAL, "memory region offset+length wraps");
  if ((m.access & ~kAccessAll) != 0) return r.fail(-EINVAL, "unknown access flag bits");
  return true;
}
void put(Writer& w, const DeregMrRequest& m) { w.u32(m.lkey); }
bool get(Reader& r, DeregMrRequest& m) { return r.u32(m.lkey); }
void put(Writer& w, const ModifyQpRequest& m) {
  w.u32(m.qpn);
  put(w, m.attr);
}
bool get(Reader& r, ModifyQpRequest& m) {
  return r.u32(m.qpn) && range(r, m.qpn, 0, kMax24Bit, "QPN") && get(r, m.attr);
}
void put(Writer& w, const QueryQpRequest& m) { w.u32(m.qpn); }
bool get(Reader& r, QueryQpRequest& m) {
  return r.u32(m.qpn) && range(r, m.qpn, 0, kMax24Bit, "QPN");
}
void put(Writer&, const StatsRequest&) {}
bool get(Reader&, StatsRequest&) { return true; }
void put(Writer&, const StatusRequest&) {}
bool get(Reader&, StatusRequest&) { return true; }
void put(Writer& w, const ListQpsRequest& m) {
  w.u32(m.start_qpn);
  w.u32(m.max_entries);
}
bool get(Reader& r, ListQpsRequest& m) {
  return r.u32(m.start_qpn) && r.u32(m.max_entries) &&
         range(r, m.start_qpn, 0, kMax24Bit, "start QPN") &&
         range(r, m.max_entries, 1, kMaxListEntries, "max entries");
}
void put(Writer& w, const PolicyShowRequest& m) { w.u64(m.offset); }
bool get(Reader& r, PolicyShowRequest& m) { return r.u64(m.offset); }
void put(Writer&, const PolicyReloadRequest&) {}
bool get(Reader&, PolicyReloadRequest&) { return true; }

void put(Writer& w, const CmQpOffer& m) {
  w.u32(m.qpn);
  w.u32(m.access);
  w.u8(m.path_mtu);
  w.u32(m.flags);
  w.blob(m.private_data, kMaxCmPrivateBytes);
}
bool get(Reader& r, CmQpOffer& m) {
  if (!(r.u32(m.qpn) && r.u32(m.access) && r.u8(m.path_mtu) && r.u32(m.flags) &&
        r.blob(m.private_data, kMaxCmPrivateBytes, "private data"))) {
    return false;
  }
  if ((m.access & ~kAccessAll) != 0) return r.fail(-EINVAL, "unknown access flag bits");
  if ((m.flags & ~kCmFlagsAll) != 0) return r.fail(-EINVAL, "unknown connection flag bits");
  return range(r, m.qpn, 0, kMax24Bit, "QPN") &&
         (m.path_mtu == 0 || range(r, m.path_mtu, kMinPathMtu, kMaxPathMtu, "path MTU"));
}
void put(Writer& w, const CmListenRequest& m) { w.u64(m.service); }
bool get(Reader& r, CmListenRequest& m) { return r.u64(m.service); }
void put(Writer& w, const CmUnlistenRequest& m) { w.u64(m.service); }
bool get(Reader& r, CmUnlistenRequest& m) { return r.u64(m.service); }
void put(Writer& w, const CmConnectRequest& m) {
  w.bytes16(m.peer);
  w.u64(m.service);
  put(w, m.offer);
}
bool get(Reader& r, CmConnectRequest& m) {
  return r.bytes16(m.peer) && r.u64(m.service) && get(r, m.offer);
}
void put(Writer& w, const CmAcceptRequest& m) {
  w.u32(m.conn);
  put(w, m.offer);
}
bool get(Reader& r, CmAcceptRequest& m) { return r.u32(m.conn) && get(r, m.offer); }
void put(Writer& w, const CmRejectRequest& m) {
  w.u32(m.conn);
  w.u16(m.reason);
  w.blob(m.private_data, kMaxCmPrivateBytes);
}
bool get(Reader& r, CmRejectRequest& m) {
  return r.u32(m.conn) && r.u16(m.reason) && range(r, m.reason, 1, kCmMaxReason, "reason") &&
         r.blob(m.private_data, kMaxCmPrivateBytes, "private data");
}
void put(Writer& w, const CmDisconnectRequest& m) { w.u32(m.qpn); }
bool get(Reader& r, CmDisconnectRequest& m) {
  return r.u32(m.qpn) && range(r, m.qpn, 0, kMax24Bit, "QPN");
}
void put(Writer&, const CmPollEventRequest&) {}
bool get(Reader&, CmPollEventRequest&) { return true; }

// ---- replies -----------------------------------------------------------------------

void put(Writer& w, const AttachReply& m) {
  w.u32(m.client_id);
  w.u32(m.shm_abi_version);
  w.u64(m.region_bytes);
  w.u32(m.max_qps);
  w.u32(m.max_cqs);
  w.u32(m.max_mrs);
  w.u64(m.max_mr_bytes);
}
bool get(Reader& r, AttachReply& m) {
  return r.u32(m.client_id) && r.u32(m.shm_abi_version) && r.u64(m.region_bytes) &&
         r.u32(m.max_qps) && r.u32(m.max_cqs) && r.u32(m.max_mrs) && r.u64(m.max_mr_bytes);
}
void put(Writer&, const DetachReply&) {}
bool get(Reader&, DetachReply&) { return true; }
void put(Writer& w, const CreateCqReply& m) {
  w.u32(m.cq_id);
  w.u32(m.entries);
}
bool get(Reader& r, CreateCqReply& m) { return r.u32(m.cq_id) && r.u32(m.entries); }
void put(Writer&, const DestroyCqReply&) {}
bool get(Reader&, DestroyCqReply&) { return true; }
void put(Writer& w, const CreateQpReply& m) {
  w.u32(m.qpn);
  w.u32(m.qp_slot);
  w.u32(m.sq_entries);
  w.u32(m.rq_entries);
}
bool get(Reader& r, CreateQpReply& m) {
  return r.u32(m.qpn) && r.u32(m.qp_slot) && r.u32(m.sq_entries) && r.u32(m.rq_entries) &&
         range(r, m.qpn, 0, kMax24Bit, "QPN");
}
void put(Writer&, const DestroyQpReply&) {}
bool get(Reader&, DestroyQpReply&) { return true; }
void put(Writer& w, const RegMrReply& m) {
  w.u32(m.lkey);
  w.u32(m.rkey);
  w.u64(m.iova);
}
bool get(Reader& r, RegMrReply& m) { return r.u32(m.lkey) && r.u32(m.rkey) && r.u64(m.iova); }
void put(Writer&, const DeregMrReply&) {}
bool get(Reader&, DeregMrReply&) { return true; }
void put(Writer&, const ModifyQpReply&) {}
bool get(Reader&, ModifyQpReply&) { return true; }
void put(Writer& w, const QueryQpReply& m) {
  w.u32(m.qpn);
  w.str(m.traffic_class, kMaxClassNameBytes);
  put(w, m.attr);
}
bool get(Reader& r, QueryQpReply& m) {
  return r.u32(m.qpn) && r.str(m.traffic_class, kMaxClassNameBytes, true, "traffic class") &&
         get(r, m.attr);
}
void put(Writer& w, const StatsReply& m) {
  size_t n = m.counters.size() < kMaxCounters ? m.counters.size() : kMaxCounters;
  w.u32(static_cast<uint32_t>(n));
  for (size_t i = 0; i < n; ++i) {
    w.str(m.counters[i].name, kMaxCounterNameBytes);
    w.u64(m.counters[i].value);
  }
}
bool get(Reader& r, StatsReply& m) {
  uint32_t n;
  if (!(r.u32(n) && range(r, n, 0, kMaxCounters, "counter count"))) return false;
  m.counters.resize(n);
  for (auto& c : m.counters) {
    if (!(r.str(c.name, kMaxCounterNameBytes, true, "counter name") && r.u64(c.value))) {
      return false;
    }
  }
  return true;
}
void put(Writer& w, const StatusReply& m) {
  w.str(m.version, kMaxClientNameBytes);
  w.u64(m.uptime_s);
  w.u8(m.engine_running);
  w.str(m.engine_state, kMaxReasonBytes);
  w.u32(m.clients);
  w.u32(m.qps);
  w.str(m.policy_path, kMaxReasonBytes);
}
bool get(Reader& r, StatusReply& m) {
  return r.str(m.version, kMaxClientNameBytes, false, "version") && r.u64(m.uptime_s) &&
         r.u8(m.engine_running) && range(r, m.engine_running, 0, 1, "engine_running") &&
         r.str(m.engine_state, kMaxReasonBytes, false, "engine state") && r.u32(m.clients) &&
         r.u32(m.qps) && r.str(m.policy_path, kMaxReasonBytes, false, "policy path");
}
void put(Writer& w, const QpSummary& q) {
  w.u32(q.qpn);
  w.u32(q.client_id);
  w.u32(q.pid);
  w.u8(static_cast<uint8_t>(q.state));
  w.u32(q.dest_qpn);
  w.bytes16(q.dgid);
  w.str(q.traffic_class, kMaxClassNameBytes);
  w.u64(q.rate_bps);
  w.u32(q.alpha_ppm);
  w.u64(q.cnps_rx);
  w.u64(q.cnps_tx);
  w.u64(q.retransmits);
  w.u64(q.tx_bytes);
  w.u64(q.rx_bytes);
}
bool get(Reader& r, QpSummary& q) {
  uint8_t state;
  if (!(r.u32(q.qpn) && r.u32(q.client_id) && r.u32(q.pid) && r.u8(state) && r.u32(q.dest_qpn) &&
        r.bytes16(q.dgid) && r.str(q.traffic_class, kMaxClassNameBytes, true, "traffic class") &&
        r.u64(q.rate_bps) && r.u32(q.alpha_ppm) && r.u64(q.cnps_rx) && r.u64(q.cnps_tx) &&
        r.u64(q.retransmits) && r.u64(q.tx_bytes) && r.u64(q.rx_bytes))) {
    return false;
  }
  if (!valid_state(state)) return r.fail(-EINVAL, "unknown QP state " + std::to_string(state));
  q.state = static_cast<QpState>(state);
  return range(r, q.qpn, 0, kMax24Bit, "QPN") && range(r, q.dest_qpn, 0, kMax24Bit, "dest QPN") &&
         range(r, q.alpha_ppm, 0, 1000000, "alpha");
}
void put(Writer& w, const ListQpsReply& m) {
  size_t n = m.qps.size() < kMaxListEntries ? m.qps.size() : kMaxListEntries;
  w.u32(static_cast<uint32_t>(n));
  for (size_t i = 0; i < n; ++i) put(w, m.qps[i]);
  w.u32(m.next_qpn);
}
bool get(Reader& r, ListQpsReply& m) {
  uint32_t n;
  if (!(r.u32(n) && range(r, n, 0, kMaxListEntries, "QP count"))) return false;
  m.qps.resize(n);
  for (auto& q : m.qps) {
    if (!get(r, q)) return false;
  }
  return r.u32(m.next_qpn) && range(r, m.next_qpn, 0, kMax24Bit, "next QPN");
}
void put(Writer& w, const PolicyShowReply& m) {
  w.u64(m.total_bytes);
  w.str(m.chunk, kMaxTextChunkBytes);
}
bool get(Reader& r, PolicyShowReply& m) {
  return r.u64(m.total_bytes) && r.str(m.chunk, kMaxTextChunkBytes, false, "policy text");
}
void put(Writer& w, const PolicyReloadReply& m) { w.str(m.message, kMaxReasonBytes); }
bool get(Reader& r, PolicyReloadReply& m) {
  return r.str(m.message, kMaxReasonBytes, false, "message");
}

void put(Writer&, const CmListenReply&) {}
bool get(Reader&, CmListenReply&) { return true; }
void put(Writer&, const CmUnlistenReply&) {}
bool get(Reader&, CmUnlistenReply&) { return true; }
void put(Writer& w, const CmConnectReply& m) { w.u32(m.conn); }
bool get(Reader& r, CmConnectReply& m) { return r.u32(m.conn); }
void put(Writer&, const CmAcceptReply&) {}
bool get(Reader&, CmAcceptReply&) { return true; }
void put(Writer&, const CmRejectReply&) {}
bool get(Reader&, CmRejectReply&) { return true; }
void put(Writer&, const CmDisconnectReply&) {}
bool get(Reader&, CmDisconnectReply&) { return true; }
void put(Writer& w, const CmPollEventReply& m) {
  const CmEvent& e = m.event;
  w.u8(static_cast<uint8_t>(e.kind));
  w.u32(e.conn);
  w.u32(e.qpn);
  w.bytes16(e.peer);
  w.u64(e.service);
  w.u32(e.remote_qpn);
  w.u32(e.pmtu_bytes);
  w.u32(e.flags);
  w.u16(e.reason);
  w.blob(e.private_data, kMaxCmPrivateBytes);
}
bool get(Reader& r, CmPollEventReply& m) {
  CmEvent& e = m.event;
  uint8_t kind;
  if (!(r.u8(kind) && r.u32(e.conn) && r.u32(e.qpn) && r.bytes16(e.peer) && r.u64(e.service) &&
        r.u32(e.remote_qpn) && r.u32(e.pmtu_bytes) && r.u32(e.flags) && r.u16(e.reason) &&
        r.blob(e.private_data, kMaxCmPrivateBytes, "private data"))) {
    return false;
  }
  if (kind > kMaxCmEventKind) return r.fail(-EINVAL, "unknown CM event " + std::to_string(kind));
  e.kind = static_cast<CmEventKind>(kind);
  return range(r, e.qpn, 0, kMax24Bit, "QPN") &&
         range(r, e.remote_qpn, 0, kMax24Bit, "remote QPN") &&
         range(r, e.reason, 0, kCmMaxReason, "reason");
}

// ---- framing ---------------------------------------------------------------------

void put_header(Writer& w, uint16_t type, uint32_t seq) {
  w.u32(kControlMagic);
  w.u16(kControlVersion);
  w.u16(type);
  w.u32(seq);
  w.u32(0);  // body_len, patched by finish()
}

std::vector<uint8_t> finish(Writer& w) {
  auto& b = w.buf();
  uint32_t body = static_cast<uint32_t>(b.size() - kHeaderBytes);
  for (int i = 0; i < 4; ++i) b[12 + i] = static_cast<uint8_t>(body >> (8 * i));
  return std::move(b);
}

// Checks magic, version, length; returns the body reader position via `body`.
bool check_header(std::span<const uint8_t> bytes, Header& h, bool want_reply, CodecError& err) {
  if (bytes.size() > kMaxMessageBytes) {
    err = {-EMSGSIZE, "control message of " + std::to_string(bytes.size()) +
                          " bytes exceeds the limit of " + std::to_string(kMaxMessageBytes)};
    return false;
  }
  if (!peek_header(bytes, h)) {
    err = {-EBADMSG, "control message shorter than its 16-byte header"};
    return false;
  }
  if (h.magic != kControlMagic) {
    err = {-EPROTO, "not a conduit control message (bad magic)"};
    return false;
  }
  if (h.version != kControlVersion) {
    err = {-EPROTONOSUPPORT, "control protocol version " + std::to_string(h.version) +
                                 " is not supported; this side speaks version " +
                                 std::to_string(kControlVersion) +
                                 " (upgrade libconduit and conduitd together)"};
    return false;
  }
  if (h.body_len != bytes.size() - kHeaderBytes) {
    err = {-EBADMSG, "header says " + std::to_string(h.body_len) + " body bytes, datagram has " +
                         std::to_string(bytes.size() - kHeaderBytes)};
    return false;
  }
  bool is_reply = (h.type & kReplyFlag) != 0;
  uint16_t t = static_cast<uint16_t>(h.type & ~kReplyFlag);
  if (is_reply != want_reply) {
    err = {-EPROTO,
           want_reply ? "expected a reply, got a request" : "expected a request, got a reply"};
    return false;
  }
  if (t < 1 || t > kMaxMsgType) {
    err = {-EOPNOTSUPP, "unknown control message type " + std::to_string(t)};
    return false;
  }
  return true;
}

// Runtime index -> variant alternative, so one table serves every message type.
template <typename Variant, size_t I = 0>
bool get_alternative(Reader& r, size_t index, Variant& out) {
  if constexpr (I < std::variant_size_v<Variant>) {
    if (index == I) {
      auto& v = out.template emplace<I>();
      return get(r, v);
    }
    return get_alternative<Variant, I + 1>(r, index, out);
  } else {
    return false;
  }
}

}  // namespace

const char* msg_type_name(MsgType t) {
  switch (t) {
    case MsgType::kAttach:
      return "attach";
    case MsgType::kDetach:
      return "detach";
    case MsgType::kCreateCq:
      return "create_cq";
    case MsgType::kDestroyCq:
      return "destroy_cq";
    case MsgType::kCreateQp:
      return "create_qp";
    case MsgType::kDestroyQp:
      return "destroy_qp";
    case MsgType::kRegMr:
      return "reg_mr";
    case MsgType::kDeregMr:
      return "dereg_mr";
    case MsgType::kModifyQp:
      return "modify_qp";
    case MsgType::kQueryQp:
      return "query_qp";
    case MsgType::kStats:
      return "stats";
    case MsgType::kStatus:
      return "status";
    case MsgType::kListQps:
      return "list_qps";
    case MsgType::kPolicyShow:
      return "policy_show";
    case MsgType::kPolicyReload:
      return "policy_reload";
    case MsgType::kCmListen:
      return "cm_listen";
    case MsgType::kCmUnlisten:
      return "cm_unlisten";
    case MsgType::kCmConnect:
      return "cm_connect";
    case MsgType::kCmAccept:
      return "cm_accept";
    case MsgType::kCmReject:
      return "cm_reject";
    case MsgType::kCmDisconnect:
      return "cm_disconnect";
    case MsgType::kCmPollEvent:
      return "cm_poll_event";
  }
  return "unknown";
}

const char* qp_state_name(QpState s) {
  switch (s) {
    case QpState::kReset:
      return "RESET";
    case QpState::kInit:
      return "INIT";
    case QpState::kRtr:
      return "RTR";
    case QpState::kRts:
      return "RTS";
    case QpState::kSqd:
      return "SQD";
    case QpState::kSqe:
      return "SQE";
    case QpState::kError:
      return "ERROR";
  }
  return "UNKNOWN";
}

std::string gid_string(const std::array<uint8_t, 16>& g) {
  if (std::all_of(g.begin(), g.end(), [](uint8_t b) { return b == 0; })) return "-";
  return cm_addr_text(g);
}

bool is_valid_name(const std::string& s, size_t max_bytes) {
  if (s.size() > max_bytes) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool validate_qp_attr(const QpAttr& a, std::string& why) {
  if ((a.mask & ~kAttrAll) != 0) {
    why = "unknown attribute mask bits";
    return false;
  }
  struct Field {
    uint32_t bit;
    uint64_t value;
    uint64_t lo, hi;
    const char* name;
  };
  const Field fields[] = {
      {kAttrState, static_cast<uint8_t>(a.state), 0, static_cast<uint8_t>(QpState::kError),
       "state"},
      {kAttrAccess, a.access, 0, kAccessAll, "access flags"},
      {kAttrPathMtu, a.path_mtu, kMinPathMtu, kMaxPathMtu, "path MTU (1=256 .. 5=4096)"},
      {kAttrDestQpn, a.dest_qpn, 0, kMax24Bit, "remote QPN"},
      {kAttrRqPsn, a.rq_psn, 0, kMax24Bit, "receive PSN"},
      {kAttrSqPsn, a.sq_psn, 0, kMax24Bit, "send PSN"},
      {kAttrTimeout, a.timeout, 0, 31, "timeout"},
      {kAttrRetryCnt, a.retry_cnt, 0, 7, "retry_cnt"},
      {kAttrRnrRetry, a.rnr_retry, 0, 7, "rnr_retry"},
      {kAttrMinRnrTimer, a.min_rnr_timer, 0, 31, "min_rnr_timer"},
      {kAttrMaxRdAtomic, a.max_rd_atomic, 1, kMaxRdAtomic, "max_rd_atomic"},
      {kAttrMaxDestRdAtomic, a.max_dest_rd_atomic, 1, kMaxRdAtomic, "max_dest_rd_atomic"},
  };
  for (const auto& f : fields) {
    if ((a.mask & f.bit) == 0) {
      if (f.value != 0) {
        why = std::string(f.name) + " is set but not in the attribute mask";
        return false;
      }
    } else if (f.value < f.lo || f.value > f.hi) {
      why = std::string(f.name) + " = " + std::to_string(f.value) + " is outside [" +
            std::to_string(f.lo) + ", " + std::to_string(f.hi) + "]";
      return false;
    }
  }
  if ((a.mask & kAttrDgid) == 0) {
    for (uint8_t b : a.dgid) {
      if (b != 0) {
        why = "remote GID is set but not in the attribute mask";
        return false;
      }
    }
  }
  return true;  // access <= kAccessAll covers unknown bits: the flags are contiguous
}

bool peek_header(std::span<const uint8_t> bytes, Header& out) {
  if (bytes.size() < kHeaderBytes) return false;
  auto le = [&](size_t off, int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint32_t>(bytes[off + i]) << (8 * i);
    return v;
  };
  out.magic = le(0, 4);
  out.version = static_cast<uint16_t>(le(4, 2));
  out.type = static_cast<uint16_t>(le(6, 2));
  out.seq = le(8, 4);
  out.body_len = le(12, 4);
  return true;
}

std::vector<uint8_t> encode_request(const RequestMessage& msg) {
  Writer w;
  put_header(w, static_cast<uint16_t>(msg.type()), msg.seq);
  std::visit([&](const auto& body) { put(w, body); }, msg.body);
  return finish(w);
}

std::vector<uint8_t> encode_reply(const ReplyMessage& msg) {
  Writer w;
  put_header(w, static_cast<uint16_t>(static_cast<uint16_t>(msg.type) | kReplyFlag), msg.seq);
  w.i32(msg.status);
  if (msg.status < 0) {
    w.str(msg.reason, kMaxReasonBytes);
  } else {
    std::visit([&](const auto& body) { put(w, body); }, msg.body);
  }
  return finish(w);
}

bool decode_request(std::span<const uint8_t> bytes, RequestMessage& out, CodecError& err) {
  Header h;
  if (!check_header(bytes, h, false, err)) return false;
  Reader r(bytes.subspan(kHeaderBytes));
  out.seq = h.seq;
  if (!get_alternative(r, static_cast<size_t>(h.type - 1), out.body) || !r.at_end()) {
    err = r.err().code != 0
              ? r.err()
              : CodecError{-EBADMSG, std::string("trailing bytes after ") +
                                         msg_type_name(static_cast<MsgType>(h.type)) + " request"};
    return false;
  }
  return true;
}

bool decode_reply(std::span<const uint8_t> bytes, ReplyMessage& out, CodecError& err) {
  Header h;
  if (!check_header(bytes, h, true, err)) return false;
  Reader r(bytes.subspan(kHeaderBytes));
  uint16_t t = static_cast<uint16_t>(h.type & ~kReplyFlag);
  out.seq = h.seq;
  out.type = static_cast<MsgType>(t);
  out.reason.clear();
  bool ok = r.i32(out.status);
  if (ok && out.status > 0) ok = r.fail(-EBADMSG, "reply status must be 0 or a negative errno");
  if (ok && out.status < 0) {
    ok = out.status >= -4095 ? r.str(out.reason, kMaxReasonBytes, false, "reason")
                             : r.fail(-EBADMSG, "reply status is not an errno value");
  } else if (ok) {
    ok = get_alternative(r, static_cast<size_t>(t - 1), out.body);
  }
  if (!ok || !r.at_end()) {
    err = r.err().code != 0 ? r.err()
                            : CodecError{-EBADMSG, std::string("trailing bytes after ") +
                                                       msg_type_name(out.type) + " reply"};
    return false;
  }
  return true;
}

ReplyMessage make_error_reply(MsgType type, uint32_t seq, int code, std::string reason) {
  ReplyMessage r;
  r.seq = seq;
  r.type = type;
  r.status = code < 0 ? code : -EIO;
  r.reason = std::move(reason);
  return r;
}

}  // namespace conduit::proto
