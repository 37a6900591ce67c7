// CRC-32 (IEEE 802.3 / zlib: reflected polynomial 0xEDB88320) and the RoCEv2
// invariant CRC (ICRC) built on it.
//
// crc32_update() follows zlib's crc32() convention: start from 0, feed the
// previous result back in, and crc32_update(crc32_update(0, a), b) equals the
// CRC of a followed by b, so an ICRC can be continued across segments.
// The fastest available implementation is chosen per call from CPU features
// detected once at start-up: from 16 bytes on, AVX-512 (F, BW, VL, VBMI with
// VPCLMULQDQ) multiplies whole 32- or 64-byte registers straight down to the
// CRC, or else 128-bit PCLMULQDQ folds 16-byte blocks; slicing-by-8 tables
// below 16 bytes or without PCLMULQDQ. Pure functions of their arguments;
// safe from any thread. Never reads outside `data` (the AVX-512 path's masked
// loads may start before it, but the masked bytes are not accessed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace conduit::wire {

uint32_t crc32_update(uint32_t crc, std::span<const uint8_t> data);

// The individual implementations, for tests and benchmarks.
// crc32_update_clmul uses 128-bit PCLMULQDQ folding only;
// crc32_update_avx512 is crc32_update()'s AVX-512 path. Each falls back to
// the next simpler one when the CPU lacks it; crc32_avx512_available() says
// whether crc32_update_avx512 (and so crc32_update) runs the AVX-512 path.
uint32_t crc32_update_bytewise(uint32_t crc, std::span<const uint8_t> data);
uint32_t crc32_update_slice8(uint32_t crc, std::span<const uint8_t> data);
uint32_t crc32_update_clmul(uint32_t crc, std::span<const uint8_t> data);
uint32_t crc32_update_avx512(uint32_t crc, std::span<const uint8_t> data);
bool crc32_clmul_available();
bool crc32_avx512_available();

// ICRC over IPv4. The ICRC input is 8 bytes of 0xFF (the masked LRH), then the
// IPv4 header, UDP header, BTH, extension headers, payload and pad, with the
// variant fields set to all-ones: IPv4 ToS, TTL and header checksum, the UDP
// checksum, and BTH byte 4 (FECN, BECN, reserved).
inline constexpr size_t kIcrcMaskedHeaderBytes = 20 + 8 + 12;  // IPv4 + UDP + BTH

// Starts an ICRC: `ip_udp_bth` is the first 40 bytes of the IPv4 datagram
// (IPv4 header without options, UDP header, BTH), unmasked as on the wire.
// Returns a running CRC to continue with crc32_update() over the bytes after
// the BTH (extension headers, payload, pad); the final value is the ICRC.
uint32_t icrc_begin_ipv4(std::span<const uint8_t, kIcrcMaskedHeaderBytes> ip_udp_bth);

// The ICRC of an IPv4 datagram from its first byte up to (not including) the
// ICRC field, given as `first` followed by `second` (e.g. the IPv4+UDP
// headers and the UDP payload when they are not contiguous). Requires at
// least 40 bytes in all (returns 0 otherwise). Faster than icrc_begin_ipv4()
// + crc32_update() because header and payload go through one CRC stream.
// With PCLMULQDQ and SSSE3, one span of a stream length and two spans split
// after the UDP header (`first` the 28 header bytes, `second` from the BTH
// on: at least 16 bytes, or the BTH alone) mask the variant fields in
// registers, with no copy and no table tail; other splits copy the headers.
uint32_t icrc_ipv4(std::span<const uint8_t> first, std::span<const uint8_t> second = {});
namespace detail {
using IcrcStreamFn = uint32_t (*)(const uint8_t* datagram, size_t len_bytes);
// The whole-block stream icrc_ipv4() uses on this CPU, picked at start-up
// (the raw CRC register, not inverted); never null: without PCLMULQDQ and
// SSSE3 (and before static initialisation has picked) the general path,
// which takes any datagram of at least 40 bytes. Set once, before main().
// Hidden: the static libraries are position-independent, and a default-
// visibility variable would be loaded through the GOT (one more load per use).
[[gnu::visibility("hidden")]] extern IcrcStreamFn icrc_stream;
// The same for icrc_ipv6() (datagrams of at least 60 bytes).
[[gnu::visibility("hidden")]] extern IcrcStreamFn icrc6_stream;
}  // namespace detail

// icrc_ipv4() of one contiguous datagram with the dispatch inline, for the
// per-packet paths (frame build and parse): the same result.
[[gnu::always_inline]] inline uint32_t icrc_ipv4_datagram(const uint8_t* datagram,
                                                          size_t len_bytes) {
  // The stream's lengths: at least 40 bytes, (n + 4) % 16 not in 1..3.
  if (len_bytes >= 40 && ((len_bytes + 4) & 15) - 1 >= 3) {
    return ~detail::icrc_stream(datagram, len_bytes);
  }
  return icrc_ipv4(std::span<const uint8_t>(datagram, len_bytes));
}

// icrc_ipv4_datagram() for a datagram its caller knows the stream takes
// whole: at least 40 bytes and a multiple of 4 long (every RoCE datagram a
// frame builder writes: headers, payload and pad are whole words).
[[gnu::always_inline]] inline uint32_t icrc_ipv4_datagram_words(const uint8_t* datagram,
                                                                size_t len_bytes) {
  return ~detail::icrc_stream(datagram, len_bytes);
}

// The same with the table-driven CRC only (the fallback; for tests).
uint32_t icrc_ipv4_slice8(std::span<const uint8_t> first, std::span<const uint8_t> second = {});

// For tests: the ICRC of a one-span datagram through the whole-block stream
// compiled for one instruction set, whatever icrc_ipv4() would pick. False
// (and `icrc` untouched) when the CPU lacks it or the length does not suit
// the stream (under 40 bytes, or 16k + 13..15 bytes).
enum class IcrcIsa : uint8_t { kSse, kAvx, kAvx512 };
bool icrc_ipv4_with(IcrcIsa isa, std::span<const uint8_t> datagram, uint32_t& icrc);

// icrc_ipv4() of a datagram split after the UDP header (`ip_udp` its 28
// IPv4 + UDP header bytes, `rest` the BTH up to the ICRC, as parse_roce and
// the GSI parser pass them) takes a fold that shifts and masks the headers
// in registers, with no copy; this runs one instruction set's build of it.
// False (and `icrc` untouched) when the CPU lacks it or the spans do not
// suit it (`ip_udp` not 28 bytes, `rest` under 16 bytes and not exactly 12).
inline constexpr size_t kIpv4UdpBytes = 20 + 8;
bool icrc_ipv4_split_with(IcrcIsa isa, std::span<const uint8_t> ip_udp,
                          std::span<const uint8_t> rest, uint32_t& icrc);

// ICRC over IPv6 (RoCEv2 over IPv6): the same recipe with the IPv6 header's
// variant fields masked to all-ones: traffic class, flow label and hop limit
// (version, payload length, next header and the addresses are covered), then
// the UDP checksum and BTH byte 4 as for IPv4. `first` followed by `second`
// is the datagram from the IPv6 header up to (not including) the ICRC; at
// least 60 bytes in all (IPv6 + UDP + BTH), else 0. No extension headers:
// the UDP header must follow the IPv6 header. As for IPv4, one span of a
// stream length (at least 60 bytes, not 16k + 13..15) goes through the
// whole-block stream, the variant fields masked in registers; with
// PCLMULQDQ the other cases fold the headers (masked in registers, or
// gathered when they are split other than after the UDP header) straight
// into the payload's stream, and only bytes in `second` after headers
// wholly in `first` take a second CRC call.
inline constexpr size_t kIpv6IcrcMaskedHeaderBytes = 40 + 8 + 12;  // IPv6 + UDP + BTH
uint32_t icrc_ipv6(std::span<const uint8_t> first, std::span<const uint8_t> second = {});

// icrc_ipv6() of one contiguous datagram with the dispatch inline.
[[gnu::always_inline]] inline uint32_t icrc_ipv6_datagram(const uint8_t* datagram,
                                                          size_t len_bytes) {
  if (len_bytes >= 60 && ((len_bytes + 4) & 15) - 1 >= 3) {
    return ~detail::icrc6_stream(datagram, len_bytes);
  }
  return icrc_ipv6(std::span<const uint8_t>(datagram, len_bytes));
}
// icrc_ipv6_datagram() for a datagram of at least 60 bytes, a multiple of 4 long.
[[gnu::always_inline]] inline uint32_t icrc_ipv6_datagram_words(const uint8_t* datagram,
                                                                size_t len_bytes) {
  return ~detail::icrc6_stream(datagram, len_bytes);
}

// For tests, as for IPv4: the table-driven CRC only, and one instruction
// set's build of the stream (false for lengths under 60 or 16k + 13..15).
uint32_t icrc_ipv6_slice8(std::span<const uint8_t> first, std::span<const uint8_t> second = {});
bool icrc_ipv6_with(IcrcIsa isa, std::span<const uint8_t> datagram, uint32_t& icrc);

// The ICRC of a datagram of either family, by the version nibble of its
// first byte (6: icrc_ipv6_datagram, else icrc_ipv4_datagram).
[[gnu::always_inline]] inline uint32_t icrc_datagram(const uint8_t* datagram, size_t len_bytes) {
  if ((datagram[0] >> 4) == 6) return icrc_ipv6_datagram(datagram, len_bytes);
  return icrc_ipv4_datagram(datagram, len_bytes);
}

// The ICRC goes on the wire least-significant byte first.
inline void icrc_store(uint32_t icrc, uint8_t* out) {
  out[0] = static_cast<uint8_t>(icrc);
  out[1] = static_cast<uint8_t>(icrc >> 8);
  out[2] = static_cast<uint8_t>(icrc >> 16);
  out[3] = static_cast<uint8_t>(icrc >> 24);
}
inline uint32_t icrc_load(const uint8_t* in) {
  return uint32_t{in[0]} | uint32_t{in[1]} << 8 | uint32_t{in[2]} << 16 | uint32_t{in[3]} << 24;
}

}  // namespace conduit::wire
