// Header-only C++ RAII wrapper over <conduit/conduit.h>.
//
// Every wrapper owns one C object and frees it in its destructor; failures
// throw conduit::Error carrying the negative errno and libconduit's message.
// Destroy order is the same as in C: QPs before their CQs, everything before
// its Context (declare them after the Context, so they are destroyed first).
// Thread roles are those of the C API.
#pragma once

#include <conduit/conduit.h>

#include <cerrno>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace conduit {

class Error : public std::runtime_error {
 public:
  Error(int code, const std::string& what_failed)
      : std::runtime_error(what_failed + ": " + conduit_strerror(code)), code_(code) {}
  int code() const { return code_; }  // negative errno

 private:
  int code_;
};

namespace detail {
inline int check(int rc, const char* what) {
  if (rc < 0) throw Error(rc, what);
  return rc;
}
struct CloseContext {
  void operator()(conduit_context* c) const { conduit_close(c); }
};
struct FreeMr {
  void operator()(conduit_mr* m) const { conduit_free_mr(m); }
};
struct DestroyCq {
  void operator()(conduit_cq* c) const { conduit_destroy_cq(c); }
};
struct DestroyQp {
  void operator()(conduit_qp* q) const { conduit_destroy_qp(q); }
};
}  // namespace detail

class MemoryRegion {
 public:
  explicit MemoryRegion(conduit_mr* mr) : mr_(mr) {}
  void* addr() const { return mr_->addr; }
  template <class T = uint8_t>
  T* data() const {
    return static_cast<T*>(mr_->addr);
  }
  size_t length() const { return mr_->length; }
  uint32_t lkey() const { return mr_->lkey; }
  uint32_t rkey() const { return mr_->rkey; }
  uint64_t iova() const { return mr_->iova; }
  // An SGE covering [offset, offset + len) of this MR.
  conduit_sge sge(size_t offset, uint32_t len) const {
    return conduit_sge{reinterpret_cast<uint64_t>(data() + offset), len, mr_->lkey};
  }
  conduit_mr* get() const { return mr_.get(); }

 private:
  std::unique_ptr<conduit_mr, detail::FreeMr> mr_;
};

class CompletionQueue {
 public:
  explicit CompletionQueue(conduit_cq* cq) : cq_(cq) {}
  // Fills wc (up to its size) and shrinks it to what arrived. A CQ overrun throws
  // Error with code() -EOVERFLOW once, after the completions before it (see
  // conduit_poll_cq: some posted WRs will never complete); the CQ stays usable.
  size_t poll(std::vector<conduit_wc>& wc) {
    int n = detail::check(conduit_poll_cq(cq_.get(), static_cast<int>(wc.size()), wc.data()),
                          "conduit_poll_cq");
    wc.resize(static_cast<size_t>(n));
    return static_cast<size_t>(n);
  }
  int poll(conduit_wc* wc, int max) {
    return detail::check(conduit_poll_cq(cq_.get(), max, wc), "conduit_poll_cq");
  }
  // True when completions (or an overrun, which poll() reports) are ready, false on timeout.
  bool wait(int timeout_ms) {
    return detail::check(conduit_wait_cq(cq_.get(), timeout_ms), "conduit_wait_cq") > 0;
  }
  conduit_cq* get() const { return cq_.get(); }

 private:
  std::unique_ptr<conduit_cq, detail::DestroyCq> cq_;
};

class QueuePair {
 public:
  explicit QueuePair(conduit_qp* qp) : qp_(qp) {}
  uint32_t qpn() const { return conduit_qp_num(qp_.get()); }
  void connect(const conduit_qp_connect_attr& attr) {
    detail::check(conduit_connect_qp(qp_.get(), &attr), "conduit_connect_qp");
  }
  // Connection manager (see conduit.h): connect to `service` at the conduitd
  // `host`, or accept a request; both wait until the QP is connected (RTS).
  conduit_cm_conn connect_service(const std::string& host, uint64_t service,
                                  const conduit_cm_param* param = nullptr, int timeout_ms = -1) {
    conduit_cm_conn out{};
    detail::check(
        conduit_connect_service(qp_.get(), host.c_str(), service, param, timeout_ms, &out),
        "conduit_connect_service");
    return out;
  }
  conduit_cm_conn accept(const conduit_cm_request& req, const conduit_cm_param* param = nullptr,
                         int timeout_ms = -1) {
    conduit_cm_conn out{};
    detail::check(conduit_accept(qp_.get(), &req, param, timeout_ms, &out), "conduit_accept");
    return out;
  }
  void disconnect() { detail::check(conduit_disconnect(qp_.get()), "conduit_disconnect"); }
  // true when the peer ended the connection within timeout_ms, false on timeout.
  bool wait_disconnect(int timeout_ms) {
    const int rc = conduit_wait_disconnect(qp_.get(), timeout_ms);
    if (rc == -ETIMEDOUT) return false;
    detail::check(rc, "conduit_wait_disconnect");
    return true;
  }
  conduit_qp_attr query() {
    conduit_qp_attr a{};
    detail::check(conduit_query_qp(qp_.get(), &a), "conduit_query_qp");
    return a;
  }
  void post_send(conduit_send_wr& wr) {
    conduit_send_wr* bad = nullptr;
    detail::check(conduit_post_send(qp_.get(), &wr, &bad), "conduit_post_send");
  }
  void post_recv(conduit_recv_wr& wr) {
    conduit_recv_wr* bad = nullptr;
    detail::check(conduit_post_recv(qp_.get(), &wr, &bad), "conduit_post_recv");
  }
  conduit_qp* get() const { return qp_.get(); }

 private:
  std::unique_ptr<conduit_qp, detail::DestroyQp> qp_;
};

class Context {
 public:
  // socket_path empty: $CONDUIT_SOCKET or CONDUIT_DEFAULT_SOCKET.
  explicit Context(const std::string& socket_path = "", uint64_t region_bytes = 0,
                   const std::string& client_name = "") {
    conduit_context_attr attr{};
    attr.socket_path = socket_path.empty() ? nullptr : socket_path.c_str();
    attr.region_bytes = region_bytes;
    attr.client_name = client_name.empty() ? nullptr : client_name.c_str();
    conduit_context* c = nullptr;
    detail::check(conduit_open(&attr, &c), "conduit_open");
    ctx_.reset(c);
  }
  conduit_context_limits limits() const {
    conduit_context_limits l{};
    detail::check(conduit_query_context(ctx_.get(), &l), "conduit_query_context");
    return l;
  }
  MemoryRegion alloc_mr(size_t length, uint32_t access) {
    conduit_mr* mr = nullptr;
    detail::check(conduit_alloc_mr(ctx_.get(), length, access, &mr), "conduit_alloc_mr");
    return MemoryRegion(mr);
  }
  CompletionQueue create_cq(uint32_t entries) {
    conduit_cq* cq = nullptr;
    detail::check(conduit_create_cq(ctx_.get(), entries, &cq), "conduit_create_cq");
    return CompletionQueue(cq);
  }
  QueuePair create_qp(CompletionQueue& send_cq, CompletionQueue& recv_cq,
                      const std::string& traffic_class = "", uint32_t max_send_wr = 0,
                      uint32_t max_recv_wr = 0) {
    conduit_qp_init_attr attr{};
    attr.send_cq = send_cq.get();
    attr.recv_cq = recv_cq.get();
    attr.max_send_wr = max_send_wr;
    attr.max_recv_wr = max_recv_wr;
    attr.traffic_class = traffic_class.empty() ? nullptr : traffic_class.c_str();
    conduit_qp* qp = nullptr;
    detail::check(conduit_create_qp(ctx_.get(), &attr, &qp), "conduit_create_qp");
    return QueuePair(qp);
  }
  // Connection manager, passive side (see conduit.h).
  void listen(uint64_t service) {
    detail::check(conduit_listen(ctx_.get(), service), "conduit_listen");
  }
  void unlisten(uint64_t service) {
    detail::check(conduit_unlisten(ctx_.get(), service), "conduit_unlisten");
  }
  // False on timeout.
  bool get_request(conduit_cm_request& out, int timeout_ms = -1) {
    const int rc = conduit_get_request(ctx_.get(), timeout_ms, &out);
    if (rc == -ETIMEDOUT) return false;
    detail::check(rc, "conduit_get_request");
    return true;
  }
  void reject(const conduit_cm_request& req, int reason = CONDUIT_CM_REJ_REFUSED,
              const void* private_data = nullptr, size_t private_len = 0) {
    detail::check(conduit_reject_data(ctx_.get(), &req, reason, private_data, private_len),
                  "conduit_reject_data");
  }
  conduit_context* get() const { return ctx_.get(); }

 private:
  std::unique_ptr<conduit_context, detail::CloseContext> ctx_;
};

}  // namespace conduit
