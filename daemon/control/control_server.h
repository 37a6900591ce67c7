// conduitd's control socket: a Unix SOCK_SEQPACKET server on its own thread
// (Boost.Asio), one ControlService behind it.
//
// Each accepted connection is checked with SO_PEERCRED against the allowed
// uids/gids; a refused peer gets -EACCES with the reason in reply to its first
// request, then the connection is closed. A connection that hangs up (exit,
// crash, SIGKILL) is released at once: its QPs go to ERROR through the engine
// command ring and its region is unmapped when the engine acks.
//
// Thread roles: start()/stop()/post() from any one thread (main); everything
// else runs on the control thread. clients()/qps() are safe from any thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "control/control_service.h"

namespace conduit::control {

struct ServerConfig {
  std::string socket_path = "/run/conduit/conduitd.sock";
  mode_t socket_mode = 0660;
  std::string socket_group;  // group name or number owning the socket; empty: the daemon's group
  // Who may use the daemon, by SO_PEERCRED. Root and the daemon's own uid are
  // always allowed. When both lists are empty, anyone who can open the socket
  // (mode and group above) may.
  std::vector<uid_t> allowed_uids;
  std::vector<gid_t> allowed_gids;  // the peer's primary group or a supplementary one
  // The Prometheus endpoint (control/metrics_server.h), on the control thread.
  bool metrics = false;
  uint32_t metrics_ip = 0;  // host byte order
  uint16_t metrics_port = 0;
  // QPs with per-QP series on the page (daemon.metrics_max_qps; applied on reload).
  size_t metrics_max_qps = SIZE_MAX;
};

class ControlServer {
 public:
  ControlServer(ServerConfig config, ControlLimits limits, ServiceHooks hooks,
                EngineChannel* engine);
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Creates the socket (replacing a stale one), applies mode and group, and
  // starts the control thread. 0, or a negative errno with `error` saying what
  // to fix.
  int start(std::string& error);
  // Stops accepting, releases every client, joins the thread. Each connection closes once
  // the engine acked its client's release (its QPs' flush completions are in the client's
  // CQ ring), within ControlService::kStopBacklogMs in all. Idempotent.
  void stop();
  // Policy reload: new access lists and limits for connections and attaches
  // from now on. On the control thread (where reloads run) they apply before
  // update() returns, so the reload's reply and every later request see them;
  // from another thread they are posted to the control thread.
  void update(const ServerConfig& access, const ControlLimits& limits);
  // Policy reload, on the control thread only (-EWOULDBLOCK elsewhere): the
  // engine's new classes, CNP settings and QP defaults
  // (ControlService::set_engine_policy).
  int set_engine_policy(std::shared_ptr<engine::PolicyUpdate> policy,
                        const std::vector<std::string>& class_names, uint32_t timeout_ms,
                        std::string& why, std::function<void()> late_applied = {});
  // Runs fn on the control thread.
  void post(std::function<void()> fn);
  // Reads the frames of `fd` (a packet socket: open_router_advert_tap) on the control
  // thread and hands each to the engine's network stack (ControlService::kernel_frame).
  // Takes the descriptor; closed at stop(). Call after start().
  void watch_kernel_frames(int fd);

  uint32_t clients() const { return clients_.load(std::memory_order_relaxed); }
  uint32_t qps() const { return qps_.load(std::memory_order_relaxed); }
  const std::string& socket_path() const { return config_.socket_path; }
  // The metrics endpoint's TCP port once start() bound it (0: off).
  uint16_t metrics_port() const { return metrics_port_.load(std::memory_order_relaxed); }

 private:
  struct Impl;
  ServerConfig config_;
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
  std::atomic<uint32_t> clients_{0};
  std::atomic<uint32_t> qps_{0};
  std::atomic<uint16_t> metrics_port_{0};
};

// Whether a peer may connect, and if not, why (for the -EACCES reply).
bool peer_allowed(const ServerConfig& config, uid_t uid, gid_t gid,
                  const std::vector<gid_t>& supplementary, std::string& why);

}  // namespace conduit::control
