// Router Advertisements for an af_xdp port's network stack.
//
// conduit's XDP program (daemon/dpdk/xdp/conduit_steer.c) hands conduitd only the frames
// addressed to it and leaves the kernel the rest of the interface's traffic, the Router
// Advertisements that routers multicast to all nodes included: the kernel needs them for its
// own IPv6 on that interface, and XDP cannot give one frame to both. A packet socket on the
// interface sees what the kernel receives, so conduitd reads the advertisements from one and
// hands each to its engine (EngineOp::kKernelFrame, ControlServer::watch_kernel_frames), as
// if the port had received it. A classic BPF filter in the kernel keeps every other frame
// out of the socket. Untagged frames only.
//
// Daemon shell: Linux packet sockets. Thread role: any (start-up).
#pragma once

#include <string>

namespace conduit::control {

// A nonblocking, close-on-exec AF_PACKET socket bound to interface `ifindex` that receives
// the ICMPv6 Router Advertisements (type 134, straight after an IPv6 header without
// extension headers) the kernel receives there, as whole Ethernet frames; not the frames the
// host sends. The descriptor, or a negative errno with `error` saying what failed (it needs
// CAP_NET_RAW).
int open_router_advert_tap(int ifindex, std::string& error);

}  // namespace conduit::control
