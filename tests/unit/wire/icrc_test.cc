#include "wire/icrc.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "pcap_file.h"
#include "wire/frame.h"

using namespace conduit::wire;

namespace {

std::vector<uint8_t> hex(const std::string& s) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < s.size();) {
    if (s[i] == ' ') {
      ++i;
      continue;
    }
    out.push_back(static_cast<uint8_t>(std::stoi(s.substr(i, 2), nullptr, 16)));
    i += 2;
  }
  return out;
}

// ConnectX-4 Lx CNP (IPv4 datagram without the ICRC) and its ICRC wire bytes.
const std::vector<uint8_t> kCnpDatagram =
    hex("45c2003c718c400040119161 0a001101 0a001201 000012b700280000 8100ffff4000011800000000"
        "00000000000000000000000000000000");
const std::vector<uint8_t> kCnpIcrc = hex("82fd002a");

// scapy's UC SEND_ONLY vector (roce.uts).
const std::vector<uint8_t> kScapyDatagram =
    hex("4501004004784000 4011b4d5 c0a80007 c0a80007 c00012b7002caca2 2460ffff000000d300cf1710"
        "4630818be28935d90e9a95505401be885e500000");
const std::vector<uint8_t> kScapyIcrc = hex("78f353f3");

uint32_t wire_icrc(const std::vector<uint8_t>& bytes) { return icrc_load(bytes.data()); }

// The reference: one bit at a time, no tables (the raw register, not inverted).
uint32_t bitwise_step(uint32_t s, uint8_t byte) {
  s ^= byte;
  for (int b = 0; b < 8; ++b) s = (s >> 1) ^ ((s & 1) ? 0xEDB88320u : 0);
  return s;
}

using CrcFn = uint32_t (*)(uint32_t, std::span<const uint8_t>);
struct NamedCrc {
  const char* name;
  CrcFn fn;
};
// Every implementation; the vector ones fall back to the next simpler one on
// a CPU without their instructions (the INFO line says which this CPU runs).
const NamedCrc kAllCrcs[] = {{"crc32_update", crc32_update},
                             {"bytewise", crc32_update_bytewise},
                             {"slice8", crc32_update_slice8},
                             {"clmul", crc32_update_clmul},
                             {"avx512", crc32_update_avx512}};

// Checks every implementation against the bitwise reference for every length
// 0..max_len of the bytes at `start`, from the given starting CRC. Returns a
// description of the first mismatch, or an empty string.
std::string check_all_lengths(const uint8_t* start, size_t max_len, uint32_t seed) {
  uint32_t s = ~seed;  // the reference's raw register after `len` bytes
  for (size_t len = 0; len <= max_len; ++len) {
    if (len > 0) s = bitwise_step(s, start[len - 1]);
    const std::span<const uint8_t> d(start, len);
    for (const NamedCrc& c : kAllCrcs) {
      if (c.fn(seed, d) != ~s) {
        return std::string(c.name) + " differs at length " + std::to_string(len);
      }
    }
  }
  return {};
}

// One page of random bytes between two PROT_NONE pages: a read before
// data() or after data() + size() faults.
class GuardedPage {
 public:
  explicit GuardedPage(uint32_t seed) : page_(static_cast<size_t>(sysconf(_SC_PAGESIZE))) {
    void* m = mmap(nullptr, 3 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(m != MAP_FAILED);
    base_ = static_cast<uint8_t*>(m);
    std::mt19937 rng(seed);
    for (size_t i = 0; i < page_; ++i) base_[page_ + i] = static_cast<uint8_t>(rng());
    REQUIRE(mprotect(base_, page_, PROT_NONE) == 0);
    REQUIRE(mprotect(base_ + 2 * page_, page_, PROT_NONE) == 0);
  }
  ~GuardedPage() { munmap(base_, 3 * page_); }
  GuardedPage(const GuardedPage&) = delete;
  GuardedPage& operator=(const GuardedPage&) = delete;
  const uint8_t* data() const { return base_ + page_; }
  size_t size() const { return page_; }

 private:
  size_t page_;
  uint8_t* base_ = nullptr;
};

}  // namespace

TEST_CASE("crc32: standard check value and zlib convention") {
  const std::string s = "123456789";
  const std::span<const uint8_t> d(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  CHECK(crc32_update(0, d) == 0xCBF43926u);
  CHECK(crc32_update_bytewise(0, d) == 0xCBF43926u);
  CHECK(crc32_update_slice8(0, d) == 0xCBF43926u);
  CHECK(crc32_update_clmul(0, d) == 0xCBF43926u);
  CHECK(crc32_update_avx512(0, d) == 0xCBF43926u);
  CHECK(crc32_update(0, {}) == 0u);
  CHECK(crc32_update(0x12345678u, {}) == 0x12345678u);
}

TEST_CASE("crc32: all implementations agree for every length and split point") {
  std::mt19937 rng(7);
  std::vector<uint8_t> buf(2200);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  INFO("clmul available: " << crc32_clmul_available() << ", avx512: " << crc32_avx512_available());
  for (size_t len = 0; len <= buf.size(); len += (len < 300 ? 1 : 37)) {
    const std::span<const uint8_t> d(buf.data(), len);
    const uint32_t ref = crc32_update_bytewise(0, d);
    REQUIRE(crc32_update_slice8(0, d) == ref);
    REQUIRE(crc32_update_clmul(0, d) == ref);
    REQUIRE(crc32_update_avx512(0, d) == ref);
    REQUIRE(crc32_update(0, d) == ref);
    // Continuation from a non-zero CRC exercises the initial-state injection.
    REQUIRE(crc32_update_clmul(0xA5A5A5A5u, d) == crc32_update_bytewise(0xA5A5A5A5u, d));
    REQUIRE(crc32_update_avx512(0xA5A5A5A5u, d) == crc32_update_bytewise(0xA5A5A5A5u, d));
    const size_t split = len / 3;
    REQUIRE(crc32_update(crc32_update(0, d.first(split)), d.subspan(split)) == ref);
  }
  // Unaligned starts.
  for (size_t start = 1; start < 16; ++start) {
    const std::span<const uint8_t> d(buf.data() + start, 1500);
    REQUIRE(crc32_update_clmul(0, d) == crc32_update_bytewise(0, d));
    REQUIRE(crc32_update_avx512(0, d) == crc32_update_bytewise(0, d));
  }
}

TEST_CASE("crc32: every path matches a bitwise reference for lengths 0..4200 at any start") {
  std::mt19937 rng(19);
  std::vector<uint8_t> buf(4200 + 128);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  INFO("clmul available: " << crc32_clmul_available() << ", avx512: " << crc32_avx512_available());
  // Starts 0..16 bytes into a 16-byte aligned buffer cover every alignment of
  // the 16-byte loads; 31, 33, 63 and 64 move the 64-byte ones too.
  // The starting CRC rotates through 0, ~0 (a zero register) and another.
  const uint32_t seeds[] = {0u, 0xFFFFFFFFu, 0x9E3779B9u};
  size_t i = 0;
  for (size_t start : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 31, 33, 63, 64}) {
    const uint32_t seed = seeds[i++ % 3];
    INFO("start " << start << " seed " << seed);
    CHECK(check_all_lengths(buf.data() + start, 4200, seed) == "");
  }
}

TEST_CASE("crc32: no read outside the buffer, next to unmapped pages") {
  // The AVX-512 path reads short buffers with a masked load that starts
  // before them (the masked bytes are never accessed). A buffer that starts
  // right after an inaccessible page and one that ends right before one must
  // neither fault nor change the result.
  const GuardedPage guarded(23);
  const size_t max_len = std::min<size_t>(guarded.size(), 4096);
  const uint8_t* first = guarded.data();
  const uint8_t* end = guarded.data() + guarded.size();
  for (uint32_t seed : {0u, 0x12345678u}) {
    INFO("seed " << seed);
    // Starting at the page's first byte (every length).
    CHECK(check_all_lengths(first, max_len, seed) == "");
    // Ending at the page's last byte.
    for (size_t len = 0; len <= max_len; ++len) {
      const std::span<const uint8_t> d(end - len, len);
      const uint32_t ref = crc32_update_bytewise(seed, d);
      for (const NamedCrc& c : kAllCrcs) {
        INFO(c.name << " length " << len);
        if (c.fn(seed, d) != ref) REQUIRE(c.fn(seed, d) == ref);
      }
    }
  }
}

TEST_CASE("icrc: ConnectX-4 Lx CNP known answer") {
  CHECK(icrc_ipv4(kCnpDatagram) == wire_icrc(kCnpIcrc));
  uint8_t out[4];
  icrc_store(icrc_ipv4(kCnpDatagram), out);
  CHECK(std::vector<uint8_t>(out, out + 4) == kCnpIcrc);
}

TEST_CASE("icrc: scapy UC SEND_ONLY known answer") {
  CHECK(icrc_ipv4(kScapyDatagram) == wire_icrc(kScapyIcrc));
  CHECK(icrc_ipv4_slice8(kScapyDatagram) == wire_icrc(kScapyIcrc));
  CHECK(icrc_ipv4_slice8(kCnpDatagram) == wire_icrc(kCnpIcrc));
}

TEST_CASE("icrc: masked fields do not change it, covered fields do") {
  for (const auto* v : {&kCnpDatagram, &kScapyDatagram}) {
    const uint32_t good = icrc_ipv4(*v);
    // ToS (a switch marks CE), TTL, IP checksum, UDP checksum, BTH FECN/BECN.
    for (size_t off :
         {size_t{1}, size_t{8}, size_t{10}, size_t{11}, size_t{26}, size_t{27}, size_t{32}}) {
      auto m = *v;
      m[off] ^= 0xC3;
      CHECK(icrc_ipv4(m) == good);
    }
    auto ce = *v;
    ce[1] |= kEcnCe;
    CHECK(icrc_ipv4(ce) == good);
    // Every other byte is covered: a flipped bit anywhere else changes it.
    for (size_t off = 0; off < v->size(); ++off) {
      if (off == 1 || off == 8 || off == 10 || off == 11 || off == 26 || off == 27 || off == 32) {
        continue;
      }
      auto c = *v;
      c[off] ^= 0x01;
      INFO("offset " << off);
      CHECK(icrc_ipv4(c) != good);
    }
  }
}

TEST_CASE("icrc: continuable from icrc_begin_ipv4 across segments") {
  const auto& v = kScapyDatagram;
  uint32_t crc = icrc_begin_ipv4(std::span<const uint8_t, kIcrcMaskedHeaderBytes>(v.data(), 40));
  crc = crc32_update(crc, std::span<const uint8_t>(v.data() + 40, 7));
  crc = crc32_update(crc, std::span<const uint8_t>(v.data() + 47, v.size() - 47));
  CHECK(crc == wire_icrc(kScapyIcrc));
  CHECK(icrc_ipv4(std::span<const uint8_t>(v.data(), 39)) == 0u);
}

TEST_CASE("icrc: every RoCE frame in the rxe captures verifies") {
  size_t roce_frames = 0;
  for (const char* name : {"rxe-perftest-send-write.pcap", "rxe-rc-pingpong.pcap"}) {
    std::vector<test::Frame> frames;
    std::string error;
    REQUIRE(test::read_pcap(std::string(CONDUIT_WIRE_TEST_DATA) + "/" + name, frames, error));
    for (const auto& f : frames) {
      // IPv4/UDP to port 4791 without a VLAN tag (all the captures hold).
      if (f.size() < 14 + 28 + 16 || f[12] != 0x08 || f[13] != 0x00 || f[14 + 9] != 17) continue;
      if (f[14 + 22] != 0x12 || f[14 + 23] != 0xB7) continue;
      ++roce_frames;
      const size_t ip_total = size_t{f[16]} << 8 | f[17];
      REQUIRE(ip_total <= f.size() - 14);
      const std::span<const uint8_t> dgram(f.data() + 14, ip_total - 4);
      CHECK(icrc_ipv4(dgram) == icrc_load(f.data() + 14 + ip_total - 4));
      // A CE mark set on the way must not break it; a payload bit flip must.
      auto ce = std::vector<uint8_t>(dgram.begin(), dgram.end());
      ce[1] |= kEcnCe;
      CHECK(icrc_ipv4(ce) == icrc_load(f.data() + 14 + ip_total - 4));
      ce[ce.size() - 1] ^= 0x80;
      CHECK(icrc_ipv4(ce) != icrc_load(f.data() + 14 + ip_total - 4));
    }
  }
  CHECK(roce_frames == 32);
}

TEST_CASE("icrc: any split into two spans gives the same ICRC") {
  std::mt19937 rng(3);
  std::vector<uint8_t> d(40 + 4200);
  for (auto& b : d) b = static_cast<uint8_t>(rng());
  for (size_t len : {size_t{40}, size_t{44}, size_t{47}, size_t{48}, size_t{49}, size_t{63},
                     size_t{104}, size_t{111}, size_t{1100}, size_t{4136}}) {
    const std::span<const uint8_t> all(d.data(), len);
    // Reference: the masked copy through the bytewise CRC.
    std::vector<uint8_t> m(8 + len, 0xFF);
    std::memcpy(m.data() + 8, all.data(), len);
    for (size_t off : {1, 8, 10, 11, 26, 27, 32}) m[8 + off] = 0xFF;
    const uint32_t ref = crc32_update_bytewise(0, m);
    for (size_t split = 0; split <= len; split += (split < 60 ? 1 : 97)) {
      INFO("len " << len << " split " << split);
      REQUIRE(icrc_ipv4(all.first(split), all.subspan(split)) == ref);
      REQUIRE(icrc_ipv4_slice8(all.first(split), all.subspan(split)) == ref);
    }
    uint32_t crc = icrc_begin_ipv4(all.first<kIcrcMaskedHeaderBytes>());
    REQUIRE(crc32_update(crc, all.subspan(kIcrcMaskedHeaderBytes)) == ref);
  }
}

TEST_CASE("icrc: IPv6, any split into two spans, against the masked bytewise reference") {
  std::mt19937 rng(5);
  std::vector<uint8_t> d(60 + 4200);
  for (auto& b : d) b = static_cast<uint8_t>(rng());
  d[0] = static_cast<uint8_t>(0x60 | (d[0] & 0x0F));
  for (size_t len : {size_t{60}, size_t{61}, size_t{64}, size_t{76}, size_t{1100}, size_t{4156}}) {
    const std::span<const uint8_t> all(d.data(), len);
    // Reference: rxe_icrc.c's masking (traffic class, flow label, hop limit,
    // UDP checksum, BTH byte 4) through the bytewise CRC.
    std::vector<uint8_t> m(8 + len, 0xFF);
    std::copy(all.begin(), all.end(), m.begin() + 8);
    m[8] |= 0x0F;
    for (size_t off : {1, 2, 3, 7, 46, 47, 52}) m[8 + off] = 0xFF;
    const uint32_t ref = crc32_update_bytewise(0, m);
    for (size_t split = 0; split <= len; split += (split < 70 ? 1 : 97)) {
      INFO("len " << len << " split " << split);
      REQUIRE(icrc_ipv6(all.first(split), all.subspan(split)) == ref);
    }
    REQUIRE(icrc_datagram(all.data(), len) == ref);
  }
  CHECK(icrc_ipv6(std::span<const uint8_t>(d.data(), 59)) == 0);  // no room for the headers
  CHECK(icrc_ipv6(std::span<const uint8_t>(d.data(), 30), std::span<const uint8_t>(d.data(), 29)) ==
        0);
}

TEST_CASE("icrc: IPv6, one span of every length, and which bytes it covers") {
  // One span with the headers in it takes the carry-less stream (the headers masked in
  // registers): every length from the headers alone to past the AVX-512 bulk loop, so
  // every tail and fold path is crossed.
  std::mt19937 rng(11);
  std::vector<uint8_t> d(60 + 1100);
  for (auto& b : d) b = static_cast<uint8_t>(rng());
  d[0] = static_cast<uint8_t>(0x60 | (d[0] & 0x0F));
  const auto reference = [](std::span<const uint8_t> all) {
    std::vector<uint8_t> m(8 + all.size(), 0xFF);
    std::copy(all.begin(), all.end(), m.begin() + 8);
    m[8] |= 0x0F;
    for (size_t off : {1, 2, 3, 7, 46, 47, 52}) m[8 + off] = 0xFF;
    return crc32_update_bytewise(0, m);
  };
  for (size_t len = 60; len <= d.size(); ++len) {
    // An exact-size copy, so that ASan sees any read past the datagram.
    const std::vector<uint8_t> one(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(len));
    INFO("len " << len);
    REQUIRE(icrc_ipv6(one) == reference(one));
  }
  // Every bit of the first 64 bytes flipped alone: the variant bits leave the ICRC as it
  // is, every other bit changes it.
  std::vector<uint8_t> f(d.begin(), d.begin() + 128);
  const uint32_t base = icrc_ipv6(f);
  for (size_t byte = 0; byte < 64; ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      f[byte] ^= static_cast<uint8_t>(1u << bit);
      const bool variant = (byte == 0 && bit < 4) || byte == 1 || byte == 2 || byte == 3 ||
                           byte == 7 || byte == 46 || byte == 47 || byte == 52;
      INFO("byte " << byte << " bit " << bit);
      CHECK((icrc_ipv6(f) == base) == variant);
      f[byte] ^= static_cast<uint8_t>(1u << bit);
    }
  }
}

TEST_CASE("icrc: one span of every length matches the masked bytewise reference") {
  // Single spans take the whole-block stream (every length but 16k + 13..15);
  // each length shifts the variant fields to other places in the blocks.
  std::mt19937 rng(11);
  std::vector<uint8_t> d(4200);
  uint32_t probe = 0;
  const std::vector<uint8_t> forty(40);
  INFO("stream: sse " << icrc_ipv4_with(IcrcIsa::kSse, forty, probe) << " avx "
                      << icrc_ipv4_with(IcrcIsa::kAvx, forty, probe) << " avx512 "
                      << icrc_ipv4_with(IcrcIsa::kAvx512, forty, probe));
  for (auto& b : d) b = static_cast<uint8_t>(rng());
  for (size_t len = 40; len <= d.size(); len += (len < 400 ? 1 : 61)) {
    const std::span<const uint8_t> all(d.data(), len);
    std::vector<uint8_t> m(8 + len, 0xFF);
    std::memcpy(m.data() + 8, all.data(), len);
    for (size_t off : {1, 8, 10, 11, 26, 27, 32}) m[8 + off] = 0xFF;
    INFO("len " << len);
    const uint32_t ref = crc32_update_bytewise(0, m);
    REQUIRE(icrc_ipv4(all) == ref);
    // Each instruction set's build of the stream, where this CPU has it.
    for (const IcrcIsa isa : {IcrcIsa::kSse, IcrcIsa::kAvx, IcrcIsa::kAvx512}) {
      uint32_t got = ~ref;
      if (icrc_ipv4_with(isa, all, got)) REQUIRE(got == ref);
    }
    // Unaligned start.
    const std::span<const uint8_t> shifted(d.data() + 1, len);
    std::memcpy(m.data() + 8, shifted.data(), len);
    for (size_t off : {1, 8, 10, 11, 26, 27, 32}) m[8 + off] = 0xFF;
    REQUIRE(icrc_ipv4(shifted) == crc32_update_bytewise(0, m));
  }
}

TEST_CASE("icrc: the one-span stream reads nothing outside the datagram, next to unmapped pages") {
  // The stream reads block 0 from the datagram's first byte and, for 4..7
  // blocks, the last three blocks from its end whatever their multipliers.
  const GuardedPage guarded(29);
  const size_t max_len = std::min<size_t>(guarded.size(), 600);
  for (size_t len = 40; len <= max_len; ++len) {
    const uint8_t* start = guarded.data();
    for (const uint8_t* at : {start, start + guarded.size() - len}) {
      const std::span<const uint8_t> all(at, len);
      std::vector<uint8_t> m(8 + len, 0xFF);
      std::memcpy(m.data() + 8, all.data(), len);
      for (size_t off : {1, 8, 10, 11, 26, 27, 32}) m[8 + off] = 0xFF;
      const uint32_t ref = crc32_update_bytewise(0, m);
      INFO("len " << len << (at == start ? " at the page start" : " at the page end"));
      REQUIRE(icrc_ipv4(all) == ref);
      for (const IcrcIsa isa : {IcrcIsa::kSse, IcrcIsa::kAvx, IcrcIsa::kAvx512}) {
        uint32_t got = ~ref;
        if (icrc_ipv4_with(isa, all, got)) REQUIRE(got == ref);
      }
    }
  }
}

namespace {

// The IPv6 ICRC one bit at a time, no tables and no library CRC: 8 x 0xFF,
// then the datagram with rxe_icrc.c's IPv6 masking (traffic class, flow
// label, hop limit; UDP checksum; BTH byte 4) applied byte by byte.
uint32_t icrc6_bitwise(std::span<const uint8_t> dgram) {
  uint32_t s = 0xFFFFFFFF;
  for (int i = 0; i < 8; ++i) s = bitwise_step(s, 0xFF);
  for (size_t i = 0; i < dgram.size(); ++i) {
    uint8_t b = dgram[i];
    if (i == 0) b |= 0x0F;
    if (i == 1 || i == 2 || i == 3 || i == 7 || i == 46 || i == 47 || i == 52) b = 0xFF;
    s = bitwise_step(s, b);
  }
  return ~s;
}

// Which instruction sets' builds of the ICRC streams this CPU runs; WARNs
// (in every run's output) the ones a test skips.
std::vector<IcrcIsa> icrc_isas_here(bool ipv6) {
  std::vector<IcrcIsa> here;
  const std::vector<uint8_t> probe(64);
  const char* names[] = {"SSE (PCLMULQDQ + SSSE3)", "AVX", "AVX-512 (VPCLMULQDQ)"};
  for (const IcrcIsa isa : {IcrcIsa::kSse, IcrcIsa::kAvx, IcrcIsa::kAvx512}) {
    uint32_t unused = 0;
    if (ipv6 ? icrc_ipv6_with(isa, probe, unused) : icrc_ipv4_with(isa, probe, unused)) {
      here.push_back(isa);
    } else {
      WARN((ipv6 ? "IPv6" : "IPv4") << " ICRC stream: skipped the " << names[static_cast<int>(isa)]
                                    << " build (this CPU lacks it)");
    }
  }
  return here;
}

}  // namespace

TEST_CASE("icrc: IPv6, every entry point and ISA against a bit-by-bit reference, any split") {
  // Many random datagrams (random headers, version 6) of every payload length
  // 0..320 after the 60 header bytes, and some longer ones past the AVX-512
  // bulk loop; each as one exact-size span (ASan sees any read past it)
  // through every entry point and each ISA's stream build, and split into
  // two spans at random points (and after the UDP header, as parse_roce and
  // the GSI parser split it).
  const std::vector<IcrcIsa> isas = icrc_isas_here(true);
  std::mt19937 rng(61);
  std::vector<size_t> payloads;
  for (size_t p = 0; p <= 320; ++p) payloads.push_back(p);
  for (size_t p = 321; p <= 4200; p += 53) payloads.push_back(p);
  size_t checked = 0;
  for (const size_t payload : payloads) {
    for (int rep = 0; rep < 3; ++rep) {
      std::vector<uint8_t> d(60 + payload);
      for (auto& b : d) b = static_cast<uint8_t>(rng());
      d[0] = static_cast<uint8_t>(0x60 | (d[0] & 0x0F));
      const uint32_t ref = icrc6_bitwise(d);
      INFO("payload " << payload << " datagram " << d.size() << " rep " << rep);
      REQUIRE(icrc_ipv6(d) == ref);
      REQUIRE(icrc_ipv6_datagram(d.data(), d.size()) == ref);
      REQUIRE(icrc_datagram(d.data(), d.size()) == ref);
      REQUIRE(icrc_ipv6_slice8(d) == ref);
      if (d.size() % 4 == 0) REQUIRE(icrc_ipv6_datagram_words(d.data(), d.size()) == ref);
      for (const IcrcIsa isa : isas) {
        uint32_t got = ~ref;
        const bool ran = icrc_ipv6_with(isa, d, got);
        INFO("isa " << static_cast<int>(isa));
        // Every length but 16k + 13..15 is the stream's.
        REQUIRE(ran == (((d.size() + 4) & 15) - 1 >= 3));
        if (ran) REQUIRE(got == ref);
      }
      // Two spans, the second in a buffer of its own.
      const size_t splits[] = {48, 60, rng() % (d.size() + 1), rng() % (d.size() + 1), rng() % 61};
      for (const size_t split : splits) {
        const std::vector<uint8_t> a(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(split));
        const std::vector<uint8_t> b(d.begin() + static_cast<std::ptrdiff_t>(split), d.end());
        INFO("split " << split);
        REQUIRE(icrc_ipv6(a, b) == ref);
        REQUIRE(icrc_ipv6_slice8(a, b) == ref);
      }
      ++checked;
    }
  }
  CHECK(checked == 3 * payloads.size());
  // Too short for the headers: 0, as before.
  const std::vector<uint8_t> short59(59, 0x60);
  CHECK(icrc_ipv6(short59) == 0u);
  CHECK(icrc_ipv6_slice8(short59) == 0u);
  CHECK(icrc_ipv6(std::span<const uint8_t>(short59).first(48),
                  std::span<const uint8_t>(short59).subspan(48)) == 0u);
  uint32_t untouched = 0x1234;
  CHECK_FALSE(icrc_ipv6_with(IcrcIsa::kSse, short59, untouched));
  CHECK(untouched == 0x1234u);
}

TEST_CASE("icrc: IPv6 known answer (an independent zlib computation), through every path") {
  // frame_test's IPv6 SEND only (fe80::1 -> 2001:db8::2, traffic class 0x6A,
  // flow label 0xABCDE, hop limit 64, payload 00..0f): the datagram and the
  // ICRC Python's zlib.crc32 gave for it. (No capture of IPv6 RoCE frames
  // from another implementation is among the fixtures.)
  const std::vector<uint8_t> dgram =
      hex("66aabcde00281140 fe800000000000000000000000000001 20010db8000000000000000000000002"
          "c12312b700280000 0400ffff0000001180123456 000102030405060708090a0b0c0d0e0f");
  const uint32_t want = wire_icrc(hex("c8478a6a"));
  REQUIRE(dgram.size() == 76);
  CHECK(icrc6_bitwise(dgram) == want);
  CHECK(icrc_ipv6(dgram) == want);
  CHECK(icrc_ipv6_datagram(dgram.data(), dgram.size()) == want);
  CHECK(icrc_ipv6_datagram_words(dgram.data(), dgram.size()) == want);
  CHECK(icrc_ipv6_slice8(dgram) == want);
  for (const IcrcIsa isa : icrc_isas_here(true)) {
    uint32_t got = 0;
    CHECK(icrc_ipv6_with(isa, dgram, got));
    CHECK(got == want);
  }
  for (size_t split = 0; split <= dgram.size(); ++split) {
    const std::vector<uint8_t> a(dgram.begin(), dgram.begin() + static_cast<std::ptrdiff_t>(split));
    const std::vector<uint8_t> b(dgram.begin() + static_cast<std::ptrdiff_t>(split), dgram.end());
    INFO("split " << split);
    CHECK(icrc_ipv6(a, b) == want);
    CHECK(icrc_ipv6_slice8(a, b) == want);
  }
}

TEST_CASE("icrc: the IPv6 stream reads nothing outside the datagram, next to unmapped pages") {
  const std::vector<IcrcIsa> isas = icrc_isas_here(true);
  const GuardedPage guarded(31);
  const size_t max_len = std::min<size_t>(guarded.size(), 600);
  for (size_t len = 60; len <= max_len; ++len) {
    const uint8_t* start = guarded.data();
    for (const uint8_t* at : {start, start + guarded.size() - len}) {
      const std::span<const uint8_t> all(at, len);
      const uint32_t ref = icrc6_bitwise(all);
      INFO("len " << len << (at == start ? " at the page start" : " at the page end"));
      REQUIRE(icrc_ipv6(all) == ref);
      for (const IcrcIsa isa : isas) {
        uint32_t got = ~ref;
        if (icrc_ipv6_with(isa, all, got)) REQUIRE(got == ref);
      }
      // Split after the UDP header (the headers start the page, or the rest ends it).
      REQUIRE(icrc_ipv6(all.first(48), all.subspan(48)) == ref);
    }
  }
}

namespace {

// The IPv4 ICRC one bit at a time, no tables and no library CRC: 8 x 0xFF,
// then the datagram with its variant bytes (ToS, TTL, IP checksum; UDP
// checksum; BTH byte 4) taken as 0xFF.
uint32_t icrc4_bitwise(std::span<const uint8_t> dgram) {
  uint32_t s = 0xFFFFFFFF;
  for (int i = 0; i < 8; ++i) s = bitwise_step(s, 0xFF);
  for (size_t i = 0; i < dgram.size(); ++i) {
    const bool variant = i == 1 || i == 8 || i == 10 || i == 11 || i == 26 || i == 27 || i == 32;
    s = bitwise_step(s, variant ? 0xFF : dgram[i]);
  }
  return ~s;
}

// Which instruction sets' builds of the IPv4 split fold (headers apart) this
// CPU runs; WARNs the ones a test skips.
std::vector<IcrcIsa> icrc_split_isas_here() {
  std::vector<IcrcIsa> here;
  const std::vector<uint8_t> headers(kIpv4UdpBytes);
  const std::vector<uint8_t> rest(16);
  const char* names[] = {"SSE (PCLMULQDQ + SSSE3)", "AVX", "AVX-512 (VPCLMULQDQ)"};
  for (const IcrcIsa isa : {IcrcIsa::kSse, IcrcIsa::kAvx, IcrcIsa::kAvx512}) {
    uint32_t unused = 0;
    if (icrc_ipv4_split_with(isa, headers, rest, unused)) {
      here.push_back(isa);
    } else {
      WARN("IPv4 split ICRC: skipped the " << names[static_cast<int>(isa)]
                                           << " build (this CPU lacks it)");
    }
  }
  return here;
}

}  // namespace

TEST_CASE("icrc: IPv4, every entry point and ISA against a bit-by-bit reference, any split") {
  // Random datagrams (random headers, version 4) of every payload length 0..320 after the
  // 40 header bytes, and some longer ones past the AVX-512 bulk loop; each as one exact-size
  // span through every entry point and each ISA's stream build, and split into two spans
  // (each an exact-size buffer of its own) after the UDP header, as parse_roce and the GSI
  // parser split it (through icrc_ipv4 and each ISA's build of the split fold), after the
  // BTH, and at random points.
  const std::vector<IcrcIsa> isas = icrc_isas_here(false);
  const std::vector<IcrcIsa> split_isas = icrc_split_isas_here();
  std::mt19937 rng(67);
  std::vector<size_t> payloads;
  for (size_t p = 0; p <= 320; ++p) payloads.push_back(p);
  for (size_t p = 321; p <= 4200; p += 53) payloads.push_back(p);
  size_t checked = 0;
  size_t split_fold_runs = 0;
  for (const size_t payload : payloads) {
    for (int rep = 0; rep < 3; ++rep) {
      std::vector<uint8_t> d(40 + payload);
      for (auto& b : d) b = static_cast<uint8_t>(rng());
      d[0] = 0x45;
      const uint32_t ref = icrc4_bitwise(d);
      INFO("payload " << payload << " datagram " << d.size() << " rep " << rep);
      REQUIRE(icrc_ipv4(d) == ref);
      REQUIRE(icrc_ipv4_datagram(d.data(), d.size()) == ref);
      REQUIRE(icrc_datagram(d.data(), d.size()) == ref);
      REQUIRE(icrc_ipv4_slice8(d) == ref);
      if (d.size() % 4 == 0) REQUIRE(icrc_ipv4_datagram_words(d.data(), d.size()) == ref);
      for (const IcrcIsa isa : isas) {
        uint32_t got = ~ref;
        const bool ran = icrc_ipv4_with(isa, d, got);
        INFO("isa " << static_cast<int>(isa));
        REQUIRE(ran == (((d.size() + 4) & 15) - 1 >= 3));
        if (ran) REQUIRE(got == ref);
      }
      const size_t splits[] = {kIpv4UdpBytes, 40, rng() % (d.size() + 1), rng() % (d.size() + 1),
                               rng() % 41};
      for (const size_t split : splits) {
        const std::vector<uint8_t> a(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(split));
        const std::vector<uint8_t> b(d.begin() + static_cast<std::ptrdiff_t>(split), d.end());
        INFO("split " << split);
        REQUIRE(icrc_ipv4(a, b) == ref);
        REQUIRE(icrc_ipv4_slice8(a, b) == ref);
        if (split != kIpv4UdpBytes) continue;
        for (const IcrcIsa isa : split_isas) {
          uint32_t got = ~ref;
          const bool ran = icrc_ipv4_split_with(isa, a, b, got);
          INFO("split fold isa " << static_cast<int>(isa));
          // From the BTH on: 16 bytes or more, or the BTH alone.
          REQUIRE(ran == (b.size() >= 16 || b.size() == 12));
          if (ran) {
            REQUIRE(got == ref);
            ++split_fold_runs;
          }
        }
      }
      ++checked;
    }
  }
  CHECK(checked == 3 * payloads.size());
  if (!split_isas.empty()) CHECK(split_fold_runs > 3 * payloads.size());
  // Too short for the headers: 0, as before.
  const std::vector<uint8_t> short39(39, 0x45);
  CHECK(icrc_ipv4(short39) == 0u);
  CHECK(icrc_ipv4_slice8(short39) == 0u);
  CHECK(icrc_ipv4(std::span<const uint8_t>(short39).first(kIpv4UdpBytes),
                  std::span<const uint8_t>(short39).subspan(kIpv4UdpBytes)) == 0u);
  uint32_t untouched = 0x1234;
  const std::span<const uint8_t> s39(short39);
  CHECK_FALSE(icrc_ipv4_split_with(IcrcIsa::kSse, s39.first(28), s39.subspan(28), untouched));
  CHECK_FALSE(icrc_ipv4_split_with(IcrcIsa::kSse, s39.first(27), s39.subspan(27), untouched));
  CHECK(untouched == 0x1234u);
}

TEST_CASE("icrc: IPv4 split after the UDP header: which bits it covers, in every ISA build") {
  // Every bit of the first 64 bytes flipped alone in a datagram split after the UDP header:
  // the variant bytes leave the ICRC as it is, every other bit changes it; for each payload
  // length mod 16 (the split fold shifts the headers by it) and the BTH alone.
  const std::vector<IcrcIsa> split_isas = icrc_split_isas_here();
  std::mt19937 rng(71);
  for (const size_t payload : {size_t{0}, size_t{4}, size_t{8}, size_t{12}, size_t{24}, size_t{60},
                               size_t{64}, size_t{65}, size_t{66}, size_t{67}, size_t{69},
                               size_t{70}, size_t{71}, size_t{73}, size_t{74}, size_t{75}}) {
    std::vector<uint8_t> d(40 + payload);
    for (auto& b : d) b = static_cast<uint8_t>(rng());
    d[0] = 0x45;
    const uint32_t base = icrc4_bitwise(d);
    for (size_t byte = 0; byte < std::min<size_t>(64, d.size()); ++byte) {
      for (int bit = 0; bit < 8; ++bit) {
        d[byte] ^= static_cast<uint8_t>(1u << bit);
        const bool variant = byte == 1 || byte == 8 || byte == 10 || byte == 11 || byte == 26 ||
                             byte == 27 || byte == 32;
        const std::vector<uint8_t> a(d.begin(), d.begin() + kIpv4UdpBytes);
        const std::vector<uint8_t> b(d.begin() + kIpv4UdpBytes, d.end());
        INFO("payload " << payload << " byte " << byte << " bit " << bit);
        CHECK((icrc_ipv4(a, b) == base) == variant);
        for (const IcrcIsa isa : split_isas) {
          uint32_t got = ~base;
          if (icrc_ipv4_split_with(isa, a, b, got)) {
            INFO("isa " << static_cast<int>(isa));
            CHECK((got == base) == variant);
          }
        }
        d[byte] ^= static_cast<uint8_t>(1u << bit);
      }
    }
  }
}

TEST_CASE("icrc: the IPv4 split fold reads nothing outside its spans, next to unmapped pages") {
  // The 28 header bytes start one page (a read before them faults), and the rest from the
  // BTH on ends another (a read past it faults), for every length of the rest.
  const std::vector<IcrcIsa> split_isas = icrc_split_isas_here();
  const GuardedPage heads(37);
  const GuardedPage rests(41);
  const std::span<const uint8_t> ip_udp(heads.data(), kIpv4UdpBytes);
  const size_t max_rest = std::min<size_t>(rests.size(), 600);
  for (size_t m = 12; m <= max_rest; ++m) {
    const std::span<const uint8_t> rest(rests.data() + rests.size() - m, m);
    std::vector<uint8_t> d(ip_udp.begin(), ip_udp.end());
    d.insert(d.end(), rest.begin(), rest.end());
    const uint32_t ref = icrc4_bitwise(d);
    INFO("rest " << m);
    REQUIRE(icrc_ipv4(ip_udp, rest) == ref);
    for (const IcrcIsa isa : split_isas) {
      uint32_t got = ~ref;
      if (icrc_ipv4_split_with(isa, ip_udp, rest, got)) REQUIRE(got == ref);
    }
    // The headers at the end of a page and the rest at the start of one.
    const std::span<const uint8_t> ip_udp_end(heads.data() + heads.size() - kIpv4UdpBytes,
                                              kIpv4UdpBytes);
    const std::span<const uint8_t> rest_start(rests.data(), m);
    std::vector<uint8_t> e(ip_udp_end.begin(), ip_udp_end.end());
    e.insert(e.end(), rest_start.begin(), rest_start.end());
    REQUIRE(icrc_ipv4(ip_udp_end, rest_start) == icrc4_bitwise(e));
  }
}
