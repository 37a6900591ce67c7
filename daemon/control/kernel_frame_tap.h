// Router Advertisements for an af_xdp port's network stack.
//
// conduit's XDP program (daemon/dpdk/xdp/conduit_steer.c) hands conduitd only the frames
// addressed to it and leaves the kernel the rest of the interface's traffic, the Router
// Advertisements that routers multicast to all nodes included: the kernel needs them for its
// own IPv6 on that interface, and XDP cannot give one frame to both. A packet socket on the
// interface sees what the kernel receives, so conduitd reads the advertisements from one and
// hands each to its engine (EngineOp::kKernelFrame, ControlServer::watch_kernel_frames), as
// if the port had received it. A classic BPF filter in the kernel keeps every other frame
// out of the socket, and those of other VLANs than the port's (port.vlan).
//
// Daemon shell: Linux packet sockets. Thread role: any (start-up; reads: the control thread).
#pragma once

#include <linux/filter.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace conduit::control {

// A nonblocking, close-on-exec AF_PACKET socket bound to interface `ifindex` that receives
// the ICMPv6 Router Advertisements (type 134, straight after an IPv6 header without
// extension headers) the kernel receives there on VLAN `vlan` (one 802.1Q tag with that VID;
// none: untagged or priority-tagged), as whole Ethernet frames; not the frames the host
// sends. The descriptor, or a negative errno with `error` saying what failed (it needs
// CAP_NET_RAW).
int open_router_advert_tap(int ifindex, std::optional<uint16_t> vlan, std::string& error);

// The classic BPF program open_router_advert_tap() attaches (for its tests).
std::vector<sock_filter> router_advert_filter(std::optional<uint16_t> vlan);

// One frame from a tap socket into `buf` as it was on the wire: the 802.1Q tag the kernel
// took out of it put back. Its length; more than buf.size() when it did not fit whole (then
// `buf` holds no usable frame); or a negative errno (-EAGAIN: none waiting).
ssize_t read_kernel_frame(int fd, std::span<uint8_t> buf);

}  // namespace conduit::control
