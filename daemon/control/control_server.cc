#include "control/control_server.h"

#include <grp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address_v4.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <span>

#include "control/kernel_frame_tap.h"
#include "control/metrics_server.h"
#include "metrics/prometheus_text.h"
#include "proto/control_codec.h"
#include "proto/seqpacket.h"

namespace conduit::control {

namespace asio = boost::asio;
using proto::UniqueFd;

namespace {

// How long a scrape waits for the engine's counters (as conduitctl stats does).
constexpr uint32_t kMetricsStatsWaitMs = 200;

std::string errno_str(int err) { return std::strerror(err < 0 ? -err : err); }

std::string list_ids(const std::vector<uint32_t>& ids) {
  std::string s;
  for (auto id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s.empty() ? "none" : s;
}

// Supplementary groups of the peer at connect time (Linux >= 4.13).
std::vector<gid_t> peer_groups(int fd) {
  std::vector<gid_t> groups(64);
  socklen_t len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) != 0) {
    if (errno != ERANGE) return {};
    groups.resize(len / sizeof(gid_t));
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) != 0) return {};
  }
  groups.resize(len / sizeof(gid_t));
  return groups;
}

}  // namespace

bool peer_allowed(const ServerConfig& config, uid_t uid, gid_t gid,
                  const std::vector<gid_t>& supplementary, std::string& why) {
  if (uid == 0 || uid == ::geteuid()) return true;
  if (config.allowed_uids.empty() && config.allowed_gids.empty()) return true;
  if (std::find(config.allowed_uids.begin(), config.allowed_uids.end(), uid) !=
      config.allowed_uids.end()) {
    return true;
  }
  for (gid_t g : config.allowed_gids) {
    if (g == gid ||
        std::find(supplementary.begin(), supplementary.end(), g) != supplementary.end()) {
      return true;
    }
  }
  std::vector<uint32_t> uids(config.allowed_uids.begin(), config.allowed_uids.end());
  std::vector<uint32_t> gids(config.allowed_gids.begin(), config.allowed_gids.end());
  std::string names;
  for (gid_t g : config.allowed_gids) {
    if (const group* gr = ::getgrgid(g))
      names += std::string(names.empty() ? "" : ",") + gr->gr_name;
  }
  why = "permission denied: uid " + std::to_string(uid) +
        " is not allowed by the conduitd policy (allowed uids: " + list_ids(uids) +
        "; allowed gids: " + list_ids(gids) + (names.empty() ? "" : " = " + names) +
        "); add the user to an allowed group or ask the operator to extend clients.allowed_uids / "
        "clients.allowed_gids";
  return false;
}

struct ControlServer::Impl {
  struct Session {
    uint32_t client_id = 0;
    std::string refused;  // non-empty: answer with -EACCES and close
    asio::posix::stream_descriptor sock;
    explicit Session(asio::io_context& io) : sock(io) {}
  };

  Impl(ControlServer& owner, ControlLimits limits, ServiceHooks hooks, EngineChannel* engine)
      : owner(owner),
        service(limits, with_metrics_counters(std::move(hooks)), engine),
        engine(engine),
        listener(io),
        engine_wake(io),
        kernel_tap(io),
        timer(io) {
    if (int rc = SigbusGuard::install(); rc < 0) {
      spdlog::warn(
          "control: cannot install the SIGBUS guard ({}); a client that punches holes "
          "into its hugetlb region can crash the daemon",
          errno_str(-rc));
    }
  }

  // conduitctl stats also shows the metrics endpoint's own counters (metrics.*).
  ServiceHooks with_metrics_counters(ServiceHooks h) {
    version = h.version;
    h.extra_counters = [this, inner = std::move(h.extra_counters)] {
      std::vector<proto::Counter> v;
      if (inner) v = inner();
      if (metrics) metrics->counters(v);
      return v;
    };
    return h;
  }
  // The body of GET /metrics: what conduitctl stats and conduitctl qps show.
  std::string metrics_page() {
    service.refresh_engine_stats(kMetricsStatsWaitMs);
    metrics::Exposition e;
    e.version = version;
    e.max_qps = owner.config_.metrics_max_qps;
    for (auto& c : service.counters()) e.stats.push_back({std::move(c.name), c.value});
    for (const proto::QpSummary& q : service.qp_summaries()) {
      metrics::QpSample m;
      m.qpn = q.qpn;
      m.client_id = q.client_id;
      m.pid = q.pid;
      m.state = proto::qp_state_name(q.state);
      const std::string peer = proto::gid_string(q.dgid);
      m.peer = peer == "-" ? "" : peer;
      m.peer_qpn = q.dest_qpn;
      m.traffic_class = q.traffic_class;
      m.rate_bps = q.rate_bps;
      m.alpha_ppm = q.alpha_ppm;
      m.cnps_rx = q.cnps_rx;
      m.cnps_tx = q.cnps_tx;
      m.retransmits = q.retransmits;
      m.tx_bytes = q.tx_bytes;
      m.rx_bytes = q.rx_bytes;
      e.qps.push_back(std::move(m));
    }
    return metrics::format_exposition(e);
  }

  ControlServer& owner;
  asio::io_context io;
  std::string version;  // conduitd's, for conduit_build_info (set before `service` is built)
  ControlService service;
  std::unique_ptr<MetricsServer> metrics;
  EngineChannel* engine;
  asio::posix::stream_descriptor listener;
  asio::posix::stream_descriptor engine_wake;
  asio::posix::stream_descriptor kernel_tap;  // watch_kernel_frames(); owned
  asio::steady_timer timer;
  std::map<Session*, std::shared_ptr<Session>> sessions;
  std::vector<uint8_t> rx;
  std::vector<UniqueFd> rx_fds;
  bool stopping = false;

  void publish() {
    owner.clients_.store(service.client_count(), std::memory_order_relaxed);
    owner.qps_.store(service.qp_count(), std::memory_order_relaxed);
  }

  void accept_loop() {
    listener.async_wait(asio::posix::stream_descriptor::wait_read, [this](auto ec) {
      if (ec || stopping) return;
      for (;;) {
        int fd =
            ::accept4(listener.native_handle(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
          if (errno == EINTR) continue;
          if (errno != EAGAIN && errno != EWOULDBLOCK) {
            spdlog::warn("control: accept failed: {}", errno_str(errno));
          }
          break;
        }
        on_accept(fd);
      }
      accept_loop();
    });
  }

  void on_accept(int fd) {
    auto s = std::make_shared<Session>(io);
    s->sock.assign(fd);
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      spdlog::warn("control: SO_PEERCRED failed: {}", errno_str(errno));
      return;  // s closes the socket
    }
    std::string why;
    if (!peer_allowed(owner.config_, cred.uid, cred.gid, peer_groups(fd), why)) {
      spdlog::warn("control: refused pid {} uid {}: not in the allowed uids/gids", cred.pid,
                   cred.uid);
      s->refused = why;
    } else {
      s->client_id = service.open_client(PeerCred{cred.pid, cred.uid, cred.gid});
      if (s->client_id == 0) {
        s->refused = "too many clients: conduitd serves at most its clients.max_clients";
        spdlog::warn("control: refused pid {}: client limit reached", cred.pid);
      } else {
        spdlog::debug("control: connection {} from pid {} (uid {}, gid {})", s->client_id, cred.pid,
                      cred.uid, cred.gid);
      }
    }
    sessions[s.get()] = s;
    publish();
    read_loop(s);
  }

  void read_loop(const std::shared_ptr<Session>& s) {
    s->sock.async_wait(asio::posix::stream_descriptor::wait_read, [this, s](auto ec) {
      if (ec || stopping) return;
      // Drain every queued datagram; SEQPACKET preserves their boundaries.
      for (;;) {
        ssize_t n = proto::recv_datagram(s->sock.native_handle(), rx, rx_fds, MSG_DONTWAIT);
        if (n == -EAGAIN || n == -EWOULDBLOCK) break;
        if (n == 0 || (n < 0 && n != -EMSGSIZE)) {
          close_session(s, n == 0 ? "hung up" : errno_str(static_cast<int>(n)));
          return;
        }
        if (!on_datagram(s, n)) return;
      }
      read_loop(s);
    });
  }

  // Returns false when the session was closed.
  bool on_datagram(const std::shared_ptr<Session>& s, ssize_t n) {
    proto::ReplyMessage reply;
    std::vector<int> fds;
    std::vector<proto::UniqueFd> handed_over;  // closed once the reply is sent
    proto::Header h;
    const bool have_header = n > 0 && proto::peek_header(rx, h);
    const auto type =
        static_cast<proto::MsgType>(have_header && (h.type & ~proto::kReplyFlag) >= 1 &&
                                            (h.type & ~proto::kReplyFlag) <= proto::kMaxMsgType
                                        ? (h.type & ~proto::kReplyFlag)
                                        : 1);
    const uint32_t seq = have_header ? h.seq : 0;
    bool close_after = false;
    proto::RequestMessage req;
    proto::CodecError err;
    if (n < 0) {
      reply = proto::make_error_reply(type, seq, -EMSGSIZE, "control message too large");
      close_after = true;
    } else if (!s->refused.empty()) {
      reply = proto::make_error_reply(type, seq, -EACCES, s->refused);
      close_after = true;
    } else if (!proto::decode_request(rx, req, err)) {
      spdlog::warn("control: client {}: bad request: {}", s->client_id, err.reason);
      reply = proto::make_error_reply(type, seq, err.code, err.reason);
      // A client speaking another protocol version gets its answer and stays;
      // garbage closes the connection.
      close_after = err.code != -EPROTONOSUPPORT && err.code != -EINVAL;
    } else {
      auto out = service.handle(s->client_id, req, rx_fds);
      reply = std::move(out.reply);
      fds = std::move(out.fds);
      handed_over = std::move(out.handed_over);
      for (const auto& fd : handed_over) fds.push_back(fd.get());
      if (reply.status < 0) {
        spdlog::info("control: client {} {}: {}", s->client_id, proto::msg_type_name(req.type()),
                     reply.reason);
      }
    }
    rx_fds.clear();
    // The counts first: a client that got its reply may look at them at once
    // (conduitctl status after a create, a test after its setup).
    publish();
    const auto bytes = proto::encode_reply(reply);
    int rc = proto::send_datagram(s->sock.native_handle(), bytes, fds);
    if (rc < 0) {
      // -EAGAIN: the client does not read its replies; it is broken or hostile.
      close_session(s, "reply not deliverable: " + errno_str(rc));
      return false;
    }
    if (close_after) {
      close_session(s, "closed after error");
      return false;
    }
    return true;
  }

  // Hands the engine the release of the session's client; its connection stays open.
  void release_client(Session& s, const std::string& why) {
    if (s.client_id == 0) return;
    spdlog::log(service.is_attached(s.client_id) ? spdlog::level::info : spdlog::level::debug,
                "control: client {} disconnected ({}); releasing its resources", s.client_id, why);
    service.close_client(s.client_id);
    s.client_id = 0;
  }

  void close_session(const std::shared_ptr<Session>& s, const std::string& why) {
    release_client(*s, why);
    boost::system::error_code ignored;
    s->sock.close(ignored);
    sessions.erase(s.get());
    publish();
  }

  // Engine events, then the connections of clients the engine cut off.
  void engine_events() {
    service.process_engine_events();
    for (uint32_t id : service.take_clients_to_disconnect()) {
      for (auto& [p, s] : sessions) {
        if (s->client_id == id) {
          const std::shared_ptr<Session> keep = s;  // close_session erases the map entry
          close_session(keep, "cut off by the engine: impossible ring indices");
          break;
        }
      }
    }
    publish();
  }

  void engine_loop() {
    if (engine == nullptr) return;
    engine_wake.async_wait(asio::posix::stream_descriptor::wait_read, [this](auto ec) {
      if (ec || stopping) return;
      engine->drain_control_wake();
      engine_events();
      engine_loop();
    });
  }

  void kernel_tap_loop() {
    kernel_tap.async_wait(asio::posix::stream_descriptor::wait_read, [this](auto ec) {
      if (ec || stopping) return;
      // One byte more than a frame may have: a longer one arrives cut and is dropped.
      std::array<uint8_t, ControlService::kMaxKernelFrameBytes + 1> buf;
      for (int i = 0; i < 64; ++i) {  // then let the other work of this thread run
        const ssize_t n = read_kernel_frame(kernel_tap.native_handle(), buf);
        if (n < 0) break;  // EAGAIN: read them all (the socket does not block)
        service.kernel_frame(std::span<const uint8_t>(
            buf.data(), std::min<size_t>(static_cast<size_t>(n), buf.size())));
      }
      kernel_tap_loop();
    });
  }

  void drop_faulted_clients() {
    for (uint32_t id : service.take_faulted_clients()) {
      std::shared_ptr<Session> victim;
      for (auto& [p, s] : sessions) {
        if (s->client_id == id) victim = s;
      }
      if (!victim) continue;
      spdlog::warn(
          "control: client {} made the daemon fault on its shared region (a hole punched "
          "into it?); disconnecting it",
          id);
      close_session(victim, "its region faulted");
    }
  }

  // Retries commands a full engine ring refused; disconnects clients whose region faulted.
  void tick() {
    timer.expires_after(std::chrono::milliseconds(100));
    timer.async_wait([this](auto ec) {
      if (ec || stopping) return;
      engine_events();
      drop_faulted_clients();
      tick();
    });
  }

  void shutdown() {
    stopping = true;
    boost::system::error_code ignored;
    listener.close(ignored);
    engine_wake.cancel(ignored);
    kernel_tap.close(ignored);
    timer.cancel();
    if (metrics) metrics->stop();
    auto all = sessions;
    service.begin_stop();
    for (auto& [p, s] : all) release_client(*s, "daemon stopping");
    // The engine runs until this returns (main stops it after the server): every release
    // must be in its ring by then. Then each connection closes once the engine has acked its
    // client's release: the flush completions of the client's outstanding WRs are in its CQ
    // ring before it can see the hang-up. Both waits share one budget.
    const auto t0 = std::chrono::steady_clock::now();
    service.flush_backlog_for_stop(ControlService::kStopBacklogMs);
    const auto spent =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    service.await_releases_for_stop(spent >= ControlService::kStopBacklogMs
                                        ? 0
                                        : ControlService::kStopBacklogMs -
                                              static_cast<uint32_t>(spent));
    for (auto& [p, s] : all) close_session(s, "daemon stopping");
    engine_wake.release();  // the EngineChannel owns that descriptor
  }
};

ControlServer::ControlServer(ServerConfig config, ControlLimits limits, ServiceHooks hooks,
                             EngineChannel* engine)
    : config_(std::move(config)),
      impl_(std::make_unique<Impl>(*this, limits, std::move(hooks), engine)) {}

ControlServer::~ControlServer() { stop(); }

int ControlServer::start(std::string& error) {
  const std::string& path = config_.socket_path;
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    error = "control socket path '" + path + "' is empty or longer than " +
            std::to_string(sizeof(addr.sun_path) - 1) + " bytes";
    return -ENAMETOOLONG;
  }
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code fec;
  if (!dir.empty() && !std::filesystem::exists(dir, fec)) {
    std::filesystem::create_directories(dir, fec);
    if (fec) {
      error = "cannot create " + dir.string() + ": " + fec.message() +
              " (under systemd, RuntimeDirectory=conduit creates /run/conduit)";
      return -fec.value();
    }
  }
  UniqueFd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid()) {
    error = "socket(AF_UNIX, SOCK_SEQPACKET): " + errno_str(errno);
    return -errno;
  }
  // Replace a stale socket left by a crashed daemon, but never a live one or a
  // file that is not a socket.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      error = path + " exists and is not a socket; refusing to replace it";
      return -EEXIST;
    }
    UniqueFd probe;
    if (proto::connect_seqpacket(path, probe) >= 0) {
      error = "another conduitd is already serving " + path;
      return -EADDRINUSE;
    }
    ::unlink(path.c_str());
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (::bind(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int e = errno;
    error = "bind " + path + ": " + errno_str(e);
    return -e;
  }
  if (!config_.socket_group.empty()) {
    // A name first, then a number, as chown(1) reads a group.
    const std::string& name = config_.socket_group;
    std::optional<gid_t> gid;
    if (const group* gr = ::getgrnam(name.c_str())) {
      gid = gr->gr_gid;
    } else if (name.size() <= 10 &&
               std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      const unsigned long long n = std::stoull(name);
      if (n < static_cast<gid_t>(-1)) gid = static_cast<gid_t>(n);
    }
    if (!gid) {
      error = "socket group '" + name + "' does not exist (create it with " +
              "groupadd, or change daemon.socket_group in the policy)";
      ::unlink(path.c_str());
      return -ENOENT;
    }
    if (::chown(path.c_str(), static_cast<uid_t>(-1), *gid) != 0) {
      int e = errno;
      error = "chown " + path + " to group " + config_.socket_group + ": " + errno_str(e);
      ::unlink(path.c_str());
      return -e;
    }
  }
  if (::chmod(path.c_str(), config_.socket_mode) != 0) {
    int e = errno;
    error = "chmod " + path + ": " + errno_str(e);
    ::unlink(path.c_str());
    return -e;
  }
  if (::listen(s.get(), 64) != 0) {
    int e = errno;
    error = "listen " + path + ": " + errno_str(e);
    ::unlink(path.c_str());
    return -e;
  }
  Impl& im = *impl_;
  if (config_.metrics) {
    im.metrics = std::make_unique<MetricsServer>(im.io, [&im] { return im.metrics_page(); });
    if (int rc = im.metrics->start(config_.metrics_ip, config_.metrics_port, error); rc < 0) {
      im.metrics.reset();
      ::unlink(path.c_str());
      return rc;
    }
    metrics_port_.store(im.metrics->port(), std::memory_order_relaxed);
  }
  im.listener.assign(s.release());
  if (im.engine != nullptr) im.engine_wake.assign(im.engine->control_wake_fd());
  im.accept_loop();
  im.engine_loop();
  im.tick();
  thread_ = std::thread([&im] {
    try {
      im.io.run();
    } catch (const std::exception& e) {
      spdlog::critical("control thread stopped: {}", e.what());
    }
  });
  spdlog::info("control: listening on {} (mode {:o}{}{})", path, config_.socket_mode,
               config_.socket_group.empty() ? "" : ", group ", config_.socket_group);
  if (im.metrics) {
    spdlog::info("metrics: Prometheus endpoint on http://{}:{}/metrics",
                 asio::ip::address_v4(config_.metrics_ip).to_string(), im.metrics->port());
  }
  return 0;
}

void ControlServer::update(const ServerConfig& access, const ControlLimits& limits) {
  auto apply = [this, access, limits] {
    // The socket itself (path, mode, group) is bound at start; only the
    // per-connection checks change.
    config_.allowed_uids = access.allowed_uids;
    config_.allowed_gids = access.allowed_gids;
    config_.metrics_max_qps = access.metrics_max_qps;
    impl_->service.set_limits(limits);
  };
  // A reload runs on the control thread (the kPolicyReload hook, or main's SIGHUP task
  // posted there): apply now, before the reload's reply and before the next request of
  // the same read burst. Posting it let a request queued behind the reload on the same
  // connection be answered with the old limits after the reload had returned.
  if (impl_->io.get_executor().running_in_this_thread()) {
    apply();
  } else {
    post(std::move(apply));
  }
}

int ControlServer::set_engine_policy(std::shared_ptr<engine::PolicyUpdate> policy,
                                     const std::vector<std::string>& class_names,
                                     uint32_t timeout_ms, std::string& why,
                                     std::function<void()> late_applied) {
  if (!impl_->io.get_executor().running_in_this_thread()) {
    why = "not on the control thread";
    return -EWOULDBLOCK;
  }
  return impl_->service.set_engine_policy(std::move(policy), class_names, timeout_ms, why,
                                          std::move(late_applied));
}

void ControlServer::post(std::function<void()> fn) { asio::post(impl_->io, std::move(fn)); }

void ControlServer::watch_kernel_frames(int fd) {
  Impl& im = *impl_;
  asio::post(im.io, [&im, fd] {
    if (im.stopping) {
      ::close(fd);
      return;
    }
    boost::system::error_code ec;
    im.kernel_tap.assign(fd, ec);
    if (ec) {
      spdlog::warn("control: cannot watch descriptor {}: {}", fd, ec.message());
      ::close(fd);
      return;
    }
    im.kernel_tap_loop();
  });
}

void ControlServer::stop() {
  if (!thread_.joinable()) return;
  Impl& im = *impl_;
  asio::post(im.io, [&im] {
    im.shutdown();
    im.io.stop();
  });
  thread_.join();
  ::unlink(config_.socket_path.c_str());
}

}  // namespace conduit::control
