// stream_peer: one end of a SEND stream through conduitd, for the cleanup
// tests (conduitd_client_kill_test.sh). Two processes run it with each other's
// names; each writes its QPN to DIR/NAME.qpn, waits for PEER's, connects its
// QP to it and then SENDs 4 KiB messages both ways (receives kept posted)
// until a work request fails, the library reports an error, or --seconds pass.
//
//   stream_peer --socket PATH --dir DIR --name NAME --peer PEER [--seconds S]
//               [--linger-ms MS]
//
// Prints, one per line: "flowing" (touches DIR/NAME.flowing) after 256
// successful completions; at the first failure "error kind=wc|lib
// status=TEXT realtime_ns=N completions=N" (realtime_ns: CLOCK_REALTIME, so the
// test script can subtract the time it killed the peer). After a failure it
// stays attached for --linger-ms (default 0), so the test can look at the
// daemon while this client still lives.
// Exit status: 0 after a failure was seen, 2 when --seconds passed without
// one, 1 when set-up failed.
#include <conduit/conduit.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <thread>

namespace {

constexpr uint32_t kMsgBytes = 4096;
constexpr uint32_t kSlots = 32;  // receive slots and send slots each
constexpr uint32_t kPsn = 0x1000;

uint64_t realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

int die(const char* what, int rc) {
  std::fprintf(stderr, "stream_peer: %s: %s\n", what, conduit_strerror(rc));
  return 1;
}

struct Args {
  std::string socket, dir, name, peer;
  int seconds = 20;
  int linger_ms = 0;
};

bool parse(int argc, char** argv, Args& a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--socket") {
      a.socket = v;
    } else if (k == "--dir") {
      a.dir = v;
    } else if (k == "--name") {
      a.name = v;
    } else if (k == "--peer") {
      a.peer = v;
    } else if (k == "--seconds") {
      a.seconds = std::atoi(v.c_str());
    } else if (k == "--linger-ms") {
      a.linger_ms = std::atoi(v.c_str());
    } else {
      return false;
    }
  }
  return !a.socket.empty() && !a.dir.empty() && !a.name.empty() && !a.peer.empty();
}

// Waits up to 10 s for DIR/PEER.qpn.
bool read_peer_qpn(const Args& a, uint32_t& qpn) {
  const std::string path = a.dir + "/" + a.peer + ".qpn";
  for (int i = 0; i < 1000; ++i) {
    std::ifstream in(path);
    if (in >> qpn) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parse(argc, argv, a)) {
    std::fprintf(stderr,
                 "usage: stream_peer --socket PATH --dir DIR --name NAME --peer PEER "
                 "[--seconds S] [--linger-ms MS]\n");
    return 1;
  }
  conduit_context_attr ca{};
  ca.socket_path = a.socket.c_str();
  ca.region_bytes = 4u << 20;
  ca.client_name = a.name.c_str();
  conduit_context* ctx = nullptr;
  if (int rc = conduit_open(&ca, &ctx); rc < 0) return die("conduit_open", rc);
  conduit_mr* mr = nullptr;
  if (int rc = conduit_alloc_mr(ctx, 2 * kSlots * kMsgBytes, CONDUIT_ACCESS_LOCAL_WRITE, &mr);
      rc < 0) {
    return die("conduit_alloc_mr", rc);
  }
  conduit_cq* cq = nullptr;
  if (int rc = conduit_create_cq(ctx, 4 * kSlots, &cq); rc < 0) return die("conduit_create_cq", rc);
  conduit_qp_init_attr qa{};
  qa.send_cq = cq;
  qa.recv_cq = cq;
  conduit_qp* qp = nullptr;
  if (int rc = conduit_create_qp(ctx, &qa, &qp); rc < 0) return die("conduit_create_qp", rc);
  {
    const std::string tmp = a.dir + "/" + a.name + ".qpn.tmp";
    std::ofstream(tmp) << conduit_qp_num(qp) << "\n";
    std::rename(tmp.c_str(), (a.dir + "/" + a.name + ".qpn").c_str());
  }
  uint32_t peer_qpn = 0;
  if (!read_peer_qpn(a, peer_qpn)) {
    std::fprintf(stderr, "stream_peer: no %s/%s.qpn within 10 s\n", a.dir.c_str(), a.peer.c_str());
    return 1;
  }
  conduit_qp_connect_attr con{};
  con.remote_qpn = peer_qpn;
  con.remote_psn = kPsn;
  con.local_psn = kPsn;
  const uint8_t gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
  std::memcpy(con.remote_gid, gid, sizeof(gid));
  con.mtu = CONDUIT_MTU_1024;
  con.timeout = 14;
  con.retry_cnt = 7;
  con.rnr_retry = 7;
  con.min_rnr_timer = 12;
  if (int rc = conduit_connect_qp(qp, &con); rc < 0) return die("conduit_connect_qp", rc);

  auto* base = static_cast<uint8_t*>(mr->addr);
  // Receive slots [0, kSlots), send slots [kSlots, 2 * kSlots). wr_id: slot | 1 << 32 for sends.
  auto post_recv = [&](uint32_t slot) {
    conduit_sge sge{reinterpret_cast<uint64_t>(base + slot * kMsgBytes), kMsgBytes, mr->lkey};
    conduit_recv_wr wr{};
    wr.wr_id = slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return conduit_post_recv(qp, &wr, nullptr);
  };
  auto post_send = [&](uint32_t slot) {
    conduit_sge sge{reinterpret_cast<uint64_t>(base + (kSlots + slot) * kMsgBytes), kMsgBytes,
                    mr->lkey};
    conduit_send_wr wr{};
    wr.wr_id = (1ull << 32) | slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = CONDUIT_WR_SEND;
    wr.send_flags = CONDUIT_SEND_SIGNALED;
    return conduit_post_send(qp, &wr, nullptr);
  };
  for (uint32_t s = 0; s < kSlots; ++s) {
    if (int rc = post_recv(s); rc < 0) return die("conduit_post_recv", rc);
  }
  // Half the send slots in flight: the peer's receives never run dry for long.
  for (uint32_t s = 0; s < kSlots / 2; ++s) {
    if (int rc = post_send(s); rc < 0) return die("conduit_post_send", rc);
  }

  uint64_t completions = 0;
  bool flowing = false;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(a.seconds);
  auto report = [&](const char* kind, const char* status) {
    std::printf("error kind=%s status=%s realtime_ns=%llu completions=%llu\n", kind, status,
                static_cast<unsigned long long>(realtime_ns()),
                static_cast<unsigned long long>(completions));
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(a.linger_ms));
    return 0;
  };
  while (std::chrono::steady_clock::now() < end) {
    conduit_wc wc[16];
    const int n = conduit_poll_cq(cq, 16, wc);
    if (n < 0) return report("lib", conduit_strerror(n));
    if (n == 0) {
      const int w = conduit_wait_cq(cq, 10);
      if (w < 0) return report("lib", conduit_strerror(w));
      continue;
    }
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != CONDUIT_WC_SUCCESS)
        return report("wc", conduit_wc_status_str(wc[i].status));
      ++completions;
      const uint32_t slot = static_cast<uint32_t>(wc[i].wr_id);
      const int rc = (wc[i].wr_id >> 32) != 0 ? post_send(slot) : post_recv(slot);
      if (rc < 0) return report("lib", conduit_strerror(rc));
    }
    if (!flowing && completions >= 256) {
      flowing = true;
      std::printf("flowing\n");
      std::fflush(stdout);
      std::ofstream(a.dir + "/" + a.name + ".flowing") << completions << "\n";
    }
  }
  std::printf("no error within %d s (%llu completions)\n", a.seconds,
              static_cast<unsigned long long>(completions));
  return 2;
}
