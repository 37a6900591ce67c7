// SPDX-License-Identifier: GPL-2.0
// drop: loss injection for tests (the kernel here has no netem). Attached with tc clsact on
// ingress or egress; drops a configured share of the IPv4 UDP frames to one destination port
// (default 4791, RoCEv2), chosen with bpf_get_prandom_u32, and counts what it did.
//
// Configuration: array map "drop_cfg" (one struct drop_cfg, key 0) written with bpftool
// (scripts/lib/tcbpf.sh). Until configured (share_ppm 0) nothing is dropped.
// Counters: array map "drop_stats" (struct drop_stats, key 0).
//
// Flag DROP_SPARE_ACKS keeps every RoCE acknowledge (BTH opcode 0x11: ACK and NAK) and drops only
// the other frames. ibv_rc_pingpong-style applications end with a race no transport can close: the
// last receiver destroys its QP as soon as the message arrived, so if that message's ACK is lost
// the sender retries into nothing and fails. Tests of such applications spare the ACKs; the other
// loss tests drop every kind of frame.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

struct drop_cfg {
  __u32 share_ppm;  // share of matching frames to drop, parts per million (1000000 = all)
  __u16 udp_port;   // destination port to match; 0 = every IPv4 UDP frame
  __u16 flags;      // DROP_SPARE_ACKS
};

#define DROP_SPARE_ACKS 1u
#define ROCE_OPCODE_ACKNOWLEDGE 0x11

struct drop_stats {
  __u64 packets;  // IPv4 frames seen
  __u64 matched;  // frames to the configured UDP port
  __u64 dropped;  // matched frames dropped
  __u64 spared;   // matched RoCE ACK/NAK frames kept because of DROP_SPARE_ACKS
};

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct drop_cfg);
} drop_cfg SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct drop_stats);
} drop_stats SEC(".maps");

SEC("tc")
int drop(struct __sk_buff* skb) {
  __u32 key = 0;
  struct drop_cfg* cfg = bpf_map_lookup_elem(&drop_cfg, &key);
  struct drop_stats* st = bpf_map_lookup_elem(&drop_stats, &key);
  if (!cfg || !st) return TC_ACT_OK;

  // Frames sent from a packet socket's TX ring (DPDK af_packet, PACKET_QDISC_BYPASS) keep only
  // their first headers in the linear area, the rest in page fragments: make the IPv4 and UDP
  // headers direct-readable first, or such frames would never match.
  const __u32 want = sizeof(struct ethhdr) + 60 + sizeof(struct udphdr);
  void* data = (void*)(long)skb->data;
  void* data_end = (void*)(long)skb->data_end;
  if (data + want > data_end) {
    bpf_skb_pull_data(skb, want < skb->len ? want : skb->len);
    data = (void*)(long)skb->data;  // the pull invalidates packet pointers
    data_end = (void*)(long)skb->data_end;
  }
  struct ethhdr* eth = data;
  if ((void*)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP)) return TC_ACT_OK;
  struct iphdr* ip = (void*)(eth + 1);
  if ((void*)(ip + 1) > data_end) return TC_ACT_OK;
  __sync_fetch_and_add(&st->packets, 1);
  if (ip->protocol != IPPROTO_UDP) return TC_ACT_OK;
  // Fragments after the first carry no UDP header.
  if (ip->frag_off & bpf_htons(0x1fff)) return TC_ACT_OK;
  struct udphdr* udp = (void*)ip + ip->ihl * 4;
  if (ip->ihl < 5 || (void*)(udp + 1) > data_end) return TC_ACT_OK;
  if (cfg->udp_port != 0 && udp->dest != bpf_htons(cfg->udp_port)) return TC_ACT_OK;
  __sync_fetch_and_add(&st->matched, 1);
  if (cfg->share_ppm == 0) return TC_ACT_OK;
  if (cfg->flags & DROP_SPARE_ACKS) {
    __u8* bth = (void*)(udp + 1);  // the BTH opcode is the first byte of the UDP payload
    if ((void*)(bth + 1) > data_end) return TC_ACT_OK;
    if (*bth == ROCE_OPCODE_ACKNOWLEDGE) {
      __sync_fetch_and_add(&st->spared, 1);
      return TC_ACT_OK;
    }
  }
  if (cfg->share_ppm < 1000000U && (bpf_get_prandom_u32() % 1000000U) >= cfg->share_ppm)
    return TC_ACT_OK;
  __sync_fetch_and_add(&st->dropped, 1);
  return TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "GPL";
