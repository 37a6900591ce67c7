// conduitd: the per-host transport daemon's process shell.
//
// Loads the policy, starts the control plane (control/ on its own thread),
// tells systemd it is ready, then waits for signals on the main thread:
// SIGTERM/SIGINT stop cleanly, SIGHUP reloads the policy (an invalid file is
// reported and the running policy stays). The main thread also pings the
// systemd watchdog, but only while the control thread still answers and the
// engine loop still advances (telemetry/watchdog_gate.h).
//
// The engine (daemon/engine) runs on its own thread: DPDK EAL and the port
// named in the policy are brought up before the control socket opens, so a
// port problem stops the daemon with a clear message before clients come.
#include <net/if.h>
#include <pthread.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <sched.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "control/control_server.h"
#include "control/kernel_frame_tap.h"
#include "dpdk/dpdk_error.h"
#include "dpdk/eal.h"
#include "dpdk/port.h"
#include "dpdk/xdp_steer.h"
#include "engine/engine.h"
#include "engine/engine_config.h"
#include "policy/address.h"
#include "policy/loader.h"
#include "policy/policy_diff.h"
#include "policy/policy_dump.h"
#include "policy/policy_warnings.h"
#include "policy/units.h"
#include "telemetry/sd_notifier.h"
#include "telemetry/watchdog_gate.h"

#ifndef CONDUIT_VERSION
#define CONDUIT_VERSION "unknown"
#endif

namespace {

using conduit::control::ControlLimits;
using conduit::control::ControlServer;
using conduit::control::ServerConfig;
using conduit::policy::Policy;

constexpr const char* kDefaultConfig = "/etc/conduit/conduitd.yaml";
// How long a memif port stays open after the engine stopped (see run()).
constexpr int kMemifCloseGraceMs = 250;

void print_help() {
  std::printf(
      "conduitd %s - kernel-bypass RoCEv2 transport daemon for AI-training clusters\n"
      "\n"
      "One conduitd runs per host. Training processes link libconduit and talk to it\n"
      "over a Unix socket (daemon.control_socket in the policy) and shared memory.\n"
      "\n"
      "Usage:\n"
      "  conduitd [--config FILE]      run with the policy in FILE\n"
      "                                (default %s)\n"
      "  conduitd --check-config FILE  validate FILE, print every problem with\n"
      "                                file:line:column, exit 0 if it is valid\n"
      "  conduitd --version            print the version\n"
      "  conduitd --help               this text\n"
      "\n"
      "Signals:\n"
      "  SIGTERM, SIGINT  stop accepting clients, release every client, exit 0\n"
      "  SIGHUP           reload the policy file; an invalid file is reported and\n"
      "                   the running policy stays (also: conduitctl policy reload).\n"
      "                   Traffic classes, CNP settings and transport defaults go\n"
      "                   to the running engine and its QPs; port, lcores and\n"
      "                   sockets wait for a restart (the reply names them)\n"
      "\n"
      "Under systemd (config/conduitd.service, Type=notify) it reports READY, STATUS\n"
      "and watchdog pings. Inspect a running daemon with 'conduitctl status',\n"
      "'conduitctl qps' and 'conduitctl stats'; with daemon.metrics_address set\n"
      "(e.g. 127.0.0.1:9464) Prometheus scrapes the same numbers at /metrics.\n"
      "\n"
      "The port (policy port.device, a PCI address or a DPDK vdev string such as\n"
      "net_af_packet0,iface=eth1) is driven by DPDK in poll mode from one engine\n"
      "thread; EAL arguments come from port.eal_args (e.g. --no-huge -m 512 where\n"
      "there are no hugepages). Congestion control paces every QP to at most the\n"
      "line rate: the speed the port reports, or port.line_rate (set it on a veth,\n"
      "which always reports 10 Gbit/s). RoCEv2 runs over IPv4 from port.address\n"
      "and, with port.address6 set, over IPv6: a QP's peer GID decides (an\n"
      "IPv4-mapped ::ffff:a.b.c.d GID is IPv4). config/POLICY.md documents every key.\n",
      CONDUIT_VERSION, kDefaultConfig);
}

spdlog::level::level_enum to_spdlog(conduit::policy::LogLevel l) {
  using L = conduit::policy::LogLevel;
  switch (l) {
    case L::kTrace:
      return spdlog::level::trace;
    case L::kDebug:
      return spdlog::level::debug;
    case L::kInfo:
      return spdlog::level::info;
    case L::kWarn:
      return spdlog::level::warn;
    case L::kError:
      return spdlog::level::err;
    case L::kCritical:
      return spdlog::level::critical;
    case L::kOff:
      return spdlog::level::off;
  }
  return spdlog::level::info;
}

ServerConfig server_config(const Policy& p) {
  ServerConfig c;
  c.socket_path = p.daemon.control_socket;
  c.socket_group = p.daemon.socket_group;
  c.socket_mode = 0660;
  c.allowed_uids.assign(p.clients.allowed_uids.begin(), p.clients.allowed_uids.end());
  c.allowed_gids.assign(p.clients.allowed_gids.begin(), p.clients.allowed_gids.end());
  if (p.daemon.metrics) {
    c.metrics = true;
    c.metrics_ip = p.daemon.metrics->ip.value;
    c.metrics_port = p.daemon.metrics->port;
  }
  c.metrics_max_qps = p.daemon.metrics_max_qps;
  return c;
}

static_assert(conduit::policy::kMaxQpsPerClient == CONDUIT_SHM_MAX_QPS &&
                  conduit::policy::kMaxCqsPerClient == CONDUIT_SHM_MAX_CQS,
              "the policy's quota ranges must match the client area's slots");
static_assert(conduit::policy::kSendWrBytes == sizeof(conduit_shm_send_wr) &&
                  conduit::policy::kRecvWrBytes == sizeof(conduit_shm_recv_wr) &&
                  conduit::policy::kCqeBytes == sizeof(conduit_shm_cqe) &&
                  conduit::policy::kMaxCqeDepth <= CONDUIT_SHM_MAX_RING_DEPTH &&
                  conduit::policy::kMaxWrDepth <= CONDUIT_SHM_MAX_RING_DEPTH,
              "the policy's ring sizes must match the client area's entries");

ControlLimits control_limits(const Policy& p) {
  const auto& q = p.clients.quotas;
  ControlLimits l;
  l.max_qps = q.max_qps;
  l.max_cqs = q.max_cqs;
  l.max_mrs = q.max_mrs;
  l.sq_depth = q.max_send_wr;
  l.rq_depth = q.max_recv_wr;
  l.cq_depth = q.max_cqe;
  l.max_mr_bytes = q.max_registered_bytes;
  // A client's shared area holds all the memory it can register; one region of it
  // is at most max_region_size.
  l.max_arena_bytes = q.max_registered_bytes;
  l.max_mr_length = q.max_region_bytes;
  l.default_region_bytes = std::min<uint64_t>(64ull << 20, q.max_registered_bytes);
  for (const auto& n : p.clients.allowed_peers) {
    l.cm_allowed_peers.push_back({n.network.value, conduit::policy::prefix_mask(n.length)});
  }
  for (const auto& n : p.clients.allowed_peers6) {
    l.cm_allowed_peers6.push_back({n.network.bytes, n.length});
  }
  return l;
}

// The policy the daemon runs with. Touched only on the control thread after
// start-up (hooks and SIGHUP reloads are posted there).
struct PolicyState {
  std::string path;
  std::shared_ptr<const Policy> running;
  // The policy conduitd started with: the port, the lcores and the sockets stay
  // these until a restart (restart_required_changes; each reload reports every
  // such key that differs).
  std::shared_ptr<const Policy> started;
  // The policy whose traffic classes, CNP settings and transport defaults the
  // engine runs: the last one it took (a reload the engine refused leaves the one
  // before; one it answered only after the wait becomes it when the answer comes).
  std::shared_ptr<const Policy> engine_policy;
  ControlServer* server = nullptr;
  conduit::engine::Engine* engine = nullptr;

  // 0, or -EINVAL with every problem in `message`.
  int reload(std::string& message) {
    auto r = conduit::policy::load_policy_file(path);
    if (!r.ok()) {
      message = "policy " + path + (r.unreadable ? " cannot be read" : " is invalid") +
                "; the running policy stays:\n" + r.error_text();
      while (!message.empty() && message.back() == '\n') message.pop_back();
      spdlog::error("{}", message);
      return -EINVAL;
    }
    auto next = std::make_shared<const Policy>(std::move(*r.policy));
    for (const auto& w : conduit::policy::policy_warnings(*next)) spdlog::warn("{}: {}", path, w);
    const auto restart = conduit::policy::restart_required_changes(*started, *next);
    // The engine's sections first: the one part that can refuse a valid file (it does not
    // fit the running port, or the engine finds it invalid). Then nothing else changes.
    std::string engine_note;
    const int erc = update_engine(next, engine_note);
    if (erc < 0 && erc != -ETIMEDOUT) {
      message = "policy " + path + " is not applied: " + engine_note + "; the running policy stays";
      spdlog::error("{}", message);
      return erc;
    }
    running = next;
    spdlog::set_level(to_spdlog(running->daemon.log_level));
    if (server != nullptr) server->update(server_config(*running), control_limits(*running));
    if (engine != nullptr) {
      engine->set_idle_mode(conduit::engine::idle_mode_from_policy(running->daemon.idle_mode));
    }
    message = "policy reloaded from " + path + engine_note;
    if (!restart.empty()) {
      message += "; these changes take effect after a restart:";
      for (const auto& k : restart) message += " " + k;
    }
    if (erc == 0) {
      spdlog::info("{}", message);
    } else {
      spdlog::warn("{}", message);
    }
    return 0;
  }

  // Gives the engine next's classes, CNP settings and transport defaults if they differ
  // from what it runs. 0 (taken, or nothing to take; `note` says which QPs took them),
  // -ETIMEDOUT (sent, not answered: the engine takes them when it runs again; `note` says
  // so), or another error: nothing was changed (`note` says why).
  int update_engine(const std::shared_ptr<const Policy>& next_policy, std::string& note) {
    const Policy& next = *next_policy;
    // A copy: a late ack of an earlier update (handled while this one waits) replaces
    // engine_policy.
    const std::shared_ptr<const Policy> was_policy = engine_policy;
    const Policy& was = *was_policy;
    if (engine == nullptr || server == nullptr ||
        (was.traffic_classes == next.traffic_classes && was.cnp == next.cnp &&
         was.transport == next.transport)) {
      return 0;
    }
    // The loader checked transport.pmtu against the file's port.mtu; the port runs with
    // the MTU it started with until a restart.
    const uint32_t overhead = started->port.address6 ? conduit::policy::kRoceOverheadBytes6
                                                     : conduit::policy::kRoceOverheadBytes;
    if (next.transport.pmtu_bytes + overhead > started->port.mtu_bytes) {
      note = "transport.pmtu " + std::to_string(next.transport.pmtu_bytes) +
             " does not fit the running port.mtu " + std::to_string(started->port.mtu_bytes) +
             " (port.mtu changes take effect after a restart)";
      return -EINVAL;
    }
    auto update = std::make_shared<conduit::engine::PolicyUpdate>(
        conduit::engine::engine_policy_update(next));
    std::vector<std::string> names;
    for (const auto& tc : next.traffic_classes) names.push_back(tc.name);
    std::string why;
    // If the engine answers only after the wait, the daemon takes next as what the engine
    // runs then (its classes become usable for new QPs).
    auto late_applied = [this, next_policy] {
      engine_policy = next_policy;
      spdlog::info("the engine runs the reloaded traffic_classes, cnp and transport now");
    };
    const int rc = server->set_engine_policy(update, names, kEngineUpdateWaitMs, why, late_applied);
    if (rc == -ETIMEDOUT) {
      note = "; traffic_classes, cnp and transport are NOT applied yet (" + why +
             "): the engine runs the earlier ones until then";
      return rc;
    }
    if (rc < 0) {
      note = "traffic_classes, cnp and transport: " + why;
      return rc;
    }
    engine_policy = next_policy;
    note = "; traffic_classes, cnp and transport applied (" + std::to_string(update->qps) +
           " QP(s) took the new classes";
    if (update->qps_to_default != 0) {
      note += ", " + std::to_string(update->qps_to_default) +
              " of them moved to the default class '" + next.default_class().name +
              "' because theirs is gone";
    }
    if (update->qps_new_controller != 0) {
      note += ", " + std::to_string(update->qps_new_controller) +
              " changed congestion control algorithm (their rate starts afresh)";
    }
    note += "; transport defaults apply to QPs created from now on)";
    return 0;
  }
  static constexpr uint32_t kEngineUpdateWaitMs = 2000;
};

int check_config(const std::string& path) {
  auto r = conduit::policy::load_policy_file(path);
  if (!r.ok()) {
    std::fprintf(stderr, "%s", r.error_text().c_str());
    return 1;
  }
  std::printf("%s: OK (%zu traffic class%s)\n", path.c_str(), r.policy->traffic_classes.size(),
              r.policy->traffic_classes.size() == 1 ? "" : "es");
  // Valid, but not all carried out: said, without failing the check.
  for (const auto& w : conduit::policy::policy_warnings(*r.policy)) {
    std::printf("%s: warning: %s\n", path.c_str(), w.c_str());
  }
  return 0;
}

std::string status_line(const ControlServer& s) {
  return "STATUS=" + std::to_string(s.clients()) + " client(s), " + std::to_string(s.qps()) +
         " QP(s)";
}

int run(const std::string& config_path) {
  auto loaded = conduit::policy::load_policy_file(config_path);
  if (!loaded.ok()) {
    std::fprintf(stderr, "conduitd: cannot start, the policy %s:\n%s",
                 loaded.unreadable ? "file cannot be read" : "is invalid",
                 loaded.error_text().c_str());
    return 1;
  }
  PolicyState state;
  state.path = config_path;
  state.running = std::make_shared<const Policy>(std::move(*loaded.policy));
  state.started = state.running;
  state.engine_policy = state.running;
  spdlog::set_level(to_spdlog(state.running->daemon.log_level));
  for (const auto& w : conduit::policy::policy_warnings(*state.running)) {
    spdlog::warn("{}: {}", config_path, w);
  }

  // Signals are taken synchronously by the main thread only: block them
  // before any thread starts, so every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // Writes to a client's descriptors must not kill the daemon: a pipe or socket whose
  // reader is gone gives EPIPE, not SIGPIPE (every thread inherits this).
  signal(SIGPIPE, SIG_IGN);

  conduit::control::ServiceHooks hooks;
  hooks.version = CONDUIT_VERSION;
  hooks.policy_path = config_path;
  hooks.policy_text = [&state] { return conduit::policy::to_yaml(*state.running); };
  hooks.reload_policy = [&state](std::string& message) { return state.reload(message); };
  // The engine's classes, not the file's: a class of a reload the engine has not taken
  // does not exist there (the QP would silently get the default class).
  hooks.class_exists = [&state](const std::string& name) {
    return state.engine_policy->find_class(name) != nullptr;
  };
  hooks.default_class = [&state] { return state.engine_policy->default_class().name; };
  // Data plane first: EAL, the port, the engine and its command channel.
  std::unique_ptr<conduit::dpdk::Eal> eal;
  std::unique_ptr<conduit::dpdk::Port> port;
  std::unique_ptr<conduit::control::EngineChannel> channel;
  std::unique_ptr<conduit::engine::Engine> engine;
  cpu_set_t engine_cpus;  // the main lcore's, as rte_eal_init pinned this thread
  bool have_engine_cpus = true;
  int ra_tap_fd = -1;  // af_xdp with address6: the kernel's Router Advertisements, for the engine
  try {
    const Policy& p = *state.running;
    // rte_eal_init pins the calling thread to the main lcore, and every thread started
    // from it after that inherits the pin: the control thread shared the engine's core
    // (a polling engine keeps it busy) with whatever else is pinned there, while other
    // CPUs could run it. Only the engine belongs on the lcore; main and the control
    // thread keep the CPUs conduitd was started with (unit-conduitd-affinity).
    cpu_set_t start_cpus;
    const bool have_start_cpus =
        pthread_getaffinity_np(pthread_self(), sizeof(start_cpus), &start_cpus) == 0;
    eal = std::make_unique<conduit::dpdk::Eal>(conduit::policy::eal_arguments(p));
    if (pthread_getaffinity_np(pthread_self(), sizeof(engine_cpus), &engine_cpus) != 0) {
      have_engine_cpus = false;
    }
    if (have_start_cpus && have_engine_cpus) {
      if (int rc = pthread_setaffinity_np(pthread_self(), sizeof(start_cpus), &start_cpus);
          rc != 0) {
        spdlog::warn("cannot unpin the control thread from the engine's lcore: {}", strerror(rc));
      }
    }
    conduit::dpdk::PortConfig pc;
    pc.device = p.port.device;
    pc.mtu_bytes = static_cast<uint16_t>(p.port.mtu_bytes);
    pc.rx_ring_size = static_cast<uint16_t>(p.port.rx_descriptors);
    pc.tx_ring_size = static_cast<uint16_t>(p.port.tx_descriptors);
    pc.mbuf_count = p.port.mbufs;
    pc.xdp_program = conduit::dpdk::find_xdp_steer_program();
    pc.xdp_steer_ipv4 = p.port.address.value;
    if (p.port.address6) pc.xdp_steer_ipv6 = p.port.address6->bytes;
    pc.xdp_steer_vlan = p.port.vlan;
    port = std::make_unique<conduit::dpdk::Port>(pc);
    if (int rc = conduit::control::EngineChannel::create(1024, &channel); rc < 0) {
      spdlog::critical("cannot create the engine command channel: {}", strerror(-rc));
      return 1;
    }
    conduit::net::MacAddr mac;
    std::memcpy(mac.bytes.data(), port->mac().addr_bytes, 6);
    if (mac.is_zero()) {
      // Some vdevs (net_ring, net_null) have no MAC: use a locally
      // administered one derived from our address, stable across restarts.
      const uint32_t a = p.port.address.value;
      mac = conduit::net::MacAddr{{0x02, 0x00, static_cast<uint8_t>(a >> 24),
                                   static_cast<uint8_t>(a >> 16), static_cast<uint8_t>(a >> 8),
                                   static_cast<uint8_t>(a)}};
      spdlog::warn("port {} has no MAC address; using {}", port->name(), mac.to_string());
    }
    const auto link = port->wait_for_link(2000);
    auto engine_config =
        conduit::engine::engine_config_from_policy(p, mac, uint64_t{link.speed_mbps} * 1'000'000);
    const uint64_t line_rate_bps = engine_config.line_rate_bps;
    engine = std::make_unique<conduit::engine::Engine>(std::move(engine_config), *port, *channel);
    // Both families' addresses as "a.b.c.d/len" and, with port.address6, ", IPV6/len".
    const std::string addresses =
        conduit::net::Ipv4Addr{p.port.address.value}.to_string() + "/" +
        std::to_string(p.port.prefix_len) +
        (p.port.address6 ? ", " + conduit::policy::format_ipv6(*p.port.address6) + "/" +
                               std::to_string(p.port.prefix_len6)
                         : std::string());
    spdlog::info("port {} ({}) mac {} link {} {} Mb/s, address {}{}", port->name(), port->driver(),
                 mac.to_string(), link.up ? "up" : "down", link.speed_mbps, addresses,
                 p.port.vlan ? ", VLAN " + std::to_string(*p.port.vlan) +
                                   " (802.1Q tags, PCP from each traffic class's priority)"
                             : std::string());
    // The driver may round the ring sizes (rte_eth_dev_adjust_nb_rx_tx_desc).
    spdlog::info("port {}: RX ring {} descriptors, TX ring {} (policy: {} / {}), {} mbufs",
                 port->name(), port->rx_ring_size(), port->tx_ring_size(), p.port.rx_descriptors,
                 p.port.tx_descriptors, p.port.mbufs);
    spdlog::info("line rate {} ({}): congestion control starts each QP there and never exceeds it",
                 conduit::policy::format_rate(line_rate_bps),
                 p.port.line_rate_bps ? "port.line_rate"
                 : link.speed_mbps != 0
                     ? "the port's reported speed; port.line_rate overrides it"
                     : "the port reports no speed, 10 Gbit/s assumed; port.line_rate overrides it");
    if (!port->kernel_interface().empty()) {
      spdlog::info("port {}: kernel interface {}, driver {}", port->name(),
                   port->kernel_interface(),
                   port->kernel_driver().empty() ? "unknown" : port->kernel_driver());
    }
    if (port->kernel_driver() == "veth" && !p.port.line_rate_bps) {
      // veth_get_link_ksettings: always 10000 Mb/s.
      spdlog::warn(
          "port {}: {} is a veth, whose {} Mb/s is nominal (it carries what the CPUs manage); "
          "every QP is paced to at most that line rate: set port.line_rate to lift it",
          port->name(), port->kernel_interface(), link.speed_mbps);
    }
    spdlog::info("port {}: {}", port->name(),
                 port->rx_wait_fds().empty()
                     ? "no RX wake-up: an idle engine polls it on a timer"
                     : "its kernel socket wakes an idle engine when a frame arrives");
    if (port->driver() == "net_af_xdp") {
      if (!port->xdp_program().empty()) {
        spdlog::info(
            "port {}: XDP program {} hands conduitd the frames for {} (IPv4 and ARP{}); "
            "the kernel keeps the rest of the interface's traffic",
            port->name(), port->xdp_program(), addresses,
            p.port.address6 ? "; IPv6 and its Neighbor Solicitations" : "");
        if (p.port.address6 && !port->kernel_interface().empty()) {
          // The program leaves Router Advertisements to the kernel; conduitd reads copies.
          std::string why = "no such interface";
          const unsigned ifindex = if_nametoindex(port->kernel_interface().c_str());
          ra_tap_fd = ifindex == 0 ? -ENODEV
                                   : conduit::control::open_router_advert_tap(
                                         static_cast<int>(ifindex), p.port.vlan, why);
          if (ra_tap_fd >= 0) {
            spdlog::info(
                "port {}: conduitd reads the Router Advertisements the kernel receives on {} "
                "(a packet socket): routers, on-link prefixes and the link MTU",
                port->name(), port->kernel_interface());
          } else {
            spdlog::warn(
                "port {}: cannot read the Router Advertisements the kernel receives on {} "
                "({}): IPv6 peers off-link need port.gateway6",
                port->name(), port->kernel_interface(), why);
          }
        }
      } else {
        spdlog::warn(
            "port {}: DPDK's default XDP program takes every frame of the queue: the "
            "kernel stack no longer receives on that queue (no steering program: "
            "set CONDUIT_XDP_PROGRAM, or build with clang and libbpf)",
            port->name());
      }
    }
    // conduitctl status: what the engine drives (fixed until a restart) and how it idles now.
    std::string port_line = "port " + port->name() + " (" + port->driver() + "), " + addresses +
                            ", mac " + mac.to_string() + ", mtu " +
                            std::to_string(p.port.mtu_bytes) + ", line rate " +
                            conduit::policy::format_rate(line_rate_bps) +
                            (p.port.line_rate_bps   ? " (port.line_rate)"
                             : link.speed_mbps != 0 ? " (the port's speed)"
                                                    : " (assumed: the port reports no speed)");
    const std::string lcore =
        p.daemon.lcores.empty() ? "" : " on lcore " + std::to_string(p.daemon.lcores.front());
    hooks.engine_state = [&state, port_line = std::move(port_line), lcore, &port] {
      const auto link = port->link();
      return "running" + lcore + ", idle_mode " +
             (state.running->daemon.idle_mode == conduit::policy::IdleMode::kSpin ? "spin"
                                                                                  : "adaptive") +
             "; " + port_line + ", link " + (link.up ? "up " : "down ") +
             std::to_string(link.speed_mbps) + " Mb/s";
    };
  } catch (const std::exception& e) {
    spdlog::critical("cannot start the data plane: {}", e.what());
    return 1;
  }
  std::thread engine_thread([&engine, engine_cpus, have_engine_cpus] {
    pthread_setname_np(pthread_self(), "conduit-engine");  // for top -H, gdb and tests
    // The engine runs on the lcore the policy names (daemon.lcores); pinned before
    // rte_thread_register, which records the thread's CPU set.
    if (have_engine_cpus) {
      if (int rc = pthread_setaffinity_np(pthread_self(), sizeof(engine_cpus), &engine_cpus);
          rc != 0) {
        spdlog::warn("engine thread: cannot pin it to its lcore: {}", strerror(rc));
      }
    }
    // An lcore id gives this thread the mempools' per-lcore caches: without one every
    // mbuf alloc and free (ours and the PMD's) went to the pool's shared ring, 10 % of
    // the sending engine's time in a profile of 8 MiB WRITEs over af_xdp.
    if (rte_thread_register() != 0) {
      spdlog::warn("engine thread: no lcore id ({}): mbufs come without a per-thread cache",
                   rte_strerror(rte_errno));
    }
    engine->run();
    rte_thread_unregister();
  });

  ControlServer server(server_config(*state.running), control_limits(*state.running), hooks,
                       channel.get());
  state.server = &server;
  state.engine = engine.get();
  std::string error;
  if (int rc = server.start(error); rc < 0) {
    spdlog::critical("cannot start the control plane: {}", error);
    engine->stop();
    engine_thread.join();
    return 1;
  }
  if (ra_tap_fd >= 0) server.watch_kernel_frames(ra_tap_fd);

  conduit::telemetry::SdNotifier notifier;
  notifier.notify("READY=1\n" + status_line(server));
  spdlog::info("conduitd {} ready (policy {})", CONDUIT_VERSION, config_path);

  // Wake at least twice per watchdog interval, and every second for STATUS.
  const uint64_t wd_us = notifier.watchdog_interval_us();
  const uint64_t tick_us = wd_us > 0 ? std::min<uint64_t>(wd_us / 2, 1'000'000) : 1'000'000;
  std::atomic<uint64_t> heartbeat{0};
  uint64_t heartbeat_sent = 0;
  conduit::telemetry::WatchdogGate watchdog(engine->heartbeat());
  auto last_stall = conduit::telemetry::WatchdogGate::Stall::kNone;
  std::string last_status;
  for (;;) {
    timespec ts{static_cast<time_t>(tick_us / 1'000'000),
                static_cast<long>((tick_us % 1'000'000) * 1000)};
    const int sig = sigtimedwait(&signals, nullptr, &ts);
    if (sig == SIGTERM || sig == SIGINT) {
      spdlog::info("{} received: stopping", strsignal(sig));
      notifier.notify("STOPPING=1\nSTATUS=stopping");
      break;
    }
    if (sig == SIGHUP) {
      notifier.notify("RELOADING=1\nSTATUS=reloading policy");
      std::atomic<bool> done{false};
      server.post([&] {
        std::string message;
        state.reload(message);
        done = true;
        done.notify_one();
      });
      done.wait(false);
      notifier.notify("READY=1\n" + status_line(server));
      continue;
    }
    // Watchdog: ping only if the control thread ran the last heartbeat task
    // and the engine loop advanced since the last ping.
    if (wd_us > 0) {
      if (watchdog.may_ping(heartbeat.load() == heartbeat_sent, engine->heartbeat())) {
        notifier.notify("WATCHDOG=1");
        ++heartbeat_sent;
        server.post([&heartbeat] { heartbeat.fetch_add(1); });
      }
      if (watchdog.stall() != last_stall) {
        if (watchdog.stall() != conduit::telemetry::WatchdogGate::Stall::kNone) {
          spdlog::warn("{} not progressing: withholding watchdog pings",
                       conduit::telemetry::stall_name(watchdog.stall()));
        } else {
          spdlog::info("watchdog pings resumed");
        }
        last_stall = watchdog.stall();
      }
    }
    std::string status = status_line(server);
    if (status != last_status) {
      notifier.notify(status);
      last_status = status;
    }
  }
  server.stop();
  engine->stop();
  engine_thread.join();
  if (port->driver() == "net_memif") {
    // DPDK's memif unmaps the shared rings on its interrupt thread when the peer closes,
    // without waiting for the peer's RX burst: a peer conduitd stopped at the same moment
    // must have stopped polling before this one closes the port (scripts/lib/conduitd.sh).
    spdlog::info("port {}: memif: closing in {} ms, once a peer stopping with us is idle",
                 port->name(), kMemifCloseGraceMs);
    std::this_thread::sleep_for(std::chrono::milliseconds(kMemifCloseGraceMs));
  }
  const auto& ec = engine->counters();
  spdlog::info(
      "engine: {} loops, {} sleeps ({} woken by the port), RX {} frames in {} bursts, TX {} "
      "frames in {} bursts",
      ec.loops, ec.sleeps, ec.port_wakeups, ec.rx_frames, ec.rx_bursts, ec.tx_frames, ec.tx_bursts);
  uint64_t wire_drops = 0;
  for (uint64_t d : ec.rx_wire_drops) wire_drops += d;
  const auto ps = port->stats();
  spdlog::info(
      "engine drops: {} RX frames failed wire checks, {} for unknown QPs; TX {} without an mbuf, "
      "{} refused by the device; port: {} RX missed, {} RX without an mbuf, {} TX errors",
      wire_drops, ec.rx_unknown_qp, ec.tx_no_mbuf, ec.tx_ring_full_drops, ps.rx_missed,
      ps.rx_no_mbuf, ps.tx_errors);
  spdlog::info("conduitd stopped");
  return 0;
}

}  // namespace

int usage_error(const std::string& what) {
  std::fprintf(stderr, "conduitd: %s (see conduitd --help)\n", what.c_str());
  return 2;
}

int main(int argc, char** argv) {
  // Every argument is read before anything is done, so a mistake anywhere on the
  // line is reported instead of being ignored.
  std::optional<std::string> config;
  std::optional<std::string> check;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      print_help();
      return 0;
    }
    if (a == "--version") {
      std::printf("conduitd %s\n", CONDUIT_VERSION);
      return 0;
    }
    // --config FILE or --config=FILE, as conduitctl and conduit-perf take their options.
    const std::string name = a.substr(0, a.find('='));
    if (name == "--check-config" || name == "--config") {
      std::string file;
      if (name.size() < a.size()) {
        file = a.substr(name.size() + 1);
      } else if (i + 1 < argc) {
        file = argv[++i];
      }
      if (file.empty()) return usage_error(name + " needs a FILE");
      std::optional<std::string>& slot = name == "--config" ? config : check;
      if (slot) return usage_error(name + " is given twice");
      slot = file;
      continue;
    }
    if (a.starts_with("-")) return usage_error("unknown option '" + a + "'");
    return usage_error("unexpected argument '" + a + "'; the policy file goes after --config");
  }
  if (check && config) {
    return usage_error("--check-config FILE checks FILE and starts nothing; drop --config");
  }
  if (check) return check_config(*check);
  return run(config.value_or(kDefaultConfig));
}
