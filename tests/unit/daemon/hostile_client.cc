// hostile_client: a deliberately hostile conduitd client (issue 5), for
// conduitd_hostile_client_test.sh. It sets up like any client through
// libconduit (context, MR, CQ, QPs connected to each other), then finds its
// shared region in /proc/self/maps and writes to it behind libconduit's back,
// as any process can:
//   1. bad work requests pushed straight into its SQ/RQ rings with valid ring
//      indices: each with one defect (opcode, flags, SGE count, inline length,
//      reserved bytes, fields an opcode does not take, offset/length overflow,
//      offsets outside the MR and the region, unknown lkeys, rkeys and remote
//      addresses, huge lengths) or plain random bytes; the engine must answer
//      each with an error completion (or, for RDMA with a forged rkey, the
//      peer's NAK) and touch nothing else;
//   2. QPs connected to the QPNs of other clients (--victim-qpn), posting SENDs
//      and WRITEs with guessed rkeys at them: the engine must not deliver them;
//   3. doorbell spam: every wakeup descriptor it holds (the engine's doorbell,
//      the CQs' and the CM events' pipes) made blocking (O_NONBLOCK cleared on
//      its end), the doorbell filled until it refuses, then all written to as
//      fast as it can;
//   4. random bytes over every ring slot, wakeup line and the region header;
//   5. impossible ring indices: the engine must cut it off and conduitd close
//      its connection (libconduit then reports ECONNRESET).
// --exit-after-ms N ends the process abruptly (_exit) N ms into phase 1
// instead: a client closing mid-way with garbage in its rings.
//
//   hostile_client --socket PATH [--seed N] [--phase-ms MS] [--exit-after-ms MS]
//                  [--victim-qpn QPN]...
//
// Prints what it did and saw (with how often conduit_poll_cq reported a CQ
// overrun, -EOVERFLOW: its bad WRs' error completions can fill the CQ faster
// than it polls). Exit status: 0 when no completion succeeded,
// error completions came back, phases 1-4 did not get it disconnected and
// phase 5 did within 2 s; 1 otherwise.
#include <conduit/conduit.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "shm/entries.h"
#include "shm/layout.h"
#include "shm/region.h"
#include "shm/spsc_ring.h"

namespace {

namespace shm = conduit::shm;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kMrBytes = 1u << 20;

int die(const char* what, int rc) {
  std::fprintf(stderr, "hostile_client: %s: %s\n", what, conduit_strerror(rc));
  return 1;
}

struct Mapping {
  uint8_t* base = nullptr;
  uint64_t size = 0;
};

// The region libconduit mapped for us: /memfd:conduit-client in our maps.
bool find_region(Mapping& out) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("memfd:conduit-client") == std::string::npos) continue;
    uint64_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64, &lo, &hi) != 2) continue;
    out.base = reinterpret_cast<uint8_t*>(lo);
    out.size = hi - lo;
    return true;
  }
  return false;
}

// Every wakeup descriptor this process holds: its pipes (the CQs', the CM events') and
// stream sockets (the engine's doorbell; the control connection is a SOCK_SEQPACKET one).
std::vector<int> wakeup_fds() {
  std::vector<int> fds;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return fds;
  const int dir_fd = ::dirfd(d);
  while (dirent* e = ::readdir(d)) {
    const int fd = std::atoi(e->d_name);
    if (e->d_name[0] == '.' || fd == dir_fd) continue;
    int type = 0;
    socklen_t len = sizeof(type);
    struct stat st {};
    if ((::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM) ||
        (::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode))) {
      fds.push_back(fd);
    }
  }
  ::closedir(d);
  return fds;
}

struct Ring {
  conduit_shm_ring_ctrl* ctrl = nullptr;
  uint8_t* slots = nullptr;
  uint32_t capacity = 0;
  uint32_t entry_bytes = 0;
  uint32_t prod = 0;  // ours: we are the producer of SQ/RQ rings

  uint32_t cons() const {
    return std::atomic_ref<uint32_t>(ctrl->cons).load(std::memory_order_acquire);
  }
  bool room() const { return prod - cons() < capacity; }
  void push(const void* entry) {
    std::memcpy(slots + uint64_t{prod & (capacity - 1)} * entry_bytes, entry, entry_bytes);
    ++prod;
    std::atomic_ref<uint32_t>(ctrl->prod).store(prod, std::memory_order_release);
  }
};

Ring ring_at(const Mapping& m, const shm::RegionLayout& l, uint32_t ring, uint32_t entry_bytes) {
  const conduit_shm_ring_desc d = l.ring_desc(ring);
  Ring r;
  r.ctrl = reinterpret_cast<conduit_shm_ring_ctrl*>(m.base + d.ctrl_offset);
  r.slots = m.base + d.slots_offset;
  r.capacity = d.capacity;
  r.entry_bytes = entry_bytes;
  r.prod = std::atomic_ref<uint32_t>(r.ctrl->prod).load(std::memory_order_acquire);
  return r;
}

struct Args {
  std::string socket;
  uint64_t seed = 1;
  int phase_ms = 800;
  int exit_after_ms = -1;
  std::vector<uint32_t> victims;
};

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--socket") {
      a.socket = v;
    } else if (k == "--seed") {
      a.seed = std::strtoull(v, nullptr, 0);
    } else if (k == "--phase-ms") {
      a.phase_ms = std::atoi(v);
    } else if (k == "--exit-after-ms") {
      a.exit_after_ms = std::atoi(v);
    } else if (k == "--victim-qpn") {
      a.victims.push_back(static_cast<uint32_t>(std::strtoul(v, nullptr, 0)));
    } else {
      std::fprintf(stderr, "hostile_client: unknown option %s\n", k.c_str());
      return 1;
    }
  }
  if (a.socket.empty()) {
    std::fprintf(stderr,
                 "usage: hostile_client --socket PATH [--seed N] [--phase-ms MS] "
                 "[--exit-after-ms MS] [--victim-qpn QPN]...\n");
    return 1;
  }
  if (a.victims.size() > 4) a.victims.resize(4);
  std::mt19937_64 rng(a.seed);

  // ---- set-up, like any client -------------------------------------------
  conduit_context_attr ca{};
  ca.socket_path = a.socket.c_str();
  ca.region_bytes = 4u << 20;
  ca.client_name = "hostile";
  conduit_context* ctx = nullptr;
  if (int rc = conduit_open(&ca, &ctx); rc < 0) return die("conduit_open", rc);
  conduit_mr* mr = nullptr;
  const uint32_t all =
      CONDUIT_ACCESS_LOCAL_WRITE | CONDUIT_ACCESS_REMOTE_WRITE | CONDUIT_ACCESS_REMOTE_READ;
  if (int rc = conduit_alloc_mr(ctx, kMrBytes, all, &mr); rc < 0) return die("alloc_mr", rc);
  conduit_mr* ro = nullptr;  // no local write: not a valid receive / READ target
  if (int rc = conduit_alloc_mr(ctx, 4096, 0, &ro); rc < 0) return die("alloc_mr", rc);
  conduit_cq* cq = nullptr;
  if (int rc = conduit_create_cq(ctx, 1024, &cq); rc < 0) return die("create_cq", rc);
  conduit_qp_init_attr qa{};
  qa.send_cq = cq;
  qa.recv_cq = cq;
  std::vector<conduit_qp*> qps(2 + a.victims.size());
  for (auto& q : qps) {
    if (int rc = conduit_create_qp(ctx, &qa, &q); rc < 0) return die("create_qp", rc);
  }
  conduit_qp_connect_attr con{};
  const uint8_t gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
  std::memcpy(con.remote_gid, gid, sizeof(gid));
  con.mtu = CONDUIT_MTU_1024;
  con.access = all;
  con.timeout = 8;  // ~1 ms: forged traffic nobody ACKs fails fast
  con.retry_cnt = 1;
  con.rnr_retry = 1;
  con.min_rnr_timer = 1;
  for (size_t i = 0; i < qps.size(); ++i) {
    con.remote_qpn = i < 2 ? conduit_qp_num(qps[1 - i]) : a.victims[i - 2];
    con.remote_psn = con.local_psn = static_cast<uint32_t>(rng() & 0xFFFFFF);
    if (i < 2) con.remote_psn = con.local_psn = 100;
    if (int rc = conduit_connect_qp(qps[i], &con); rc < 0) return die("connect_qp", rc);
  }

  Mapping m;
  if (!find_region(m)) {
    std::fprintf(stderr, "hostile_client: region not found in /proc/self/maps\n");
    return 1;
  }
  shm::RegionLayout layout;
  if (shm::parse_header(*reinterpret_cast<const conduit_shm_header*>(m.base), m.size, &layout) !=
      0) {
    std::fprintf(stderr, "hostile_client: cannot parse our own region header\n");
    return 1;
  }
  // Which ring slot is which QP: post one valid receive through libconduit
  // and see whose producer index moved. sqs[i]/rqs[i] are then QP i's rings.
  std::vector<Ring> sqs, rqs;
  for (size_t i = 0; i < qps.size(); ++i) {
    std::vector<uint32_t> before(layout.max_qps);
    for (uint32_t s = 0; s < layout.max_qps; ++s) {
      before[s] = ring_at(m, layout, layout.rq_ring(s), sizeof(conduit_shm_recv_wr)).prod;
    }
    conduit_sge sge{reinterpret_cast<uint64_t>(mr->addr), 64, mr->lkey};
    conduit_recv_wr rwr{};
    rwr.wr_id = 0xABC0 + i;
    rwr.sg_list = &sge;
    rwr.num_sge = 1;
    if (int rc = conduit_post_recv(qps[i], &rwr, nullptr); rc < 0) return die("post_recv", rc);
    uint32_t slot = layout.max_qps;
    for (uint32_t s = 0; s < layout.max_qps && slot == layout.max_qps; ++s) {
      if (ring_at(m, layout, layout.rq_ring(s), sizeof(conduit_shm_recv_wr)).prod != before[s]) {
        slot = s;
      }
    }
    if (slot == layout.max_qps) {
      std::fprintf(stderr, "hostile_client: cannot tell QP %zu's ring slot\n", i);
      return 1;
    }
    sqs.push_back(ring_at(m, layout, layout.sq_ring(slot), sizeof(conduit_shm_send_wr)));
    rqs.push_back(ring_at(m, layout, layout.rq_ring(slot), sizeof(conduit_shm_recv_wr)));
  }
  const std::vector<int> doorbells = wakeup_fds();
  auto kick = [&] {
    const char one = 1;
    // The pipes' reading ends refuse writes; written anyway, as a hostile client would.
    for (int fd : doorbells) {
      if (::send(fd, &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno == ENOTSOCK) {
        (void)!::write(fd, &one, 1);
      }
    }
  };
  std::printf("set up: region %" PRIu64
              " bytes at %p, %zu QPs, %zu wakeup descriptors, arena [%" PRIu64 ", +%" PRIu64 ")\n",
              m.size, static_cast<void*>(m.base), qps.size(), doorbells.size(), layout.arena_offset,
              layout.arena_size);
  std::fflush(stdout);

  std::map<std::string, uint64_t> seen;  // completion status -> count
  uint64_t completions = 0, errors = 0;
  bool disconnected = false;
  uint64_t overruns = 0;  // -EOVERFLOW: the engine lost error completions to the full CQ
  auto drain = [&] {
    conduit_wc wc[64];
    for (;;) {
      const int n = conduit_poll_cq(cq, 64, wc);
      if (n == -EOVERFLOW) {
        ++overruns;  // reported once per loss; the CQ goes on
        continue;
      }
      if (n < 0) {
        disconnected = true;
        return;
      }
      if (n == 0) return;
      for (int i = 0; i < n; ++i) {
        ++completions;
        if (wc[i].status != CONDUIT_WC_SUCCESS) ++errors;
        // vendor_err != 0: the engine's validator rejected the WR itself.
        ++seen[std::string(conduit_wc_status_str(wc[i].status)) +
               (wc[i].vendor_err != 0 ? " (rejected)" : "")];
      }
    }
  };

  // ---- 1 and 2: bad work requests ------------------------------------------
  const auto start = Clock::now();
  uint64_t bad_posted = 0;
  uint64_t forged_rkey = 0;  // RDMA WRITEs with a guessed rkey to our own peer QP
  auto bad_send = [&](conduit_shm_send_wr& w) {
    std::memset(&w, 0, sizeof(w));
    w.wr_id = rng();
    w.opcode = CONDUIT_SHM_WR_SEND;
    w.flags = CONDUIT_SHM_SEND_SIGNALED;
    w.num_sge = 1;
    w.u.sg_list[0] = {0, 64, mr->lkey};
    switch (rng() % 16) {
      case 0:
        w.opcode = static_cast<uint8_t>(rng() % 2 ? 0 : 6 + rng() % 250);
        break;
      case 1:
        w.flags = static_cast<uint8_t>(0x10 | rng());
        break;
      case 2:
        w.num_sge = static_cast<uint8_t>(7 + rng() % 249);
        break;
      case 3:
        w.flags |= CONDUIT_SHM_SEND_INLINE;
        w.num_sge = 0;
        w.inline_len = static_cast<uint32_t>(97 + rng() % 0xFFFFFF00u);
        break;
      case 4:
        w.reserved0 = static_cast<uint8_t>(1 + rng() % 255);
        break;
      case 5:
        w.imm_data = static_cast<uint32_t>(rng() | 1);
        break;  // SEND takes no imm
      case 6:
        w.u.sg_list[0].offset = ~0ull - (rng() % 4096);
        break;  // offset + length wraps
      case 7:
        w.u.sg_list[0].length = 0xFFFFFFFFu;
        break;  // huge length
      case 8:
        w.u.sg_list[0].lkey = static_cast<uint32_t>(rng());
        break;
      case 9:
        w.u.sg_list[0].offset = kMrBytes + rng() % (64u << 20);
        break;  // beyond the MR
      case 10:  // RDMA WRITE with a guessed rkey and address: the peer NAKs it
        ++forged_rkey;
        w.opcode = CONDUIT_SHM_WR_RDMA_WRITE;
        w.rkey = static_cast<uint32_t>(rng());
        w.remote_addr = rng();
        break;
      case 11:  // RDMA READ into memory without local write
        w.opcode = CONDUIT_SHM_WR_RDMA_READ;
        w.u.sg_list[0].lkey = ro->lkey;
        w.rkey = mr->rkey;
        w.remote_addr = mr->iova;
        break;
      case 12:  // remote address that wraps
        w.opcode = CONDUIT_SHM_WR_RDMA_WRITE;
        w.rkey = mr->rkey;
        w.remote_addr = ~0ull - 8;
        break;
      case 13:  // five SGEs, the last one far outside
        w.num_sge = 5;
        for (int i = 0; i < 5; ++i) w.u.sg_list[i] = {uint64_t(i) * 64, 64, mr->lkey};
        w.u.sg_list[4].offset = 1ull << 40;
        break;
      case 14:  // total message length above 2^31
        w.num_sge = 6;
        for (int i = 0; i < 6; ++i) w.u.sg_list[i] = {0, 0x80000000u - 1, mr->lkey};
        break;
      default: {  // random bytes
        auto* b = reinterpret_cast<uint8_t*>(&w);
        for (size_t i = 0; i < sizeof(w); ++i) b[i] = static_cast<uint8_t>(rng());
      }
    }
  };
  auto bad_recv = [&](conduit_shm_recv_wr& w) {
    std::memset(&w, 0, sizeof(w));
    w.wr_id = rng();
    w.num_sge = 1;
    w.sg_list[0] = {0, 64, mr->lkey};
    switch (rng() % 7) {
      case 0:
        w.num_sge = static_cast<uint8_t>(7 + rng() % 249);
        break;
      case 1:
        w.reserved0[rng() % 7] = 1;
        break;
      case 2:
        w.sg_list[0].lkey = static_cast<uint32_t>(rng());
        break;
      case 3:
        w.sg_list[0].offset = ~0ull - 3;
        break;
      case 4:
        w.sg_list[0].lkey = ro->lkey;
        break;  // no local write
      case 5:
        w.reserved1[rng() % 16] = 1;
        break;
      default: {
        auto* b = reinterpret_cast<uint8_t*>(&w);
        for (size_t i = 0; i < sizeof(w); ++i) b[i] = static_cast<uint8_t>(rng());
      }
    }
  };
  // Victim QPs: well-formed SENDs and WRITEs (guessed rkeys) at other clients' QPs.
  uint64_t forged = 0;
  auto forge = [&](size_t qi) {
    conduit_sge sge{reinterpret_cast<uint64_t>(mr->addr), 256, mr->lkey};
    conduit_send_wr wr{};
    wr.wr_id = 0xF00D0000 + qi;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = CONDUIT_SEND_SIGNALED;
    if (rng() % 2) {
      wr.opcode = CONDUIT_WR_RDMA_WRITE;
      wr.rkey = static_cast<uint32_t>(rng());
      wr.remote_addr = rng() % (1ull << 32);
    } else {
      wr.opcode = CONDUIT_WR_SEND;
    }
    if (conduit_post_send(qps[qi], &wr, nullptr) == 0) ++forged;
  };

  while (Clock::now() - start < std::chrono::milliseconds(a.phase_ms)) {
    if (a.exit_after_ms >= 0 &&
        Clock::now() - start >= std::chrono::milliseconds(a.exit_after_ms)) {
      std::printf("exiting abruptly mid-way (%" PRIu64 " bad WRs posted)\n", bad_posted);
      std::fflush(stdout);
      ::_exit(0);
    }
    for (size_t s = 0; s < 2 && s < sqs.size(); ++s) {
      for (int k = 0; k < 8; ++k) {
        if (sqs[s].room()) {
          conduit_shm_send_wr w;
          bad_send(w);
          sqs[s].push(&w);
          ++bad_posted;
        }
        if (rqs[s].room()) {
          conduit_shm_recv_wr w;
          bad_recv(w);
          rqs[s].push(&w);
          ++bad_posted;
        }
      }
    }
    for (size_t qi = 2; qi < qps.size(); ++qi) forge(qi);
    kick();
    drain();
    if (disconnected) break;
  }
  // Let the engine finish what is in the rings.
  for (int i = 0; i < 200 && !disconnected; ++i) {
    drain();
    conduit_wait_cq(cq, 5);
  }
  std::printf("phase 1-2: %" PRIu64 " bad WRs (%" PRIu64 " WRITEs with guessed rkeys) and %" PRIu64
              " forged WRs at other clients posted; %" PRIu64 " completions, %" PRIu64 " errors:",
              bad_posted, forged_rkey, forged, completions, errors);
  for (const auto& [k, v] : seen) std::printf(" %s=%" PRIu64, k.c_str(), v);
  std::printf("; CQ overruns reported: %" PRIu64 "; QP states:", overruns);
  for (conduit_qp* q : qps) {
    conduit_qp_attr at{};
    std::printf(" %d", conduit_query_qp(q, &at) == 0 ? static_cast<int>(at.state) : -1);
  }
  std::printf("\n");
  std::fflush(stdout);
  if (disconnected) {
    std::printf("FAIL: disconnected during phase 1 (only valid ring indices were used)\n");
    return 1;
  }
  bool ok = true;
  if (seen.count("success") != 0) {
    // A bad WR must never succeed; the forged ones must never be ACKed either.
    std::printf("FAIL: %" PRIu64 " completions succeeded\n", seen["success"]);
    ok = false;
  }
  if (errors == 0) {
    std::printf("FAIL: no error completions\n");
    ok = false;
  }

  // ---- 3: doorbell spam -------------------------------------------------
  // Blocking on our side, the doorbell full to the brim: conduitd's ends are its own
  // open file descriptions, so it must not notice.
  uint64_t filled = 0;
  for (int fd : doorbells) {
    const char junk[4096] = {};
    for (ssize_t n; (n = ::send(fd, junk, sizeof(junk), MSG_DONTWAIT | MSG_NOSIGNAL)) > 0;) {
      filled += static_cast<uint64_t>(n);
    }
    (void)::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  }
  std::printf("phase 3: %" PRIu64 " more bytes in the doorbell, every wakeup descriptor blocking\n",
              filled);
  uint64_t kicks = 0;
  const auto t3 = Clock::now();
  while (Clock::now() - t3 < std::chrono::milliseconds(a.phase_ms / 2)) {
    kick();
    ++kicks;
  }
  std::printf("phase 3: %" PRIu64 " doorbell rounds on %zu wakeup descriptors\n", kicks,
              doorbells.size());

  // ---- 4: random bytes over slots, wakeup lines and the header -----------
  const auto t4 = Clock::now();
  uint64_t scribbles = 0;
  while (Clock::now() - t4 < std::chrono::milliseconds(a.phase_ms / 2)) {
    for (auto* rings : {&sqs, &rqs}) {
      for (Ring& r : *rings) {
        const uint64_t off = rng() % (uint64_t{r.capacity} * r.entry_bytes);
        r.slots[off] = static_cast<uint8_t>(rng());
      }
    }
    const uint64_t db = layout.doorbell_offset + rng() % (uint64_t{layout.doorbell_count} * 128);
    m.base[db] = static_cast<uint8_t>(rng());
    m.base[rng() % sizeof(conduit_shm_header)] = static_cast<uint8_t>(rng());
    ++scribbles;
    if (scribbles % 64 == 0) {
      // Publish some of the scribbled slots.
      for (Ring& r : sqs) {
        if (r.room()) {
          ++r.prod;
          std::atomic_ref<uint32_t>(r.ctrl->prod).store(r.prod, std::memory_order_release);
        }
      }
      kick();
      drain();
      if (disconnected) break;
    }
  }
  std::printf("phase 4: %" PRIu64 " scribbles; %" PRIu64 " completions, %" PRIu64 " errors\n",
              scribbles, completions, errors);
  if (disconnected) {
    std::printf("FAIL: disconnected during phase 4 (ring indices were still valid)\n");
    return 1;
  }

  // ---- 5: impossible ring indices ----------------------------------------
  Ring& victim = sqs[0];
  const uint32_t bogus = victim.cons() + victim.capacity + 1 + static_cast<uint32_t>(rng() % 1000);
  std::atomic_ref<uint32_t>(victim.ctrl->prod).store(bogus, std::memory_order_release);
  kick();
  const auto t5 = Clock::now();
  while (!disconnected && Clock::now() - t5 < std::chrono::seconds(3)) {
    drain();
    if (!disconnected) {
      const int w = conduit_wait_cq(cq, 10);
      if (w < 0) disconnected = true;
    }
  }
  const auto cut_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t5).count();
  if (disconnected) {
    std::printf("phase 5: impossible SQ producer index -> disconnected after %lld ms\n",
                static_cast<long long>(cut_ms));
  } else {
    std::printf("FAIL: phase 5: still connected 3 s after writing impossible ring indices\n");
    ok = false;
  }
  if (disconnected && cut_ms > 2000) ok = false;
  std::fflush(stdout);
  // The context is dead: leave without conduit_close (its calls would fail anyway).
  return ok ? 0 : 1;
}
