// SPDX-License-Identifier: GPL-2.0
// conduit_steer: the XDP program conduitd attaches with an af_xdp port (DPDK's xdp_prog=).
//
// DPDK's default program hands every frame of the queue to the AF_XDP socket, so the kernel
// stack of that interface goes deaf: no ARP, no ping, no ssh on that queue. This program hands
// the socket only what is conduitd's and passes the rest to the kernel:
//   - IPv4 frames to conduitd's address (RoCEv2, the connection manager, ICMP echo: all of it);
//   - ARP frames whose target protocol address is conduitd's address (requests for it, and the
//     replies to conduitd's own requests, which share the interface's MAC with the kernel);
//   - with an IPv6 address configured (port.address6): IPv6 frames to it (RoCEv2, ICMPv6 echo,
//     unicast Neighbor Solicitations and the Advertisements answering conduitd's), and the
//     multicast Neighbor Solicitations whose target is it (no extension headers in either).
// Only frames on conduitd's VLAN (port.vlan): one 802.1Q tag with that VID, or, on an untagged
// port, untagged or priority-tagged (VID 0) frames. Frames of other VLANs, 802.1ad and stacked
// tags go to the kernel (conduitd would drop them), as does everything until conduitd has
// written its address into conduit_cfg (right after the port starts).
//
// Maps: xsks_map (XSKMAP; DPDK puts its sockets there, key = RX queue), conduit_cfg
// (array, one struct steer_cfg; conduitd finds it by name on the attached program),
// conduit_stats (per-CPU counters, for debugging with bpftool).
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

struct steer_cfg {
  __u32 ipv4;          // conduitd's address, network byte order
  __u32 enabled;       // 0 until conduitd configured it: pass everything
  __u32 ipv6[4];       // conduitd's IPv6 address as on the wire
  __u32 ipv6_enabled;  // 0: no IPv6 address, every IPv6 frame goes to the kernel
  __u32 vlan;          // conduitd's 802.1Q VID (1..4094), 0: untagged
};

struct steer_stats {
  __u64 to_socket;  // frames redirected to conduitd
  __u64 to_kernel;  // frames passed to the kernel stack
};

struct {
  __uint(type, BPF_MAP_TYPE_XSKMAP);
  __uint(max_entries, 64);
  __type(key, __u32);
  __type(value, __u32);
} xsks_map SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct steer_cfg);
} conduit_cfg SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct steer_stats);
} conduit_stats SEC(".maps");

// ARP for IPv4 over Ethernet: the fixed header, then sender MAC/IP and target MAC/IP.
struct arp_eth_ipv4 {
  __be16 htype;
  __be16 ptype;
  __u8 hlen;
  __u8 plen;
  __be16 oper;
  __u8 sha[ETH_ALEN];
  __u8 spa[4];
  __u8 tha[ETH_ALEN];
  __u8 tpa[4];
} __attribute__((packed));

struct vlan_tag {
  __be16 tci;
  __be16 encapsulated_proto;
};

static __always_inline int verdict(struct xdp_md* ctx, int to_socket) {
  __u32 key = 0;
  struct steer_stats* st = bpf_map_lookup_elem(&conduit_stats, &key);
  if (!to_socket) {
    if (st) st->to_kernel++;
    return XDP_PASS;
  }
  if (st) st->to_socket++;
  return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
}

static __always_inline int ipv6_is(const __u32* a, const __u32* b) {
  return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3];
}

// An IPv6 frame is conduitd's when it is addressed to conduitd's IPv6 address, or is a Neighbor
// Solicitation (ICMPv6 135, straight after the IPv6 header) for that address.
static __always_inline int ipv6_for_us(const struct steer_cfg* cfg, struct ipv6hdr* ip,
                                       void* data_end) {
  if (ipv6_is(ip->daddr.in6_u.u6_addr32, cfg->ipv6)) return 1;
  if (ip->daddr.in6_u.u6_addr8[0] != 0xFF || ip->nexthdr != 58) return 0;
  __u8* icmp = (__u8*)(ip + 1);
  if ((void*)(icmp + 24) > data_end) return 0;  // type, code, checksum, reserved, target
  if (icmp[0] != 135) return 0;
  return ipv6_is((const __u32*)(icmp + 8), cfg->ipv6);
}

SEC("xdp")
int conduit_steer(struct xdp_md* ctx) {
  void* data = (void*)(long)ctx->data;
  void* data_end = (void*)(long)ctx->data_end;
  __u32 key = 0;
  struct steer_cfg* cfg = bpf_map_lookup_elem(&conduit_cfg, &key);
  if (!cfg || !cfg->enabled) return XDP_PASS;

  struct ethhdr* eth = data;
  if ((void*)(eth + 1) > data_end) return verdict(ctx, 0);
  __be16 proto = eth->h_proto;
  void* l3 = eth + 1;
  __u32 vid = 0;  // untagged, or a priority tag
  if (proto == bpf_htons(ETH_P_8021Q)) {
    struct vlan_tag* tag = l3;
    if ((void*)(tag + 1) > data_end) return verdict(ctx, 0);
    vid = bpf_ntohs(tag->tci) & 0x0FFF;
    proto = tag->encapsulated_proto;
    l3 = tag + 1;
  }
  if (vid != cfg->vlan) return verdict(ctx, 0);
  if (proto == bpf_htons(ETH_P_IP)) {
    struct iphdr* ip = l3;
    if ((void*)(ip + 1) > data_end) return verdict(ctx, 0);
    return verdict(ctx, ip->daddr == cfg->ipv4);
  }
  if (proto == bpf_htons(ETH_P_IPV6)) {
    struct ipv6hdr* ip6 = l3;
    if (!cfg->ipv6_enabled || (void*)(ip6 + 1) > data_end) return verdict(ctx, 0);
    return verdict(ctx, ipv6_for_us(cfg, ip6, data_end));
  }
  if (proto == bpf_htons(ETH_P_ARP)) {
    struct arp_eth_ipv4* arp = l3;
    if ((void*)(arp + 1) > data_end) return verdict(ctx, 0);
    __u32 tpa = (__u32)arp->tpa[0] | (__u32)arp->tpa[1] << 8 | (__u32)arp->tpa[2] << 16 |
                (__u32)arp->tpa[3] << 24;  // the bytes as they lie: network order, like ipv4
    return verdict(ctx, tpa == cfg->ipv4);
  }
  return verdict(ctx, 0);
}

char LICENSE[] SEC("license") = "GPL";
