// Steering for af_xdp ports: which XDP program DPDK attaches, and telling it
// conduitd's address once it is attached (xdp/conduit_steer.c). With it, the
// kernel stack keeps the interface for everything not addressed to conduitd
// (its own address, ARP, ping, ssh); DPDK's default program would take every
// frame of the queue. Thread role: start-up only.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace conduit::dpdk {

// The steering program to attach: $CONDUIT_XDP_PROGRAM when set, else the
// installed object, else the one in the build tree; empty when none exists
// (or conduitd was built without clang/libbpf).
std::string find_xdp_steer_program();

// device with ",xdp_prog=PROGRAM" appended when it is an af_xdp vdev string
// that names no program of its own and program is not empty.
std::string with_xdp_program(const std::string& device, const std::string& program);

// Writes conduitd's IPv4 address (host byte order), its IPv6 address when it
// has one, and its VLAN ID (none: untagged) into the conduit_cfg map of the
// XDP program attached to ifindex, which starts the steering. Returns an empty
// string, or what went wrong.
std::string configure_xdp_steering(int ifindex, uint32_t ipv4_host_order,
                                   const std::optional<std::array<uint8_t, 16>>& ipv6,
                                   std::optional<uint16_t> vlan);

}  // namespace conduit::dpdk
