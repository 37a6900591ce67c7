#include "dpdk/xdp_steer.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#ifdef CONDUIT_HAVE_LIBBPF
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#endif

namespace conduit::dpdk {

namespace {

// Kernel object names keep 15 characters: keep map names shorter.
constexpr const char* kCfgMapName = "conduit_cfg";

// The layout of struct steer_cfg in xdp/conduit_steer.c.
struct SteerCfg {
  uint32_t ipv4_be;
  uint32_t enabled;
  std::array<uint8_t, 16> ipv6;
  uint32_t ipv6_enabled;
  uint32_t vlan;
};
static_assert(sizeof(SteerCfg) == 32);

bool exists(const std::string& path) {
  std::error_code ec;
  return !path.empty() && std::filesystem::is_regular_file(path, ec);
}

}  // namespace

std::string find_xdp_steer_program() {
  if (const char* env = std::getenv("CONDUIT_XDP_PROGRAM"); env != nullptr) return env;
#ifdef CONDUIT_HAVE_LIBBPF
  if (exists(CONDUIT_XDP_STEER_INSTALLED)) return CONDUIT_XDP_STEER_INSTALLED;
  if (exists(CONDUIT_XDP_STEER_BUILD)) return CONDUIT_XDP_STEER_BUILD;
#endif
  return {};
}

std::string with_xdp_program(const std::string& device, const std::string& program) {
  if (program.empty() || device.rfind("net_af_xdp", 0) != 0) return device;
  if (device.find("xdp_prog=") != std::string::npos) return device;
  if (device.find(',') == std::string::npos) return device;  // a port EAL probed: no arguments
  return device + ",xdp_prog=" + program;
}

std::string configure_xdp_steering(int ifindex, uint32_t ipv4_host_order,
                                   const std::optional<std::array<uint8_t, 16>>& ipv6,
                                   std::optional<uint16_t> vlan) {
#ifdef CONDUIT_HAVE_LIBBPF
  uint32_t prog_id = 0;
  if (int rc = bpf_xdp_query_id(ifindex, 0, &prog_id); rc != 0 || prog_id == 0) {
    return "no XDP program on interface " + std::to_string(ifindex) +
           (rc != 0 ? std::string(": ") + std::strerror(-rc) : std::string());
  }
  const int prog_fd = bpf_prog_get_fd_by_id(prog_id);
  if (prog_fd < 0) return std::string("cannot open the XDP program: ") + std::strerror(-prog_fd);
  std::vector<uint32_t> map_ids(16);
  bpf_prog_info info{};
  info.nr_map_ids = static_cast<uint32_t>(map_ids.size());
  info.map_ids = reinterpret_cast<uint64_t>(map_ids.data());
  uint32_t info_len = sizeof info;
  const int rc = bpf_obj_get_info_by_fd(prog_fd, &info, &info_len);
  close(prog_fd);
  if (rc != 0) return std::string("cannot read the XDP program's maps: ") + std::strerror(-rc);
  for (uint32_t i = 0; i < info.nr_map_ids && i < map_ids.size(); ++i) {
    const int map_fd = bpf_map_get_fd_by_id(map_ids[i]);
    if (map_fd < 0) continue;
    bpf_map_info minfo{};
    uint32_t mlen = sizeof minfo;
    if (bpf_obj_get_info_by_fd(map_fd, &minfo, &mlen) == 0 &&
        std::strncmp(minfo.name, kCfgMapName, sizeof minfo.name) == 0) {
      if (minfo.value_size != sizeof(SteerCfg)) {
        close(map_fd);
        return std::string(kCfgMapName) + " has values of " + std::to_string(minfo.value_size) +
               " bytes, expected " + std::to_string(sizeof(SteerCfg)) + " (a stale program?)";
      }
      const uint32_t key = 0;
      const SteerCfg cfg{htonl(ipv4_host_order), 1, ipv6.value_or(std::array<uint8_t, 16>{}),
                         ipv6 ? 1u : 0u, vlan.value_or(0)};
      const int urc = bpf_map_update_elem(map_fd, &key, &cfg, BPF_ANY);
      close(map_fd);
      if (urc != 0) return std::string("cannot write ") + kCfgMapName + ": " + std::strerror(-urc);
      return {};
    }
    close(map_fd);
  }
  return std::string("the attached XDP program has no map ") + kCfgMapName +
         " (not conduit's steering program)";
#else
  (void)ifindex;
  (void)ipv4_host_order;
  (void)ipv6;
  (void)vlan;
  return "conduitd was built without libbpf";
#endif
}

}  // namespace conduit::dpdk
