// Minimal classic-pcap (libpcap 2.4, Ethernet link type) reader and writer
// for the wire tests and tools. Test support code: it may allocate and do I/O.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace conduit::wire::test {

using Frame = std::vector<uint8_t>;

inline constexpr uint32_t kPcapMagicUsec = 0xA1B2C3D4;
inline constexpr uint32_t kPcapMagicNsec = 0xA1B23C4D;
inline constexpr uint32_t kLinkTypeEthernet = 1;

// Reads every record of an Ethernet pcap (either byte order, usec or nsec
// timestamps). Returns false (with `error` set) on a missing or malformed file.
inline bool read_pcap(const std::string& path, std::vector<Frame>& frames, std::string& error) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    error = "cannot open " + path;
    return false;
  }
  std::vector<uint8_t> data;
  uint8_t buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) data.insert(data.end(), buf, buf + n);
  std::fclose(f);
  if (data.size() < 24) {
    error = path + ": no pcap header";
    return false;
  }
  uint32_t magic;
  std::memcpy(&magic, data.data(), 4);
  bool swap = false;
  if (magic != kPcapMagicUsec && magic != kPcapMagicNsec) {
    magic = __builtin_bswap32(magic);
    if (magic != kPcapMagicUsec && magic != kPcapMagicNsec) {
      error = path + ": not a classic pcap file";
      return false;
    }
    swap = true;
  }
  auto u32 = [&](size_t off) {
    uint32_t v;
    std::memcpy(&v, data.data() + off, 4);
    return swap ? __builtin_bswap32(v) : v;
  };
  if (u32(20) != kLinkTypeEthernet) {
    error = path + ": link type is not Ethernet";
    return false;
  }
  size_t off = 24;
  while (off + 16 <= data.size()) {
    const uint32_t incl = u32(off + 8);
    off += 16;
    if (incl > data.size() - off) {
      error = path + ": truncated record";
      return false;
    }
    frames.emplace_back(data.begin() + static_cast<long>(off),
                        data.begin() + static_cast<long>(off + incl));
    off += incl;
  }
  return true;
}

// Writes frames as a little-endian usec pcap with increasing timestamps.
inline bool write_pcap(const std::string& path, const std::vector<Frame>& frames) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  auto put32 = [f](uint32_t v) { std::fwrite(&v, 4, 1, f); };
  auto put16 = [f](uint16_t v) { std::fwrite(&v, 2, 1, f); };
  put32(kPcapMagicUsec);
  put16(2);
  put16(4);
  put32(0);  // thiszone
  put32(0);  // sigfigs
  put32(65535);
  put32(kLinkTypeEthernet);
  uint32_t usec = 0;
  for (const Frame& fr : frames) {
    put32(1);
    put32(usec++);
    put32(static_cast<uint32_t>(fr.size()));
    put32(static_cast<uint32_t>(fr.size()));
    std::fwrite(fr.data(), 1, fr.size(), f);
  }
  return std::fclose(f) == 0;
}

}  // namespace conduit::wire::test
