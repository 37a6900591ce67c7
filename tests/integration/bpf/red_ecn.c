// SPDX-License-Identifier: GPL-2.0
// red_ecn: a switch's RED/ECN marking for a router namespace's egress (tc clsact).
//
// The kernel here has no red qdisc, so the queue a switch would mark on is modelled: a virtual
// queue in bytes that every IPv4 packet leaving the interface joins and that drains at the
// configured rate (the bottleneck's rate, as set with tbf) by elapsed time; IPv6 packets
// join it too. An ECT packet (ECN 01 or 10: the low two bits of IPv4's TOS or of IPv6's
// traffic class) is marked CE with the RED profile: never below kmin_bytes, always at or
// above kmax_bytes, and with probability pmax_ppm * (q - kmin) / (kmax - kmin) in between.
// The IPv4 header checksum is fixed incrementally (IPv6 has none). Nothing is dropped here: the
// real queue (tbf) drops; the virtual queue stops growing at limit_bytes as the real one would.
//
// Configuration: array map "red_cfg" (one struct red_cfg, key 0), written with
// `bpftool map update id ID key 0 0 0 0 value ...` (scripts/lib/tcbpf.sh does it). Until a
// rate is set the program passes everything without marking.
// Counters: array map "red_stats" (one struct red_stats, key 0), read with bpftool (BTF).
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <stddef.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

struct red_cfg {
  __u64 rate_bps;     // drain rate of the virtual queue, bits per second; 0 = disabled
  __u32 kmin_bytes;   // no marks below this queue depth
  __u32 kmax_bytes;   // every ECT packet marked at or above this depth
  __u32 pmax_ppm;     // marking probability at kmax, parts per million (1000000 = 100 %)
  __u32 limit_bytes;  // the virtual queue never exceeds this (the real queue's limit)
};

struct red_stats {
  __u64 packets;          // IPv4 and IPv6 packets seen
  __u64 bytes;            // their bytes
  __u64 ect;              // of which ECT(0) or ECT(1)
  __u64 marked;           // ECT packets this program set to CE
  __u64 ce_in;            // packets that arrived already CE
  __u64 not_ect_over;     // not-ECT packets while the queue was above kmin (RED would drop some)
  __u64 queue_max_bytes;  // highest virtual queue depth seen
  __u64 queue_bytes;      // virtual queue depth after the last packet
};

struct red_queue {
  struct bpf_spin_lock lock;
  __u64 backlog_bytes;
  __u64 last_ns;
};

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct red_cfg);
} red_cfg SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct red_stats);
} red_stats SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct red_queue);
} red_queue SEC(".maps");

// Updates the virtual queue with one packet and returns its depth (including the packet).
static __always_inline __u64 queue_enqueue(struct red_queue* q, const struct red_cfg* cfg,
                                           __u32 len) {
  __u64 now = bpf_ktime_get_ns();
  __u64 depth;
  bpf_spin_lock(&q->lock);
  __u64 elapsed = now > q->last_ns ? now - q->last_ns : 0;
  // Bytes drained in `elapsed` ns at rate_bps; elapsed is capped at 1 s to avoid overflow.
  if (elapsed > 1000000000ULL) elapsed = 1000000000ULL;
  __u64 drained = elapsed * (cfg->rate_bps / 8) / 1000000000ULL;
  q->backlog_bytes = q->backlog_bytes > drained ? q->backlog_bytes - drained : 0;
  q->last_ns = now;
  if (cfg->limit_bytes == 0 || q->backlog_bytes + len <= cfg->limit_bytes) q->backlog_bytes += len;
  depth = q->backlog_bytes;
  bpf_spin_unlock(&q->lock);
  return depth;
}

static __always_inline int red_should_mark(const struct red_cfg* cfg, __u64 depth) {
  if (depth < cfg->kmin_bytes) return 0;
  if (depth >= cfg->kmax_bytes || cfg->kmax_bytes <= cfg->kmin_bytes) return 1;
  __u64 p_ppm =
      (__u64)cfg->pmax_ppm * (depth - cfg->kmin_bytes) / (cfg->kmax_bytes - cfg->kmin_bytes);
  return (bpf_get_prandom_u32() % 1000000U) < p_ppm;
}

SEC("tc")
int red_ecn(struct __sk_buff* skb) {
  __u32 key = 0;
  struct red_cfg* cfg = bpf_map_lookup_elem(&red_cfg, &key);
  struct red_stats* st = bpf_map_lookup_elem(&red_stats, &key);
  struct red_queue* q = bpf_map_lookup_elem(&red_queue, &key);
  if (!cfg || !st || !q || cfg->rate_bps == 0) return TC_ACT_OK;

  void* data = (void*)(long)skb->data;
  void* data_end = (void*)(long)skb->data_end;
  struct ethhdr* eth = data;
  if ((void*)(eth + 1) > data_end) return TC_ACT_OK;
  const int v6 = eth->h_proto == bpf_htons(ETH_P_IPV6);
  if (!v6 && eth->h_proto != bpf_htons(ETH_P_IP)) return TC_ACT_OK;
  struct iphdr* ip = (void*)(eth + 1);
  struct ipv6hdr* ip6 = (void*)(eth + 1);
  if (v6 ? (void*)(ip6 + 1) > data_end : (void*)(ip + 1) > data_end) return TC_ACT_OK;

  __u64 depth = queue_enqueue(q, cfg, skb->len);
  __sync_fetch_and_add(&st->packets, 1);
  __sync_fetch_and_add(&st->bytes, skb->len);
  st->queue_bytes = depth;
  if (depth > st->queue_max_bytes) st->queue_max_bytes = depth;  // racy max: a statistic

  // IPv6: the traffic class is the low nibble of byte 0 and the high nibble of byte 1.
  __u8 b1 = v6 ? ((__u8*)ip6)[1] : 0;
  __u8 ecn = v6 ? (b1 >> 4) & 3 : ip->tos & 3;
  if (ecn == 3) {
    __sync_fetch_and_add(&st->ce_in, 1);
    return TC_ACT_OK;
  }
  if (ecn == 0) {
    if (depth >= cfg->kmin_bytes) __sync_fetch_and_add(&st->not_ect_over, 1);
    return TC_ACT_OK;
  }
  __sync_fetch_and_add(&st->ect, 1);
  if (!red_should_mark(cfg, depth)) return TC_ACT_OK;

  if (v6) {
    b1 |= 0x30;
    if (bpf_skb_store_bytes(skb, ETH_HLEN + 1, &b1, 1, 0) < 0) return TC_ACT_OK;
    __sync_fetch_and_add(&st->marked, 1);
    return TC_ACT_OK;
  }
  // The checksum covers 16-bit words: the first one is (version, IHL) and TOS.
  __u16 old_word = *(__u16*)ip;
  __u8 tos = ip->tos | 3;
  __u16 new_word = old_word;
  ((__u8*)&new_word)[1] = tos;
  if (bpf_l3_csum_replace(skb, ETH_HLEN + offsetof(struct iphdr, check), old_word, new_word,
                          sizeof(__u16)) < 0)
    return TC_ACT_OK;
  if (bpf_skb_store_bytes(skb, ETH_HLEN + offsetof(struct iphdr, tos), &tos, 1, 0) < 0)
    return TC_ACT_OK;
  __sync_fetch_and_add(&st->marked, 1);
  return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
