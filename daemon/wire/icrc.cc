#include "wire/icrc.h"

#include <algorithm>
#include <array>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
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

// From this many bytes on, the carry-less-multiply path is used.
constexpr size_t kClmulMinBytes = 16;

#if CONDUIT_WIRE_HAVE_CLMUL
// Constants for the reflected polynomial, after Intel's "Fast CRC Computation
// for Generic Polynomials Using PCLMULQDQ". Folding a 128-bit value D bits
// ahead multiplies its two halves by reflect32(x^(D+32) mod P) << 1 and
// reflect32(x^(D-32) mod P) << 1; they are computed here at compile time
// and pinned to the published values.
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
struct FoldConstants {
  uint64_t lo, hi;
};
constexpr FoldConstants fold_constants(unsigned distance_bits) {
  return {xpow_mod_reflected_shifted(distance_bits + 32),
          xpow_mod_reflected_shifted(distance_bits - 32)};
}
constexpr FoldConstants kFold2048 = fold_constants(2048);
constexpr FoldConstants kFold1536 = fold_constants(1536);
constexpr FoldConstants kFold1024 = fold_constants(1024);
constexpr FoldConstants kFold512 = fold_constants(512);
constexpr FoldConstants kFold384 = fold_constants(384);
constexpr FoldConstants kFold256 = fold_constants(256);
constexpr FoldConstants kFold128 = fold_constants(128);
static_assert(kFold512.lo == 0x154442bd4 && kFold512.hi == 0x1c6e41596);
static_assert(kFold128.lo == 0x1751997d0 && kFold128.hi == 0x0ccaa009e);
// The polynomial P, bit-reflected (33 bits), for Barrett reduction.
constexpr uint64_t kBarrettPoly = 0x1DB710641;
// floor(x^e / P) for e < 96 (bit i = coefficient of x^i), and its 64-bit
// bit reflection.
constexpr uint64_t poly_quotient_xpow(unsigned e) {
  uint64_t q = 0;
  uint64_t r = 1;
  for (unsigned i = 0; i < e; ++i) {
    r <<= 1;
    q <<= 1;
    if (r >> 32) {
      r ^= 0x104C11DB7ull;
      q |= 1;
    }
  }
  return q;
}
static_assert(poly_quotient_xpow(64) == 0x104D101DFull);  // Intel's mu for 64-bit Barrett
constexpr uint64_t reflect64(uint64_t v) {
  uint64_t r = 0;
  for (int b = 0; b < 64; ++b) r |= ((v >> b) & 1) << (63 - b);
  return r;
}
// Barrett from 96 bits: with T the 96-bit value in bits 0..95 (T_hi = its
// low qword), q = floor(T_hi * floor(x^95 / P) / x^63) is the quotient, and
// T + q * P leaves the remainder in dword 2. floor(x^95 / P) has degree 63,
// so it fits one 64-bit multiply and q comes out aligned in the low qword.
constexpr uint64_t kBarrett96Mu = reflect64(poly_quotient_xpow(95));

#define CONDUIT_CLMUL __attribute__((target("pclmul,sse2")))

CONDUIT_CLMUL inline __m128i constants(FoldConstants k) {
  return _mm_set_epi64x(static_cast<long long>(k.hi), static_cast<long long>(k.lo));
}

CONDUIT_CLMUL inline __m128i fold(__m128i x, __m128i k) {
  return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

inline __m128i load128(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// Barrett from 96 bits (see kBarrett96Mu) to the 32-bit CRC register.
CONDUIT_CLMUL inline uint32_t barrett96(__m128i x) {
  const __m128i k =
      _mm_set_epi64x(static_cast<long long>(kBarrettPoly), static_cast<long long>(kBarrett96Mu));
  const __m128i q = _mm_clmulepi64_si128(x, k, 0x00);
  // Dword 2 as a vector element, not _mm_extract_epi32: one pextrd where the
  // caller has SSE4.1 (AVX), a shuffle and a move where it has only SSSE3.
  return static_cast<uint32_t>(
      reinterpret_cast<__v4si>(_mm_xor_si128(x, _mm_clmulepi64_si128(q, k, 0x10)))[2]);
}

// Reduces a 128-bit remainder (congruent to the message so far) to the
// 32-bit CRC register: the low half times x^(128-32), added to the high half
// (which also appends 32 zero bits), is 96 bits for Barrett.
CONDUIT_CLMUL inline uint32_t reduce128(__m128i x) {
  return barrett96(
      _mm_xor_si128(_mm_clmulepi64_si128(x, constants(kFold128), 0x10), _mm_srli_si128(x, 8)));
}

// Folds the < 64 remaining whole 16-byte blocks into x with independent
// multiplies (x by the whole distance, each block by its own), so a short
// message costs one multiply latency instead of a chain.
CONDUIT_CLMUL inline __m128i fold_blocks(__m128i x, const uint8_t* p, size_t blocks) {
  switch (blocks) {
    case 3:
      x = _mm_xor_si128(
          _mm_xor_si128(fold(x, constants(kFold384)), fold(load128(p), constants(kFold256))),
          _mm_xor_si128(fold(load128(p + 16), constants(kFold128)), load128(p + 32)));
      break;
    case 2:
      x = _mm_xor_si128(
          _mm_xor_si128(fold(x, constants(kFold256)), fold(load128(p), constants(kFold128))),
          load128(p + 16));
      break;
    case 1:
      x = _mm_xor_si128(fold(x, constants(kFold128)), load128(p));
      break;
    default:
      break;
  }
  return x;
}
// The same, advancing p and n past the whole blocks (to the < 16-byte tail).
CONDUIT_CLMUL inline __m128i fold_tail_blocks(__m128i x, const uint8_t*& p, size_t& n) {
  x = fold_blocks(x, p, n / 16);
  p += n & ~size_t{15};
  n &= 15;
  return x;
}

bool detect_vpclmul();
// Decided once at static initialisation (CPUID, no syscall).
const bool kHaveVpclmul = detect_vpclmul();
// From one 64-byte register on, AVX-512 folding beats 128-bit lanes.
constexpr size_t kVpclmulMinBytes = 64;

#define CONDUIT_VPCLMUL __attribute__((target("avx512f,vpclmulqdq,pclmul,sse2")))

// The same (lo, hi) constant pair in all four 128-bit lanes. (Spelled out:
// _mm512_broadcast_i32x4 trips GCC 12's -Wuninitialized.)
CONDUIT_VPCLMUL inline __m512i constants4(FoldConstants k) {
  const auto lo = static_cast<long long>(k.lo);
  const auto hi = static_cast<long long>(k.hi);
  return _mm512_set_epi64(hi, lo, hi, lo, hi, lo, hi, lo);
}

// 128-bit lane I of x. The zero-masking extract: the plain one trips a false
// -Wuninitialized in GCC 12 (its builtin starts from an undefined vector).
template <int I>
CONDUIT_VPCLMUL inline __m128i lane(__m512i x) {
  return _mm512_maskz_extracti32x4_epi32(0xF, x, I);
}

CONDUIT_VPCLMUL inline __m512i fold512(__m512i x, __m512i k, __m512i next) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00),
                                   _mm512_clmulepi64_epi128(x, k, 0x11), next, 0x96);
}

// n >= 64 (kVpclmulMinBytes; the four-register rounds start at 256). Consumes
// 64-byte blocks (four 128-bit lanes per register, four registers per 256-byte
// round) until fewer than 64 bytes remain; returns the 128-bit remainder of
// everything consumed. `carry_in` (128 bits) is
// XORed into the first block: the running CRC register, or the remainder of
// earlier data moved one block ahead.
CONDUIT_VPCLMUL __m128i fold_bulk_avx512(__m128i carry_in, const uint8_t*& p, size_t& n) {
  const __m512i k512 = constants4(kFold512);
  __m512i a = _mm512_xor_si512(_mm512_loadu_si512(p), _mm512_zextsi128_si512(carry_in));
  p += 64;
  n -= 64;
  if (n >= 192) {
    const __m512i k2048 = constants4(kFold2048);
    __m512i a1 = _mm512_loadu_si512(p);
    __m512i a2 = _mm512_loadu_si512(p + 64);
    __m512i a3 = _mm512_loadu_si512(p + 128);
    p += 192;
    n -= 192;
    while (n >= 256) {
      a = fold512(a, k2048, _mm512_loadu_si512(p));
      a1 = fold512(a1, k2048, _mm512_loadu_si512(p + 64));
      a2 = fold512(a2, k2048, _mm512_loadu_si512(p + 128));
      a3 = fold512(a3, k2048, _mm512_loadu_si512(p + 192));
      p += 256;
      n -= 256;
    }
    // Join the registers: each lane of a is 3 x 512 bits before the same lane of a3.
    a = fold512(a, constants4(kFold1536),
                fold512(a1, constants4(kFold1024), fold512(a2, k512, a3)));
  }
  while (n >= 64) {
    a = fold512(a, k512, _mm512_loadu_si512(p));
    p += 64;
    n -= 64;
  }
  // Join the four lanes: lane i is (3 - i) blocks before lane 3.
  const __m512i klanes = _mm512_set_epi64(
      0, 0, static_cast<long long>(kFold128.hi), static_cast<long long>(kFold128.lo),
      static_cast<long long>(kFold256.hi), static_cast<long long>(kFold256.lo),
      static_cast<long long>(kFold384.hi), static_cast<long long>(kFold384.lo));
  const __m512i t = fold512(a, klanes, _mm512_setzero_si512());  // lane 3 becomes 0
  return _mm_xor_si128(_mm_xor_si128(lane<0>(t), lane<1>(t)),
                       _mm_xor_si128(lane<2>(t), lane<3>(a)));
}

// Continues from `x`, a 128-bit remainder of everything before p (any n):
// AVX-512 for long runs, else four 128-bit lanes per 64 bytes, then the
// remaining whole blocks. Leaves p and n at the < 16-byte tail. raw_clmul_from
// adds the reduction to 32 bits and the tail through the table. Both always
// inlined: out of line (GCC 12's choice once the short ICRC stream stopped
// using fold_blocks) p and n go through memory, ~40 instructions more a KiB.
template <bool kUseAvx512>
[[gnu::always_inline]] CONDUIT_CLMUL inline __m128i fold_from(__m128i x, const uint8_t*& p,
                                                              size_t& n) {
  const __m128i k128 = constants(kFold128);
  if (kUseAvx512 && n >= kVpclmulMinBytes) {
    // x sits just before p: move it one block ahead, onto p's first block.
    x = fold_bulk_avx512(fold(x, k128), p, n);
  } else if (n >= 64) {
    x = _mm_xor_si128(fold(x, k128), load128(p));
    __m128i x1 = load128(p + 16);
    __m128i x2 = load128(p + 32);
    __m128i x3 = load128(p + 48);
    p += 64;
    n -= 64;
    const __m128i k512 = constants(kFold512);
    while (n >= 64) {
      x = _mm_xor_si128(fold(x, k512), load128(p));
      x1 = _mm_xor_si128(fold(x1, k512), load128(p + 16));
      x2 = _mm_xor_si128(fold(x2, k512), load128(p + 32));
      x3 = _mm_xor_si128(fold(x3, k512), load128(p + 48));
      p += 64;
      n -= 64;
    }
    x = _mm_xor_si128(_mm_xor_si128(fold(x, constants(kFold384)), fold(x1, constants(kFold256))),
                      _mm_xor_si128(fold(x2, k128), x3));
  }
  return fold_tail_blocks(x, p, n);
}

template <bool kUseAvx512>
[[gnu::always_inline]] CONDUIT_CLMUL inline uint32_t raw_clmul_from(__m128i x, const uint8_t* p,
                                                                    size_t n) {
  x = fold_from<kUseAvx512>(x, p, n);
  const uint32_t r = reduce128(x);
  return n == 0 ? r : raw_slice8(r, p, n);
}

// n >= 16, 128-bit lanes only (crc32_update's path without AVX-512; its
// AVX-512 path is raw_crc_avx512 below). The running register enters as an
// XOR into the first four bytes.
CONDUIT_CLMUL uint32_t raw_clmul(uint32_t s, const uint8_t* p, size_t n) {
  const __m128i reg = _mm_cvtsi32_si128(static_cast<int>(s));
  return raw_clmul_from<false>(_mm_xor_si128(load128(p), reg), p + 16, n - 16);
}

// The ICRC's first three 16-byte blocks straight from the (unmasked) datagram
// at `head`, with the variant fields forced to ones in registers, then n
// bytes from p, in one fold stream. Masking in registers instead of in a
// copy avoids store-to-load forwarding stalls on the copy.
CONDUIT_CLMUL uint32_t raw_clmul_icrc_head48(uint32_t s, const uint8_t* head, const uint8_t* p,
                                             size_t n) {
  // Bytes 1 (ToS), 8 (TTL), 10-11 (IP checksum); 26-27 (UDP checksum); 32 (BTH byte 4).
  const __m128i m0 = _mm_setr_epi8(0, -1, 0, 0, 0, 0, 0, 0, -1, 0, -1, -1, 0, 0, 0, 0);
  const __m128i m1 = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, -1, 0, 0, 0, 0);
  const __m128i m2 = _mm_setr_epi8(-1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m128i h0 =
      _mm_xor_si128(_mm_or_si128(load128(head), m0), _mm_cvtsi32_si128(static_cast<int>(s)));
  const __m128i h1 = _mm_or_si128(load128(head + 16), m1);
  const __m128i h2 = _mm_or_si128(load128(head + 32), m2);
  const __m128i x = _mm_xor_si128(
      _mm_xor_si128(fold(h0, constants(kFold256)), fold(h1, constants(kFold128))), h2);
  return kHaveVpclmul ? raw_clmul_from<true>(x, p, n) : raw_clmul_from<false>(x, p, n);
}

// The raw ICRC register of an IPv6 datagram whose first 60 bytes (IPv6, UDP,
// BTH) are h0..h3 (unmasked, as loaded from datagram bytes 0, 12, 28 and 44),
// then n bytes from p, in one fold stream: the IPv6 counterpart of
// raw_clmul_icrc_head48. By the identity the block stream below spells out
// (the ICRC is the raw CRC, from register 0, of 4 x 0xFF and the masked
// datagram), the 4 + 60 header bytes are exactly four blocks: block 0 is the
// datagram's first 12 bytes behind four 0xFF, and the variant fields
// (traffic class, flow label, hop limit; UDP checksum; BTH byte 4) are
// forced to ones in registers.
CONDUIT_CLMUL inline uint32_t raw_clmul_icrc6_blocks(__m128i h0, __m128i h1, __m128i h2, __m128i h3,
                                                     const uint8_t* p, size_t n) {
  // Block 0: the four 0xFF; datagram byte 0's low nibble (traffic class, high nibble),
  // bytes 1-3 (traffic class, flow label) and 7 (hop limit), at 4 + offset.
  const __m128i m0 = _mm_setr_epi8(-1, -1, -1, -1, 0x0F, -1, -1, -1, 0, 0, 0, -1, 0, 0, 0, 0);
  // Block 3 (datagram bytes 44-59): the UDP checksum (46-47) and BTH byte 4 (52).
  const __m128i m3 = _mm_setr_epi8(0, 0, -1, -1, 0, 0, 0, 0, -1, 0, 0, 0, 0, 0, 0, 0);
  const __m128i b0 = _mm_or_si128(_mm_slli_si128(h0, 4), m0);
  const __m128i b3 = _mm_or_si128(h3, m3);
  const __m128i x =
      _mm_xor_si128(_mm_xor_si128(fold(b0, constants(kFold384)), fold(h1, constants(kFold256))),
                    _mm_xor_si128(fold(h2, constants(kFold128)), b3));
  return kHaveVpclmul ? raw_clmul_from<true>(x, p, n) : raw_clmul_from<false>(x, p, n);
}

// The same with the 60 header bytes at `head`.
CONDUIT_CLMUL uint32_t raw_clmul_icrc6_head60(const uint8_t* head, const uint8_t* p, size_t n) {
  return raw_clmul_icrc6_blocks(load128(head), load128(head + 12), load128(head + 28),
                                load128(head + 44), p, n);
}

// The same with the IPv6 and UDP headers (48 bytes) at `ip_udp` and the BTH
// and the rest (n >= 12 bytes) at p, apart (parse_roce's and the GSI
// parser's two spans): block 3 is assembled in registers from the headers'
// last 4 bytes and the BTH, so the stream needs no copy of the headers.
CONDUIT_CLMUL uint32_t raw_clmul_icrc6_split48(const uint8_t* ip_udp, const uint8_t* p, size_t n) {
  uint32_t udp_tail;  // UDP length and checksum (datagram bytes 44-47)
  uint64_t bth_lo;    // BTH bytes 0-7
  uint32_t bth_hi;    // BTH bytes 8-11
  std::memcpy(&udp_tail, ip_udp + 44, 4);
  std::memcpy(&bth_lo, p, 8);
  std::memcpy(&bth_hi, p + 8, 4);
  const __m128i bth = _mm_unpacklo_epi64(_mm_cvtsi64_si128(static_cast<long long>(bth_lo)),
                                         _mm_cvtsi32_si128(static_cast<int>(bth_hi)));
  const __m128i h3 =
      _mm_or_si128(_mm_slli_si128(bth, 4), _mm_cvtsi32_si128(static_cast<int>(udp_tail)));
  return raw_clmul_icrc6_blocks(load128(ip_udp), load128(ip_udp + 12), load128(ip_udp + 28), h3,
                                p + 12, n - 12);
}

// The ICRC of a datagram in one span as whole 16-byte blocks, with no copy,
// no table step and no read outside the datagram. The ICRC is the zlib CRC
// (register starts at ~0) of 8 x 0xFF then the masked datagram. Starting from
// ~0 is the same as starting from 0 with ~0 XORed into the first four bytes,
// which turns them to zero; and zero bytes in front of a zero register change
// nothing. So the ICRC is the raw CRC, from register 0, of
//   z zero bytes, 4 x 0xFF, the masked datagram
// for any z: z in 0..12 makes the stream whole blocks for every datagram
// length except 16k + 13..15 bytes (never a RoCE frame: those are multiples
// of 4). For the others z = 12 - n % 16, so the stream has n / 16 + 1
// blocks and block 1 starts at byte n % 16: everything follows from n with
// no dependent arithmetic. Block 0 is one shuffled load of the datagram's
// first bytes; the 0xFF bytes and the variant fields come from a table of OR
// masks by n % 16.
//
// IPv6 datagrams take the same stream (icrc6_stream_*): their variant fields
// reach datagram byte 52, so block 4 has OR masks too, and the datagram is at
// least 60 bytes (four blocks).
constexpr bool icrc_variant_byte(size_t offset) {
  // IPv4 ToS, TTL, header checksum; UDP checksum; BTH byte 4.
  return offset == 1 || offset == 8 || offset == 10 || offset == 11 || offset == 26 ||
         offset == 27 || offset == 32;
}
// The bits of datagram byte `offset` the ICRC takes as ones over IPv6.
constexpr uint8_t icrc6_variant_bits(size_t offset) {
  if (offset == 0) return 0x0F;  // traffic class, high nibble (the version is covered)
  // Traffic class (low nibble) and flow label, hop limit; UDP checksum; BTH byte 4.
  const bool all = offset == 1 || offset == 2 || offset == 3 || offset == 7 || offset == 46 ||
                   offset == 47 || offset == 52;
  return all ? 0xFF : 0;
}

// 128 bytes, so that the index is one shift.
struct alignas(128) StreamMasks {
  alignas(16) std::array<uint8_t, 16> shuffle;  // block 0 from a load at byte 0
  // OR masks of blocks 0..4 (block 4's: IPv6 only).
  alignas(16) std::array<std::array<uint8_t, 16>, 5> ones;
};

// Short streams (3..7 blocks) take each block straight to 96 bits and reduce
// once: a block j blocks before the stream's last one times x^(128 j + 96)
// mod P (its high-degree qword) and x^(128 j + 32) mod P (the other), the
// kFinalLanes form below, gives 96-bit values whose sum is congruent to
// stream * x^32, and barrett96 ends it. All multiplies are independent.
constexpr FoldConstants to96_constants(unsigned blocks_before_last) {
  return fold_constants(128 * blocks_before_last + 64);
}
static_assert(to96_constants(0).lo == kFold128.hi);  // x^96, as reduce128's first step

// For a stream of 4 + r blocks (r = 0..3): the multipliers of blocks 0..3,
// then of the three blocks that end the stream. Those three are read for
// every r (they are blocks 1..3 at the least, so inside the datagram); the
// ones that are also among blocks 0..3 get zero and add nothing. So every
// short frame runs the same code, with no branch on r.
struct alignas(128) ShortStream {
  std::array<FoldConstants, 7> k;
};

// One table, one base register (to96 first: its index then needs no offset).
struct StreamTables {
  std::array<ShortStream, 7> to96;    // by n / 16, 3..6 (4..7 blocks; 0..2 unused)
  std::array<StreamMasks, 16> masks;  // by n % 16 (13..15 are not stream lengths)
};

// The masks of every z for one family (ipv6: icrc6_variant_bits).
constexpr std::array<StreamMasks, 16> make_stream_masks(bool ipv6) {
  std::array<StreamMasks, 16> masks{};
  for (size_t z = 0; z <= 12; ++z) {
    StreamMasks& m = masks[12 - z];
    for (size_t j = 0; j < 16; ++j) {
      m.shuffle[j] = j >= z + 4 ? static_cast<uint8_t>(j - z - 4) : 0x80;  // 0x80: zero
    }
    for (size_t k = 0; k < (ipv6 ? 5 : 4); ++k) {
      for (size_t j = 0; j < 16; ++j) {
        const size_t pos = 16 * k + j;
        if (pos < z) continue;
        if (pos < z + 4) {
          m.ones[k][j] = 0xFF;
        } else if (ipv6) {
          m.ones[k][j] = icrc6_variant_bits(pos - z - 4);
        } else {
          m.ones[k][j] = icrc_variant_byte(pos - z - 4) ? 0xFF : 0;
        }
      }
    }
  }
  return masks;
}

constexpr StreamTables make_stream_tables() {
  StreamTables t{};
  t.masks = make_stream_masks(false);
  for (unsigned r = 0; r < 4; ++r) {
    ShortStream& k = t.to96[3 + r];
    for (unsigned i = 0; i < 4; ++i) k.k[i] = to96_constants(3 + r - i);
    for (unsigned e = 0; e < 3; ++e) {
      const unsigned j = 2 - e;  // blocks before the last
      k.k[4 + e] = j < r ? to96_constants(j) : FoldConstants{0, 0};
    }
  }
  return t;
}

constexpr auto kStreamTables = make_stream_tables();

// IPv6: short streams are 4..8 blocks (60..127 bytes). For 5..8 blocks
// (n / 16 = 4..7) the multipliers of blocks 0..4 (read and masked as the
// headers), then of the three blocks that end the stream, zero for the ones
// also among blocks 0..4: as ShortStream, with one head block more.
struct alignas(128) ShortStream6 {
  std::array<FoldConstants, 8> k;
};
struct Stream6Tables {
  std::array<ShortStream6, 8> to96;   // by n / 16, 4..7 (5..8 blocks; 0..3 unused)
  std::array<StreamMasks, 16> masks;  // by n % 16 (13..15 are not stream lengths)
};
constexpr Stream6Tables make_stream6_tables() {
  Stream6Tables t{};
  t.masks = make_stream_masks(true);
  for (unsigned r = 0; r < 4; ++r) {  // 5 + r blocks
    ShortStream6& k = t.to96[4 + r];
    for (unsigned i = 0; i < 5; ++i) k.k[i] = to96_constants(4 + r - i);
    for (unsigned e = 0; e < 3; ++e) {
      const unsigned j = 2 - e;  // blocks before the last
      k.k[5 + e] = j < r ? to96_constants(j) : FoldConstants{0, 0};
    }
  }
  return t;
}
constexpr auto kStream6Tables = make_stream6_tables();
static_assert(kStream6Tables.masks[12].ones[0][4] == 0x0F);  // n = 60: byte 0 right after the 0xFF
static_assert(kStream6Tables.masks[0].ones[4][4] == 0xFF);   // n = 16k: byte 52 in block 4

// A datagram length the block stream handles: at least 40 bytes (IPv6: 60),
// and (n + 4) % 16 not in 1..3.
constexpr bool stream_length_ok(size_t n) { return n >= 40 && ((n + 4) & 15) - 1 >= 3; }
constexpr bool stream6_length_ok(size_t n) { return n >= 60 && ((n + 4) & 15) - 1 >= 3; }

#define CONDUIT_CLMUL_SSSE3 __attribute__((target("pclmul,ssse3,sse2")))

inline __m128i load_aligned(const std::array<uint8_t, 16>& a) {
  return _mm_load_si128(reinterpret_cast<const __m128i*>(a.data()));
}
inline __m128i load_constants(const FoldConstants& k) {
  return _mm_load_si128(reinterpret_cast<const __m128i*>(&k));
}

// The stream's part after block 3 when 64 bytes or more are left: out of
// line, so that the short frames' path keeps its pointer and length in
// registers (the long path passes them by reference).
template <bool kUseAvx512>
[[gnu::noinline]] CONDUIT_CLMUL uint32_t raw_icrc_stream_long(__m128i x, const uint8_t* p,
                                                              size_t left) {
  return reduce128(fold_from<kUseAvx512>(x, p, left));
}

// The IPv6 stream's part after block 2 (see raw_icrc_stream): blocks 3 and 4
// carry masks, and the short path runs to 8 blocks, a SEND with 64 bytes of
// payload (124 bytes).
template <bool kUseAvx512>
[[gnu::always_inline]] CONDUIT_CLMUL_SSSE3 inline uint32_t raw_icrc6_stream_rest(
    const uint8_t* d, size_t n, const StreamMasks& m, const uint8_t* p, __m128i b0, __m128i b1,
    __m128i b2) {
  const __m128i b3 = _mm_or_si128(load128(p + 32), load_aligned(m.ones[3]));
  if (n < 64) {  // 4 blocks: the headers alone (60 bytes)
    return barrett96(_mm_xor_si128(_mm_xor_si128(fold(b0, constants(to96_constants(3))),
                                                 fold(b1, constants(to96_constants(2)))),
                                   _mm_xor_si128(fold(b2, constants(to96_constants(1))),
                                                 fold(b3, constants(to96_constants(0))))));
  }
  const __m128i b4 = _mm_or_si128(load128(p + 48), load_aligned(m.ones[4]));
  if (n < 128) {  // 5..8 blocks
    const ShortStream6& t = kStream6Tables.to96[n / 16];
    const uint8_t* end = d + n;
    const __m128i h = _mm_xor_si128(
        _mm_xor_si128(fold(b0, load_constants(t.k[0])), fold(b1, load_constants(t.k[1]))),
        _mm_xor_si128(
            _mm_xor_si128(fold(b2, load_constants(t.k[2])), fold(b3, load_constants(t.k[3]))),
            fold(b4, load_constants(t.k[4]))));
    const __m128i e = _mm_xor_si128(_mm_xor_si128(fold(load128(end - 48), load_constants(t.k[5])),
                                                  fold(load128(end - 32), load_constants(t.k[6]))),
                                    fold(load128(end - 16), load_constants(t.k[7])));
    return barrett96(_mm_xor_si128(h, e));
  }
  const __m128i x = _mm_xor_si128(
      _mm_xor_si128(fold(b0, constants(kFold512)), fold(b1, constants(kFold384))),
      _mm_xor_si128(_mm_xor_si128(fold(b2, constants(kFold256)), fold(b3, constants(kFold128))),
                    b4));
  return raw_icrc_stream_long<kUseAvx512>(x, p + 64, n - (n & 15) - 64);
}

// The raw CRC register at the end of the stream (the ICRC before inversion).
// Always inlined into the per-ISA entry points below, so the same code is
// also compiled with VEX encoding (three-operand: no register copies).
// kIpv6: the IPv6 stream (n >= 60).
template <bool kUseAvx512, bool kIpv6 = false>
[[gnu::always_inline]] CONDUIT_CLMUL_SSSE3 inline uint32_t raw_icrc_stream(const uint8_t* d,
                                                                           size_t n) {
  const size_t k = n & 15;  // 12 - z
  const StreamMasks& m = (kIpv6 ? kStream6Tables.masks : kStreamTables.masks)[k];
  const __m128i b0 =
      _mm_or_si128(_mm_shuffle_epi8(load128(d), load_aligned(m.shuffle)), load_aligned(m.ones[0]));
  const uint8_t* p = d + k;  // block 1
  const __m128i b1 = _mm_or_si128(load128(p), load_aligned(m.ones[1]));
  const __m128i b2 = _mm_or_si128(load128(p + 16), load_aligned(m.ones[2]));
  if constexpr (kIpv6) return raw_icrc6_stream_rest<kUseAvx512>(d, n, m, p, b0, b1, b2);
  if (n < 48) {  // 3 blocks: a 40..44-byte ACK or NAK
    return barrett96(_mm_xor_si128(_mm_xor_si128(fold(b0, constants(to96_constants(2))),
                                                 fold(b1, constants(to96_constants(1)))),
                                   fold(b2, constants(to96_constants(0)))));
  }
  const __m128i b3 = _mm_or_si128(load128(p + 32), load_aligned(m.ones[3]));
  if (n < 112) {  // 4..7 blocks
    const ShortStream& t = kStreamTables.to96[n / 16];
    const uint8_t* end = d + n;
    const __m128i h = _mm_xor_si128(
        _mm_xor_si128(fold(b0, load_constants(t.k[0])), fold(b1, load_constants(t.k[1]))),
        _mm_xor_si128(fold(b2, load_constants(t.k[2])), fold(b3, load_constants(t.k[3]))));
    const __m128i e = _mm_xor_si128(_mm_xor_si128(fold(load128(end - 48), load_constants(t.k[4])),
                                                  fold(load128(end - 32), load_constants(t.k[5]))),
                                    fold(load128(end - 16), load_constants(t.k[6])));
    return barrett96(_mm_xor_si128(h, e));
  }
  const __m128i x =
      _mm_xor_si128(_mm_xor_si128(fold(b0, constants(kFold384)), fold(b1, constants(kFold256))),
                    _mm_xor_si128(fold(b2, constants(kFold128)), b3));
  return raw_icrc_stream_long<kUseAvx512>(x, p + 48, n - k - 48);
}

CONDUIT_CLMUL_SSSE3 uint32_t icrc_stream_sse(const uint8_t* d, size_t n) {
  return raw_icrc_stream<false>(d, n);
}
__attribute__((target("avx,pclmul,ssse3,sse2"))) uint32_t icrc_stream_avx(const uint8_t* d,
                                                                          size_t n) {
  return raw_icrc_stream<false>(d, n);
}
__attribute__((target("avx512f,vpclmulqdq,avx,pclmul,ssse3,sse2"))) uint32_t icrc_stream_avx512(
    const uint8_t* d, size_t n) {
  return raw_icrc_stream<true>(d, n);
}
// The same for IPv6 datagrams.
CONDUIT_CLMUL_SSSE3 uint32_t icrc6_stream_sse(const uint8_t* d, size_t n) {
  return raw_icrc_stream<false, true>(d, n);
}
__attribute__((target("avx,pclmul,ssse3,sse2"))) uint32_t icrc6_stream_avx(const uint8_t* d,
                                                                           size_t n) {
  return raw_icrc_stream<false, true>(d, n);
}
__attribute__((target("avx512f,vpclmulqdq,avx,pclmul,ssse3,sse2"))) uint32_t icrc6_stream_avx512(
    const uint8_t* d, size_t n) {
  return raw_icrc_stream<true, true>(d, n);
}

// An IPv4 datagram split after the UDP header (parse_roce's two spans when
// the headers are apart, and the GSI parser's): the 28 header bytes at
// `ip_udp`, then the m bytes from the BTH on at b, in another buffer. By the
// identity above the stream is 4 x 0xFF, the 28 header bytes (two blocks,
// h0 and h1) and the m bytes, behind 16 - m % 16 zero bytes (a whole zero
// block when m % 16 is 0) so that it ends on a whole block: with e = m % 16,
// the blocks are h0's first e bytes (behind zeros), h0's last 16 - e and
// h1's first e, h1's last 16 - e and b's first e, then whole blocks from
// b + e. The headers are shifted into place in registers (byte shuffles
// with controls from one table by e) and their variant fields ORed to ones
// there, so nothing is copied and no length has a table tail. m is 16 or
// more, or exactly 12 (a BTH alone).
//
// Shuffle controls: from kSplitPlace + e, a register's first e bytes moved
// to its end (zeros before); from kSplitPlace + 16 + e, its last 16 - e
// bytes moved to its front (zeros after). 0x80 selects a zero. 48 bytes in
// one cache line.
constexpr std::array<uint8_t, 48> make_split_place() {
  std::array<uint8_t, 48> t{};
  for (size_t i = 0; i < t.size(); ++i)
    t[i] = i >= 16 && i < 32 ? static_cast<uint8_t>(i - 16) : 0x80;
  return t;
}
alignas(64) constexpr auto kSplitPlace = make_split_place();

template <bool kUseAvx512>
[[gnu::always_inline]] CONDUIT_CLMUL_SSSE3 inline uint32_t raw_icrc_split28(const uint8_t* ip_udp,
                                                                            const uint8_t* b,
                                                                            size_t m) {
  // h0: the four 0xFF, then header bytes 0..11 with 1 (ToS), 8 (TTL) and
  // 10-11 (IP checksum) at 4 + offset; h1: bytes 12..27, the UDP checksum
  // (26-27) at 14-15; b0: b's first 16 bytes (12 when m is 12), BTH byte 4.
  const __m128i m0 = _mm_setr_epi8(-1, -1, -1, -1, 0, -1, 0, 0, 0, 0, 0, 0, -1, 0, -1, -1);
  const __m128i m1 = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, -1);
  const __m128i mb = _mm_setr_epi8(0, 0, 0, 0, -1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m128i h0 = _mm_or_si128(_mm_slli_si128(load128(ip_udp), 4), m0);
  const __m128i h1 = _mm_or_si128(load128(ip_udp + 12), m1);
  __m128i b0;
  if (m >= 16) {
    b0 = load128(b);
  } else {
    uint64_t bth_lo;  // BTH bytes 0-7
    uint32_t bth_hi;  // BTH bytes 8-11
    std::memcpy(&bth_lo, b, 8);
    std::memcpy(&bth_hi, b + 8, 4);
    b0 = _mm_unpacklo_epi64(_mm_cvtsi64_si128(static_cast<long long>(bth_lo)),
                            _mm_cvtsi32_si128(static_cast<int>(bth_hi)));
  }
  b0 = _mm_or_si128(b0, mb);
  const size_t e = m & 15;
  const __m128i to_end = load128(kSplitPlace.data() + e);         // first e bytes to the end
  const __m128i to_front = load128(kSplitPlace.data() + 16 + e);  // last 16 - e to the front
  const __m128i s0 = _mm_shuffle_epi8(h0, to_end);
  const __m128i s1 = _mm_or_si128(_mm_shuffle_epi8(h0, to_front), _mm_shuffle_epi8(h1, to_end));
  const __m128i s2 = _mm_or_si128(_mm_shuffle_epi8(h1, to_front), _mm_shuffle_epi8(b0, to_end));
  if (m < 16) {  // the three blocks are the stream
    return reduce128(_mm_xor_si128(
        _mm_xor_si128(fold(s0, constants(kFold256)), fold(s1, constants(kFold128))), s2));
  }
  // The first whole block of b, then the rest. BTH byte 4 is in it when
  // e <= 4, at 4 - e: where to_front moves mb's byte 4 (for e > 4, nowhere).
  const __m128i s3 = _mm_or_si128(load128(b + e), _mm_shuffle_epi8(mb, to_front));
  const __m128i x =
      _mm_xor_si128(_mm_xor_si128(fold(s0, constants(kFold384)), fold(s1, constants(kFold256))),
                    _mm_xor_si128(fold(s2, constants(kFold128)), s3));
  const uint8_t* p = b + e + 16;
  const size_t left = m - e - 16;  // whole blocks
  if (left < 64) return reduce128(fold_blocks(x, p, left / 16));
  return raw_icrc_stream_long<kUseAvx512>(x, p, left);
}

// The ICRC (inverted, unlike the streams: the dispatch tail-jumps here) of
// the split datagram; for m >= 16 or m == 12 (split_length_ok).
using IcrcSplitFn = uint32_t (*)(const uint8_t* ip_udp, const uint8_t* b, size_t m);
constexpr bool split_length_ok(size_t m) { return m >= 16 || m == 12; }
CONDUIT_CLMUL_SSSE3 uint32_t icrc_split28_sse(const uint8_t* ip_udp, const uint8_t* b, size_t m) {
  return ~raw_icrc_split28<false>(ip_udp, b, m);
}
__attribute__((target("avx,pclmul,ssse3,sse2"))) uint32_t icrc_split28_avx(const uint8_t* ip_udp,
                                                                           const uint8_t* b,
                                                                           size_t m) {
  return ~raw_icrc_split28<false>(ip_udp, b, m);
}
__attribute__((target("avx512f,vpclmulqdq,avx,pclmul,ssse3,sse2"))) uint32_t icrc_split28_avx512(
    const uint8_t* ip_udp, const uint8_t* b, size_t m) {
  return ~raw_icrc_split28<true>(ip_udp, b, m);
}

// crc32_update()'s AVX-512 path (AVX512BW/VL/VBMI + VPCLMULQDQ): every length
// from 16 bytes on as whole 64-byte registers (one 32-byte register up to 32
// bytes), with no tail and no table step. The message is read as if it had o = (-n) mod 64 zero
// bytes in front (a masked load from o bytes before p: the masked bytes are never read and cannot
// fault), which from a zero register changes nothing; the running register goes in as an XOR into
// the message's first four bytes, placed there by a byte permute. Each 64-byte register is then
// multiplied once, lane by lane, straight down to 96 bits by its distance from the end (independent
// multiplies instead of a chain of folds), and one Barrett reduction from 96 bits ends it: three
// multiply latencies from the last load to the CRC.
constexpr size_t kAvx512CrcMinBytes = 16;

// kFinalLanes[m]: the multipliers for a 64-byte register m registers before
// the message's last one. Lane i (i = 0 first in memory) sits
// D = 512 m + 128 (3 - i) bits before the end; multiplying its high-degree
// qword by x^(D+96) mod P and its other qword by x^(D+32) mod P (in the
// shifted reflected form used by fold()) gives 96-bit values whose sum is
// congruent to (message * x^32), which Barrett reduces to the CRC.
struct alignas(64) LaneMultipliers {
  std::array<uint64_t, 8> q;
};
constexpr size_t kFinalRegisters = 7;  // up to 4 accumulators + 3 trailing registers
constexpr std::array<LaneMultipliers, kFinalRegisters> make_final_lanes() {
  std::array<LaneMultipliers, kFinalRegisters> t{};
  for (unsigned m = 0; m < kFinalRegisters; ++m) {
    for (unsigned i = 0; i < 4; ++i) {
      const unsigned d = 512 * m + 128 * (3 - i);
      t[m].q[2 * i] = xpow_mod_reflected_shifted(d + 96);
      t[m].q[2 * i + 1] = xpow_mod_reflected_shifted(d + 32);
    }
  }
  return t;
}
constexpr auto kFinalLanes = make_final_lanes();
static_assert(kFinalLanes[0].q[6] == kFold128.hi);  // last lane: x^96, as reduce128's first step

// Byte-permute indices that put bytes 0..3 of a register at bytes o..o+3 of
// another (63 picks a zero byte): load 64 bytes from offset 64 - o.
constexpr std::array<uint8_t, 128> make_register_place() {
  std::array<uint8_t, 128> t{};
  for (size_t i = 0; i < t.size(); ++i)
    t[i] = i >= 64 && i < 68 ? static_cast<uint8_t>(i - 64) : 63;
  return t;
}
alignas(64) constexpr auto kRegisterPlace = make_register_place();

bool detect_avx512_crc();
// Decided once at static initialisation (CPUID, no syscall).
const bool kHaveAvx512Crc = detect_avx512_crc();

#define CONDUIT_AVX512_CRC \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,vpclmulqdq,pclmul,avx2,sse4.1")))

CONDUIT_AVX512_CRC inline __m512i load_multipliers(size_t m) {
  return _mm512_load_si512(kFinalLanes[m].q.data());
}
// acc + a's four lanes multiplied down to 96 bits for their distance.
CONDUIT_AVX512_CRC inline __m512i mul_acc(__m512i acc, __m512i a, size_t m) {
  const __m512i k = load_multipliers(m);
  return _mm512_ternarylogic_epi64(acc, _mm512_clmulepi64_epi128(a, k, 0x00),
                                   _mm512_clmulepi64_epi128(a, k, 0x11), 0x96);
}
CONDUIT_AVX512_CRC inline __m512i mul(__m512i a, size_t m) {
  const __m512i k = load_multipliers(m);
  return _mm512_xor_si512(_mm512_clmulepi64_epi128(a, k, 0x00),
                          _mm512_clmulepi64_epi128(a, k, 0x11));
}

// 16..32 bytes: the same in one 32-byte register (two lanes, the last two
// lanes' multipliers), which costs fewer instructions than a 64-byte one.
CONDUIT_AVX512_CRC inline uint32_t raw_crc_avx512_upto32(uint32_t s, const uint8_t* p, size_t n) {
  const size_t o = 32 - n;  // 0..16: the register always fits
  const auto* w = reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(p) - o);
  const __m256i reg = _mm256_maskz_permutexvar_epi8(
      ~uint32_t{0},
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kRegisterPlace.data() + 64 - o)),
      _mm256_zextsi128_si256(_mm_cvtsi32_si128(static_cast<int>(s))));
  const __m256i a =
      _mm256_xor_si256(_mm256_maskz_loadu_epi8(_cvtu32_mask32(~uint32_t{0} << o), w), reg);
  const __m256i k =
      _mm256_load_si256(reinterpret_cast<const __m256i*>(kFinalLanes[0].q.data() + 4));
  const __m256i t =
      _mm256_xor_si256(_mm256_clmulepi64_epi128(a, k, 0x00), _mm256_clmulepi64_epi128(a, k, 0x11));
  return barrett96(_mm_xor_si128(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1)));
}

// The raw register after n >= kAvx512CrcMinBytes bytes from register s.
CONDUIT_AVX512_CRC uint32_t raw_crc_avx512(uint32_t s, const uint8_t* p, size_t n) {
  if (n == 16) {
    // One 16-byte block: no mask, no permute, the last lane's multipliers.
    const __m128i x = _mm_xor_si128(load128(p), _mm_cvtsi32_si128(static_cast<int>(s)));
    const __m128i k = _mm_load_si128(reinterpret_cast<const __m128i*>(kFinalLanes[0].q.data() + 6));
    return barrett96(
        _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)));
  }
  if (n <= 32) return raw_crc_avx512_upto32(s, p, n);
  size_t o = (0 - n) & 63;  // zero bytes in front of the message
  if (o > 60) {
    // n = 64 k + 1..3: the register would straddle two 64-byte registers;
    // take those 1..3 bytes through the table instead.
    const size_t r = 64 - o;
    s = raw_bytewise(s, p, r);
    p += r;
    n -= r;
    o = 0;
  }
  // w = p - o, as an integer: it may lie before the buffer (never read there).
  const auto* w = reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(p) - o);
  size_t regs = (n + o) / 64;
  // (The masked forms of permute and extract below: GCC 12's plain ones start
  // from an undefined vector and trip -Wuninitialized.)
  const __m512i reg = _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(s)));
  // Whole 64-byte registers (o = 0) need neither the mask nor the permute.
  const __m512i first =
      o == 0 ? _mm512_xor_si512(_mm512_loadu_si512(w), reg)
             : _mm512_xor_si512(
                   _mm512_maskz_loadu_epi8(_cvtu64_mask64(~uint64_t{0} << o), w),
                   _mm512_maskz_permutexvar_epi8(
                       ~uint64_t{0}, _mm512_loadu_si512(kRegisterPlace.data() + 64 - o), reg));
  __m512i acc;
  const uint8_t* last;  // the last 64-byte register still to multiply, when any
  size_t trailing;      // 64-byte registers from w on still to multiply (0..3)
  if (regs <= 4) {
    acc = mul(first, regs - 1);
    trailing = regs - 1;
    last = w + 64 * trailing;
  } else {
    __m512i a0 = first;
    __m512i a1 = _mm512_loadu_si512(w + 64);
    __m512i a2 = _mm512_loadu_si512(w + 128);
    __m512i a3 = _mm512_loadu_si512(w + 192);
    w += 256;
    regs -= 4;
    const __m512i k2048 = constants4(kFold2048);
    while (regs >= 4) {
      a0 = fold512(a0, k2048, _mm512_loadu_si512(w));
      a1 = fold512(a1, k2048, _mm512_loadu_si512(w + 64));
      a2 = fold512(a2, k2048, _mm512_loadu_si512(w + 128));
      a3 = fold512(a3, k2048, _mm512_loadu_si512(w + 192));
      w += 256;
      regs -= 4;
    }
    trailing = regs;
    last = w + 64 * trailing - 64;
    acc = mul_acc(mul_acc(mul_acc(mul(a0, trailing + 3), a1, trailing + 2), a2, trailing + 1), a3,
                  trailing);
  }
  switch (trailing) {
    case 3:
      acc = mul_acc(acc, _mm512_loadu_si512(last - 128), 2);
      [[fallthrough]];
    case 2:
      acc = mul_acc(acc, _mm512_loadu_si512(last - 64), 1);
      [[fallthrough]];
    case 1:
      acc = mul_acc(acc, _mm512_loadu_si512(last), 0);
      break;
    default:
      break;
  }
  const __m256i y = _mm256_xor_si256(_mm512_maskz_extracti64x4_epi64(0xF, acc, 0),
                                     _mm512_maskz_extracti64x4_epi64(0xF, acc, 1));
  return barrett96(_mm_xor_si128(_mm256_castsi256_si128(y), _mm256_extracti128_si256(y, 1)));
}

// crc32_update()'s entry for this path: a tail call from it, inversions inside.
CONDUIT_AVX512_CRC uint32_t crc32_avx512_entry(uint32_t crc, const uint8_t* p, size_t n) {
  return ~raw_crc_avx512(~crc, p, n);
}

using IcrcStreamFn = detail::IcrcStreamFn;

bool detect_vpclmul();

// The best stream entry point for this CPU (nullptr without PCLMULQDQ and
// SSSE3), decided once at static initialisation (CPUID, no syscall).
IcrcStreamFn pick_icrc_stream(bool ipv6) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("pclmul") || !__builtin_cpu_supports("ssse3")) return nullptr;
  if (detect_vpclmul() && __builtin_cpu_supports("avx")) {
    return ipv6 ? icrc6_stream_avx512 : icrc_stream_avx512;
  }
  if (__builtin_cpu_supports("avx")) return ipv6 ? icrc6_stream_avx : icrc_stream_avx;
  return ipv6 ? icrc6_stream_sse : icrc_stream_sse;
}
const IcrcStreamFn kIcrcStream = pick_icrc_stream(false);
const IcrcStreamFn kIcrc6Stream = pick_icrc_stream(true);

// The same for the IPv4 split fold (nullptr where the streams are).
IcrcSplitFn pick_icrc_split() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("pclmul") || !__builtin_cpu_supports("ssse3")) return nullptr;
  if (detect_vpclmul() && __builtin_cpu_supports("avx")) return icrc_split28_avx512;
  if (__builtin_cpu_supports("avx")) return icrc_split28_avx;
  return icrc_split28_sse;
}
const IcrcSplitFn kIcrcSplit = pick_icrc_split();

bool detect_vpclmul() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq") &&
         __builtin_cpu_supports("pclmul");
}

bool detect_avx512_crc() {
  __builtin_cpu_init();
  return detect_vpclmul() && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vbmi") &&
         __builtin_cpu_supports("avx2") && __builtin_cpu_supports("sse4.1");
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

bool crc32_avx512_available() {
#if CONDUIT_WIRE_HAVE_CLMUL
  return kHaveAvx512Crc;
#else
  return false;
#endif
}

uint32_t crc32_update_bytewise(uint32_t crc, std::span<const uint8_t> data) {
  return ~raw_bytewise(~crc, data.data(), data.size());
}

uint32_t crc32_update_slice8(uint32_t crc, std::span<const uint8_t> data) {
  return ~raw_slice8(~crc, data.data(), data.size());
}

uint32_t crc32_update_clmul(uint32_t crc, std::span<const uint8_t> data) {
#if CONDUIT_WIRE_HAVE_CLMUL
  if (data.size() >= kClmulMinBytes && kHaveClmul) {
    return ~raw_clmul(~crc, data.data(), data.size());
  }
#endif
  return crc32_update_slice8(crc, data);
}

uint32_t crc32_update_avx512(uint32_t crc, std::span<const uint8_t> data) {
#if CONDUIT_WIRE_HAVE_CLMUL
  if (data.size() >= kAvx512CrcMinBytes && kHaveAvx512Crc) {
    return crc32_avx512_entry(crc, data.data(), data.size());
  }
#endif
  return crc32_update_clmul(crc, data);
}

namespace {
// crc32_update() without AVX-512, out of line so that the AVX-512 path is
// a bare tail call (no stack frame).
[[gnu::noinline]] uint32_t crc32_update_without_avx512(uint32_t crc,
                                                       std::span<const uint8_t> data) {
#if CONDUIT_WIRE_HAVE_CLMUL
  if (data.size() >= kClmulMinBytes && kHaveClmul)
    return ~raw_clmul(~crc, data.data(), data.size());
#endif
  return ~raw_slice8(~crc, data.data(), data.size());
}
}  // namespace

uint32_t crc32_update(uint32_t crc, std::span<const uint8_t> data) {
#if CONDUIT_WIRE_HAVE_CLMUL
  if (data.size() >= kAvx512CrcMinBytes && kHaveAvx512Crc) {
    return crc32_avx512_entry(crc, data.data(), data.size());
  }
#endif
  return crc32_update_without_avx512(crc, data);
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

void mask_icrc_fields(uint8_t* b) {
  b[1] = 0xFF;   // IPv4 ToS (DSCP + ECN)
  b[8] = 0xFF;   // TTL
  b[10] = 0xFF;  // header checksum
  b[11] = 0xFF;
  b[20 + 6] = 0xFF;  // UDP checksum
  b[20 + 7] = 0xFF;
  b[28 + 4] = 0xFF;  // BTH FECN, BECN, Resv6
}

// Table path: masks the header copy in place, then the rest of both spans.
uint32_t icrc_ipv4_tail_slice8(uint32_t s, uint8_t* head, size_t head_len,
                               std::span<const uint8_t> first, std::span<const uint8_t> second) {
  mask_icrc_fields(head);
  s = raw_slice8(s, head, head_len);
  s = raw_slice8(s, first.data(), first.size());
  return ~raw_slice8(s, second.data(), second.size());
}
}  // namespace

uint32_t icrc_begin_ipv4(std::span<const uint8_t, kIcrcMaskedHeaderBytes> ip_udp_bth) {
  std::array<uint8_t, kIcrcMaskedHeaderBytes> masked;
  std::memcpy(masked.data(), ip_udp_bth.data(), masked.size());
  mask_icrc_fields(masked.data());
  return crc32_update(kLrhPrefixCrc, masked);
}

namespace {
// Every case but a RoCE-sized datagram in one span with PCLMULQDQ.
__attribute__((noinline)) uint32_t icrc_ipv4_general(std::span<const uint8_t> first,
                                                     std::span<const uint8_t> second) {
  const size_t total = first.size() + second.size();
  if (total < kIcrcMaskedHeaderBytes) return 0;
  uint32_t s = ~kLrhPrefixCrc;  // raw register after the 8 x 0xFF prefix
  // The masked header spans the first 48 bytes (three CRC blocks) when there
  // are that many, so the carry-less path streams header and payload without
  // an intermediate reduction.
  constexpr size_t kHeadBytes = 48;
#if CONDUIT_WIRE_HAVE_CLMUL
  if (kHaveClmul && first.size() >= kHeadBytes) {
    s = raw_clmul_icrc_head48(s, first.data(), first.data() + kHeadBytes,
                              first.size() - kHeadBytes);
    return second.empty() ? ~s : crc32_update(~s, second);
  }
#endif
  // General case: a masked copy of the header bytes.
  uint8_t head[kHeadBytes];
  const size_t head_len = total < kHeadBytes ? total : kHeadBytes;
  const size_t from_first = first.size() < head_len ? first.size() : head_len;
  // An empty span's data() may be null, which memcpy must not get even for 0 bytes.
  if (from_first != 0) std::memcpy(head, first.data(), from_first);
  if (head_len > from_first) std::memcpy(head + from_first, second.data(), head_len - from_first);
  first = first.subspan(from_first);
  second = second.subspan(head_len - from_first);
#if CONDUIT_WIRE_HAVE_CLMUL
  if (kHaveClmul && head_len == kHeadBytes) {  // first was shorter: the rest is in second
    return ~raw_clmul_icrc_head48(s, head, second.data(), second.size());
  }
#endif
  return icrc_ipv4_tail_slice8(s, head, head_len, first, second);
}
// Every case but one span of a stream length: two spans split after the UDP
// header (as parse_roce and the GSI parser pass them) take the split fold,
// the rest the general path. Apart from icrc_ipv4_general, whose frame is
// set up before any test: both calls here are tail jumps.
__attribute__((noinline)) uint32_t icrc_ipv4_spans(std::span<const uint8_t> first,
                                                   std::span<const uint8_t> second) {
#if CONDUIT_WIRE_HAVE_CLMUL
  if (first.size() == kIpv4UdpBytes && kIcrcSplit != nullptr && split_length_ok(second.size())) {
    return kIcrcSplit(first.data(), second.data(), second.size());
  }
#endif
  return icrc_ipv4_general(first, second);
}
// The stream entry (the raw register, as the carry-less streams return it)
// on a CPU without them: every datagram from 40 bytes.
uint32_t icrc_stream_general(const uint8_t* datagram, size_t len_bytes) {
  return ~icrc_ipv4_general(std::span<const uint8_t>(datagram, len_bytes), {});
}
}  // namespace

namespace {
// rxe_icrc.c's IPv6 masking of the 60 header bytes at `ip`.
void mask_icrc6_fields(uint8_t* ip) {
  ip[0] |= 0x0F;                   // traffic class, high nibble
  ip[1] = ip[2] = ip[3] = 0xFF;    // traffic class, low nibble; flow label
  ip[7] = 0xFF;                    // hop limit
  ip[40 + 6] = ip[40 + 7] = 0xFF;  // UDP checksum
  ip[48 + 4] = 0xFF;               // BTH: FECN, BECN, reserved
}

// Every IPv6 case but a one-span datagram of a stream length with PCLMULQDQ
// and SSSE3.
__attribute__((noinline)) uint32_t icrc_ipv6_general(std::span<const uint8_t> first,
                                                     std::span<const uint8_t> second) {
  constexpr size_t kHead = kIpv6IcrcMaskedHeaderBytes;
  if (first.size() + second.size() < kHead) return 0;
#if CONDUIT_WIRE_HAVE_CLMUL
  if (kHaveClmul && first.size() >= kHead) {
    const uint32_t s =
        raw_clmul_icrc6_head60(first.data(), first.data() + kHead, first.size() - kHead);
    return second.empty() ? ~s : crc32_update(~s, second);
  }
  if (kHaveClmul && first.size() == kHead - 12) {  // IPv6 + UDP, then the BTH on
    return ~raw_clmul_icrc6_split48(first.data(), second.data(), second.size());
  }
  if (kHaveClmul) {  // the headers split elsewhere: gathered, the rest in the same stream
    uint8_t head[kHead];
    if (!first.empty()) std::memcpy(head, first.data(), first.size());
    const size_t from_second = kHead - first.size();
    std::memcpy(head + first.size(), second.data(), from_second);
    return ~raw_clmul_icrc6_head60(head, second.data() + from_second, second.size() - from_second);
  }
#endif
  return icrc_ipv6_slice8(first, second);
}
// The IPv6 stream entry on a CPU without the carry-less ones.
uint32_t icrc6_stream_general(const uint8_t* datagram, size_t len_bytes) {
  return ~icrc_ipv6_general(std::span<const uint8_t>(datagram, len_bytes), {});
}
}  // namespace

namespace detail {
// Constant-initialised, so that an ICRC computed during another file's static
// initialisation takes the general path, then set once to this CPU's stream.
IcrcStreamFn icrc_stream = icrc_stream_general;
IcrcStreamFn icrc6_stream = icrc6_stream_general;
}  // namespace detail

namespace {
#if CONDUIT_WIRE_HAVE_CLMUL
[[maybe_unused]] const bool kIcrcStreamSet = [] {
  if (kIcrcStream != nullptr) detail::icrc_stream = kIcrcStream;
  if (kIcrc6Stream != nullptr) detail::icrc6_stream = kIcrc6Stream;
  return true;
}();
#endif
}  // namespace

uint32_t icrc_ipv4(std::span<const uint8_t> first, std::span<const uint8_t> second) {
#if CONDUIT_WIRE_HAVE_CLMUL
  if (second.empty() && kIcrcStream != nullptr && stream_length_ok(first.size())) {
    return ~kIcrcStream(first.data(), first.size());
  }
#endif
  return icrc_ipv4_spans(first, second);
}

uint32_t icrc_ipv6(std::span<const uint8_t> first, std::span<const uint8_t> second) {
#if CONDUIT_WIRE_HAVE_CLMUL
  if (second.empty() && kIcrc6Stream != nullptr && stream6_length_ok(first.size())) {
    return ~kIcrc6Stream(first.data(), first.size());
  }
#endif
  return icrc_ipv6_general(first, second);
}

namespace {
// icrc_ipv4_with and icrc_ipv6_with: one ISA's build of the family's stream.
bool icrc_with(bool ipv6, IcrcIsa isa, std::span<const uint8_t> datagram, uint32_t& icrc) {
#if CONDUIT_WIRE_HAVE_CLMUL
  if (kIcrcStream == nullptr) return false;
  if (!(ipv6 ? stream6_length_ok(datagram.size()) : stream_length_ok(datagram.size()))) {
    return false;
  }
  IcrcStreamFn fn = ipv6 ? icrc6_stream_sse : icrc_stream_sse;
  if (isa == IcrcIsa::kAvx) {
    if (!__builtin_cpu_supports("avx")) return false;
    fn = ipv6 ? icrc6_stream_avx : icrc_stream_avx;
  } else if (isa == IcrcIsa::kAvx512) {
    if (!kHaveVpclmul || !__builtin_cpu_supports("avx")) return false;
    fn = ipv6 ? icrc6_stream_avx512 : icrc_stream_avx512;
  }
  icrc = ~fn(datagram.data(), datagram.size());
  return true;
#else
  (void)ipv6;
  (void)isa;
  (void)datagram;
  (void)icrc;
  return false;
#endif
}
}  // namespace

bool icrc_ipv4_with(IcrcIsa isa, std::span<const uint8_t> datagram, uint32_t& icrc) {
  return icrc_with(false, isa, datagram, icrc);
}

bool icrc_ipv4_split_with(IcrcIsa isa, std::span<const uint8_t> ip_udp,
                          std::span<const uint8_t> rest, uint32_t& icrc) {
#if CONDUIT_WIRE_HAVE_CLMUL
  if (kIcrcSplit == nullptr || ip_udp.size() != kIpv4UdpBytes || !split_length_ok(rest.size())) {
    return false;
  }
  IcrcSplitFn fn = icrc_split28_sse;
  if (isa == IcrcIsa::kAvx) {
    if (!__builtin_cpu_supports("avx")) return false;
    fn = icrc_split28_avx;
  } else if (isa == IcrcIsa::kAvx512) {
    if (!kHaveVpclmul || !__builtin_cpu_supports("avx")) return false;
    fn = icrc_split28_avx512;
  }
  icrc = fn(ip_udp.data(), rest.data(), rest.size());
  return true;
#else
  (void)isa;
  (void)ip_udp;
  (void)rest;
  (void)icrc;
  return false;
#endif
}
bool icrc_ipv6_with(IcrcIsa isa, std::span<const uint8_t> datagram, uint32_t& icrc) {
  return icrc_with(true, isa, datagram, icrc);
}

uint32_t icrc_ipv6_slice8(std::span<const uint8_t> first, std::span<const uint8_t> second) {
  constexpr size_t kLrh = 8;  // the masked LRH: 8 bytes of 0xFF
  constexpr size_t kHead = kIpv6IcrcMaskedHeaderBytes;
  if (first.size() + second.size() < kHead) return 0;
  // The first 60 bytes (IPv6, UDP, BTH) gathered and masked; the rest as is.
  std::array<uint8_t, kLrh + kHead> head;
  std::memset(head.data(), 0xFF, kLrh);
  const size_t from_first = std::min(first.size(), kHead);
  if (from_first > 0) std::memcpy(head.data() + kLrh, first.data(), from_first);
  if (from_first < kHead) {  // (an empty span's data() may be null: no memcpy of it)
    std::memcpy(head.data() + kLrh + from_first, second.data(), kHead - from_first);
  }
  mask_icrc6_fields(head.data() + kLrh);
  uint32_t s = raw_slice8(~uint32_t{0}, head.data(), head.size());
  s = raw_slice8(s, first.data() + from_first, first.size() - from_first);
  const size_t from_second = kHead - from_first;
  return ~raw_slice8(s, second.data() + from_second, second.size() - from_second);
}

uint32_t icrc_ipv4_slice8(std::span<const uint8_t> first, std::span<const uint8_t> second) {
  const size_t total = first.size() + second.size();
  if (total < kIcrcMaskedHeaderBytes) return 0;
  uint8_t head[kIcrcMaskedHeaderBytes];
  const size_t from_first = first.size() < sizeof head ? first.size() : sizeof head;
  if (from_first != 0) std::memcpy(head, first.data(), from_first);  // (null when empty)
  if (from_first < sizeof head) {
    std::memcpy(head + from_first, second.data(), sizeof head - from_first);
  }
  return icrc_ipv4_tail_slice8(~kLrhPrefixCrc, head, sizeof head, first.subspan(from_first),
                               second.subspan(sizeof head - from_first));
}

}  // namespace conduit::wire
