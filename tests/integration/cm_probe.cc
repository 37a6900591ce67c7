// A small libconduit client for daemon_cm_test.sh: one side of a connection
// through conduitd's connection manager, with the outcome printed in a form
// the script greps.
//
//   cm_probe SOCKET listen SERVICE (accept|reject=REASON) COUNT [--sr] [--wait-disconnect]
//       listens on SERVICE and answers COUNT requests (REASON: refused, quota,
//       policy); prints "accepted qpn=... remote_qpn=... mtu=... sr=0|1" or
//       "rejected" per request, then exits (its connections end with it). With
//       --wait-disconnect, after each accept it waits (10 s) for the peer to
//       disconnect and prints "peer disconnected qpn=...".
//   cm_probe SOCKET connect HOST SERVICE TIMEOUT_MS [--sr]
//       prints "connected remote_qpn=... mtu=... sr=0|1 ms=..." (exit 0) or
//       "error ERRNO_NAME ms=...: message" (exit 2).
#include <conduit/conduit.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

const char* errno_name(int e) {
  switch (e) {
    case ECONNREFUSED:
      return "ECONNREFUSED";
    case EDQUOT:
      return "EDQUOT";
    case EPERM:
      return "EPERM";
    case ETIMEDOUT:
      return "ETIMEDOUT";
    case EINVAL:
      return "EINVAL";
    default:
      return "OTHER";
  }
}

int die(const char* what, int rc) {
  std::printf("error %s: %s: %s\n", errno_name(-rc), what, conduit_strerror(rc));
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: see the comment at the top of cm_probe.cc\n");
    return 64;
  }
  const std::string mode = argv[2];
  bool sr = false;
  bool wait_disconnect = false;
  for (int i = 1; i < argc; ++i) {
    sr = sr || std::strcmp(argv[i], "--sr") == 0;
    wait_disconnect = wait_disconnect || std::strcmp(argv[i], "--wait-disconnect") == 0;
  }
  conduit_context_attr attr{};
  attr.socket_path = argv[1];
  attr.region_bytes = 8 << 20;
  attr.client_name = "cm-probe";
  conduit_context* ctx = nullptr;
  if (int rc = conduit_open(&attr, &ctx); rc < 0) return die("conduit_open", rc);
  conduit_cq* cq = nullptr;
  if (int rc = conduit_create_cq(ctx, 64, &cq); rc < 0) return die("conduit_create_cq", rc);
  auto new_qp = [&](conduit_qp** qp) {
    conduit_qp_init_attr qa{};
    qa.send_cq = cq;
    qa.recv_cq = cq;
    qa.max_send_wr = 16;
    qa.max_recv_wr = 16;
    return conduit_create_qp(ctx, &qa, qp);
  };
  conduit_cm_param param{};
  param.access = CONDUIT_ACCESS_LOCAL_WRITE | CONDUIT_ACCESS_REMOTE_WRITE;
  param.mtu = CONDUIT_MTU_1024;
  param.flags = sr ? CONDUIT_CM_SELECTIVE_REPEAT : 0;
  const char hello[] = "hello";
  param.private_data = hello;
  param.private_len = sizeof(hello);

  if (mode == "listen" && argc >= 6) {
    const uint64_t service = std::strtoull(argv[3], nullptr, 10);
    const std::string answer = argv[4];
    const int count = std::atoi(argv[5]);
    int reason = 0;
    if (answer == "reject=refused") reason = CONDUIT_CM_REJ_REFUSED;
    if (answer == "reject=quota") reason = CONDUIT_CM_REJ_QUOTA;
    if (answer == "reject=policy") reason = CONDUIT_CM_REJ_POLICY;
    if (int rc = conduit_listen(ctx, service); rc < 0) return die("conduit_listen", rc);
    std::printf("listening on %llu\n", static_cast<unsigned long long>(service));
    std::fflush(stdout);
    for (int i = 0; i < count; ++i) {
      conduit_cm_request req{};
      if (int rc = conduit_get_request(ctx, 30000, &req); rc < 0) {
        return die("conduit_get_request", rc);
      }
      if (reason != 0) {
        if (int rc = conduit_reject(ctx, &req, reason); rc < 0) return die("conduit_reject", rc);
        std::printf("rejected\n");
      } else {
        conduit_qp* qp = nullptr;
        if (int rc = new_qp(&qp); rc < 0) return die("conduit_create_qp", rc);
        conduit_cm_conn conn{};
        if (int rc = conduit_accept(qp, &req, &param, 10000, &conn); rc < 0) {
          return die("conduit_accept", rc);
        }
        std::printf("accepted qpn=%u remote_qpn=%u mtu=%u sr=%d private=%s\n", conduit_qp_num(qp),
                    conn.remote_qpn, conn.mtu_bytes,
                    (conn.flags & CONDUIT_CM_SELECTIVE_REPEAT) ? 1 : 0,
                    reinterpret_cast<const char*>(conn.private_data));
        if (wait_disconnect) {
          std::fflush(stdout);
          if (int rc = conduit_wait_disconnect(qp, 10000); rc < 0) {
            return die("conduit_wait_disconnect", rc);
          }
          std::printf("peer disconnected qpn=%u\n", conduit_qp_num(qp));
          if (int rc = conduit_wait_disconnect(qp, 0); rc != 0) {
            return die("conduit_wait_disconnect (again)", rc);
          }
        }
      }
      std::fflush(stdout);
    }
    conduit_close(ctx);
    return 0;
  }
  if (mode == "connect" && argc >= 6) {
    const char* host = argv[3];
    const uint64_t service = std::strtoull(argv[4], nullptr, 10);
    const int timeout_ms = std::atoi(argv[5]);
    conduit_qp* qp = nullptr;
    if (int rc = new_qp(&qp); rc < 0) return die("conduit_create_qp", rc);
    const auto t0 = std::chrono::steady_clock::now();
    conduit_cm_conn conn{};
    const int rc = conduit_connect_service(qp, host, service, &param, timeout_ms, &conn);
    const long ms = static_cast<long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count());
    if (rc < 0) {
      std::printf("error %s ms=%ld: %s\n", errno_name(-rc), ms, conduit_strerror(rc));
      conduit_close(ctx);
      return 2;
    }
    conduit_qp_attr a{};
    conduit_query_qp(qp, &a);
    std::printf("connected qpn=%u remote_qpn=%u mtu=%u sr=%d state=%u ms=%ld private=%s\n",
                conduit_qp_num(qp), conn.remote_qpn, conn.mtu_bytes,
                (conn.flags & CONDUIT_CM_SELECTIVE_REPEAT) ? 1 : 0, a.state, ms,
                reinterpret_cast<const char*>(conn.private_data));
    if (int d = conduit_disconnect(qp); d < 0) return die("conduit_disconnect", d);
    conduit_close(ctx);
    return 0;
  }
  std::fprintf(stderr, "usage: see the comment at the top of cm_probe.cc\n");
  return 64;
}
