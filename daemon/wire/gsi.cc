#include "wire/gsi.h"

#include <cstring>

#include "wire/byte_order.h"
#include "wire/icrc.h"

namespace conduit::wire {
namespace {
constexpr size_t kIpUdp = 28;   // IPv4 (no options) + UDP
constexpr size_t kIp6Udp = 48;  // IPv6 (no extension headers) + UDP
constexpr size_t kBth = 12;
constexpr size_t kIcrc = 4;
}  // namespace

const char* gsi_drop_name(GsiDrop d) {
  switch (d) {
    case GsiDrop::kNone:
      return "none";
    case GsiDrop::kTooShort:
      return "too short";
    case GsiDrop::kIcrc:
      return "ICRC";
    case GsiDrop::kHeader:
      return "not a GSI UD SEND_ONLY";
    case GsiDrop::kQkey:
      return "Q_Key";
  }
  return "?";
}

GsiDrop parse_gsi(std::span<const uint8_t> ip_udp, std::span<const uint8_t> payload,
                  std::span<const uint8_t>& mad, uint32_t& src_qp) {
  const bool v6 = !ip_udp.empty() && (ip_udp[0] >> 4) == 6;
  const size_t ip_udp_bytes = v6 ? kIp6Udp : kIpUdp;
  if (ip_udp.size() < ip_udp_bytes || payload.size() < kGsiPacketBytes + kIcrc) {
    return GsiDrop::kTooShort;
  }
  const size_t n = payload.size();
  const auto headers = ip_udp.first(ip_udp_bytes);
  const auto packet = payload.first(n - kIcrc);
  const uint32_t icrc = v6 ? icrc_ipv6(headers, packet) : icrc_ipv4(headers, packet);
  if (icrc != icrc_load(payload.data() + n - kIcrc)) return GsiDrop::kIcrc;
  const uint8_t* b = payload.data();
  const size_t pad = (b[1] >> 4) & 0x3;
  if (b[0] != kOpUdSendOnly || (b[1] & 0x0F) != 0 || (get_be16(b + 2) & 0x7FFF) != 0x7FFF ||
      get_be24(b + 5) != kGsiQpn || n - kIcrc - pad < kGsiPacketBytes) {
    return GsiDrop::kHeader;
  }
  if (get_be32(b + kBth) != kGsiQkeyValue) return GsiDrop::kQkey;
  src_qp = get_be24(b + kBth + 5);
  mad = payload.subspan(kBth + kDethBytes, kGsiMadBytes);
  return GsiDrop::kNone;
}

void write_gsi_packet(uint8_t* out, uint32_t psn, const uint8_t* mad) {
  std::memset(out, 0, kBth + kDethBytes);
  out[0] = kOpUdSendOnly;
  put_be16(out + 2, 0xFFFF);
  put_be24(out + 5, kGsiQpn);
  put_be24(out + 9, psn & 0xFFFFFF);
  put_be32(out + kBth, kGsiQkeyValue);
  put_be24(out + kBth + 5, kGsiQpn);
  std::memcpy(out + kBth + kDethBytes, mad, kGsiMadBytes);
}

void finish_gsi_icrc(uint8_t* ip) {
  const size_t len = ((ip[0] >> 4) == 6 ? kIp6Udp : kIpUdp) + kGsiPacketBytes;
  icrc_store(icrc_datagram(ip, len), ip + len);
}

}  // namespace conduit::wire
