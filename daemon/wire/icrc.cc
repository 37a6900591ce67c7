#include "wire/icrc.h"

#include <array>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <emmintrin.h>
#include <wmmintrin.h>
#define CONDUIT_WIRE_HAVE_CLMUL 1
#else
#define CONDUIT_WIRE_HAVE_CLMUL 0
#endif

namespace conduit::wire {
namespace {

constexpr uint32_t kPolyReflected = 0xEDB88320;

// kTables[0] is the classic byte table; kTables[k][i] is the CRC of byte i
// followed by k zero bytes, which lets slicing-by-8 consume 8 bytes per step.
constexpr std::array<std::array<uint32_t, 256>, 8> make_tables() {
  std::array<std::array<uint32_t, 256>, 8> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int b = 0; b < 8; ++b) c = (c >> 1) ^ ((c & 1) ? kPolyReflected : 0);
    t[0][i] = c;
  }
  for (size_t k = 1; k < 8; ++k) {
    for (uint32_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFF];
  }
  return t;
}

constexpr auto kTables = make_tables();

inline uint32_t load_le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

// The raw forms work on the internal (inverted) register state.
uint32_t raw_bytewise(uint32_t s, const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) s = (s >> 8) ^ kTables[0][(s ^ p[i]) & 0xFF];
  return s;
}

uint32_t raw_slice8(uint32_t s, const uint8_t* p, size_t n) {
  while (n >= 8) {
    const uint32_t lo = s ^ load_le32(p);
    const uint32_t hi = load_le32(p + 4);
    s = kTables[7][lo & 0xFF] ^ kTables[6][(lo >> 8) & 0xFF] ^ kTables[5][(lo >> 16) & 0xFF] ^
        kTables[4][lo >> 24] ^ kTables[3][hi & 0xFF] ^ kTables[2][(hi >> 8) & 0xFF] ^
        kTables[1][(hi >> 16) & 0xFF] ^ kTables[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  return raw_bytewise(s, p, n);
}

// Below this many bytes the table path wins (no fold setup, no final
// 16-byte tail through the table).
constexpr size_t kClmulMinBytes = 64;

#if CONDUIT_WIRE_HAVE_CLMUL
// Folding constants for the reflected polynomial (Intel, "Fast CRC
// Computation for Generic Polynomials Using PCLMULQDQ"): each is
// reflect32(x^e mod P) << 1 with e = 4*128 +/- 32 for folding 64 bytes ahead
// and e = 128 +/- 32 for folding 16 bytes ahead. Checked by recomputing them
// below at compile time.
constexpr uint64_t xpow_mod_reflected_shifted(unsigned e) {
  uint64_t v = 1;
  for (unsigned i = 0; i < e; ++i) {
    v <<= 1;
    if (v >> 32) v ^= 0x104C11DB7ull;
  }
  uint32_t r = 0;
  for (int b = 0; b < 32; ++b) r |= static_cast<uint32_t>((v >> b) & 1) << (31 - b);
  return uint64_t{r} << 1;
}
constexpr uint64_t kFold4Lo = xpow_mod_reflected_shifted(4 * 128 + 32);
constexpr uint64_t kFold4Hi = xpow_mod_reflected_shifted(4 * 128 - 32);
constexpr uint64_t kFold1Lo = xpow_mod_reflected_shifted(128 + 32);
constexpr uint64_t kFold1Hi = xpow_mod_reflected_shifted(128 - 32);
static_assert(kFold4Lo == 0x154442bd4 && kFold4Hi == 0x1c6e41596);
static_assert(kFold1Lo == 0x1751997d0 && kFold1Hi == 0x0ccaa009e);

__attribute__((target("pclmul,sse2"))) inline __m128i fold(__m128i x, __m128i k, __m128i next) {
  const __m128i lo = _mm_clmulepi64_si128(x, k, 0x00);
  const __m128i hi = _mm_clmulepi64_si128(x, k, 0x11);
  return _mm_xor_si128(_mm_xor_si128(lo, hi), next);
}

inline __m128i load128(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// Folds the message into one 128-bit value congruent to it modulo P (so
// that, placed where the folded bytes ended, it yields the same CRC), then
// finishes that value and the sub-16-byte tail with the table.
__attribute__((target("pclmul,sse2"))) uint32_t raw_clmul(uint32_t s, const uint8_t* p, size_t n) {
  // The running state enters as an XOR into the first four message bytes.
  __m128i x0 = _mm_xor_si128(load128(p), _mm_cvtsi32_si128(static_cast<int>(s)));
  __m128i x1 = load128(p + 16);
  __m128i x2 = load128(p + 32);
  __m128i x3 = load128(p + 48);
  p += 64;
  n -= 64;
  const __m128i k4 =
      _mm_set_epi64x(static_cast<long long>(kFold4Hi), static_cast<long long>(kFold4Lo));
  while (n >= 64) {
    x0 = fold(x0, k4, load128(p));
    x1 = fold(x1, k4, load128(p + 16));
    x2 = fold(x2, k4, load128(p + 32));
    x3 = fold(x3, k4, load128(p + 48));
    p += 64;
    n -= 64;
  }
  const __m128i k1 =
      _mm_set_epi64x(static_cast<long long>(kFold1Hi), static_cast<long long>(kFold1Lo));
  __m128i x = fold(x0, k1, x1);
  x = fold(x, k1, x2);
  x = fold(x, k1, x3);
  while (n >= 16) {
    x = fold(x, k1, load128(p));
    p += 16;
    n -= 16;
  }
  alignas(16) uint8_t folded[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(folded), x);
  return raw_bytewise(raw_slice8(0, folded, 16), p, n);
}
#endif

bool detect_clmul() {
#if CONDUIT_WIRE_HAVE_CLMUL
  __builtin_cpu_init();
  return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse2");
#else
  return false;
#endif
}

// Decided once at static initialisation (CPUID, no syscall).
const bool kHaveClmul = detect_clmul();

}  // namespace

bool crc32_clmul_available() { return kHaveClmul; }

uint32_t crc32_update_bytewise(uint32_t crc, std::span<const uint8_t> data) {
  return ~raw_bytewise(~crc, data.data(), data.size());
}

uint32_t crc32_update_slice8(uint32_t crc, std::span<const uint8_t> data) {
  return ~raw_slice8(~crc, data.data(), data.size());
}

uint32_t crc32_update_clmul(uint32_t crc, std::span<const uint8_t> data) {
#if CONDUIT_WIRE_HAVE_CLMUL
  if (data.size() >= kClmulMinBytes) return ~raw_clmul(~crc, data.data(), data.size());
#endif
  return crc32_update_slice8(crc, data);
}

uint32_t crc32_update(uint32_t crc, std::span<const uint8_t> data) {
#if CONDUIT_WIRE_HAVE_CLMUL
  if (data.size() >= kClmulMinBytes && kHaveClmul) {
    return ~raw_clmul(~crc, data.data(), data.size());
  }
#endif
  return ~raw_slice8(~crc, data.data(), data.size());
}

namespace {
// zlib-convention CRC of the 8 masked LRH bytes (0xFF each); rxe's seed
// 0xDEBB20E3 is the same state before the final inversion.
constexpr uint32_t prefix_crc() {
  uint32_t s = 0xFFFFFFFF;
  for (int i = 0; i < 8; ++i) s = (s >> 8) ^ kTables[0][(s ^ 0xFF) & 0xFF];
  return ~s;
}
constexpr uint32_t kLrhPrefixCrc = prefix_crc();
static_assert(~kLrhPrefixCrc == 0xDEBB20E3);
}  // namespace

uint32_t icrc_begin_ipv4(std::span<const uint8_t, kIcrcMaskedHeaderBytes> ip_udp_bth) {
  std::array<uint8_t, kIcrcMaskedHeaderBytes> masked;
  std::memcpy(masked.data(), ip_udp_bth.data(), masked.size());
  masked[1] = 0xFF;   // IPv4 ToS (DSCP + ECN)
  masked[8] = 0xFF;   // TTL
  masked[10] = 0xFF;  // header checksum
  masked[11] = 0xFF;
  masked[20 + 6] = 0xFF;  // UDP checksum
  masked[20 + 7] = 0xFF;
  masked[28 + 4] = 0xFF;  // BTH FECN, BECN, Resv6
  return crc32_update(kLrhPrefixCrc, masked);
}

uint32_t icrc_ipv4(std::span<const uint8_t> ip_datagram_without_icrc) {
  if (ip_datagram_without_icrc.size() < kIcrcMaskedHeaderBytes) return 0;
  const uint32_t crc = icrc_begin_ipv4(ip_datagram_without_icrc.first<kIcrcMaskedHeaderBytes>());
  return crc32_update(crc, ip_datagram_without_icrc.subspan(kIcrcMaskedHeaderBytes));
}

}  // namespace conduit::wire
