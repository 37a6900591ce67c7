// Big-endian (network order) unsigned integers for wire structs.
//
// A BigEndian<T, N> holds the N wire bytes of an unsigned integer of type T.
// It is a byte array, so it has alignment 1 and may sit at any offset in a
// packed header without unaligned-access UB. It never converts implicitly:
// reading needs .host(), writing needs from_host() or set(), so a forgotten
// byte swap is a compile error rather than a wrong packet. (No constructors:
// `Be16 x;` is uninitialised like any POD, `Be16{}` is zero.)
//
// Shared by every layer that parses frames (net/, wire/): include "net/be.h".
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace conduit::net {

template <typename T, std::size_t N = sizeof(T)>
struct BigEndian {
  static_assert(std::is_unsigned_v<T>, "BigEndian holds unsigned integers");
  static_assert(N >= 1 && N <= sizeof(T), "N wire bytes must fit in T");

  using value_type = T;
  static constexpr std::size_t kBytes = N;
  // Largest value N bytes can hold; set() masks to it.
  static constexpr T kMax =
      N == sizeof(T) ? static_cast<T>(~T{0}) : static_cast<T>((T{1} << (8 * N)) - 1);

  static constexpr BigEndian from_host(T v) {
    BigEndian b;
    b.set(v);
    return b;
  }

  constexpr T host() const {
    T v = 0;
    for (std::size_t i = 0; i < N; ++i) v = static_cast<T>((v << 8) | bytes_[i]);
    return v;
  }

  // Stores the low N bytes of v.
  constexpr void set(T v) {
    for (std::size_t i = N; i-- > 0;) {
      bytes_[i] = static_cast<uint8_t>(v & 0xFF);
      v = static_cast<T>(N == 1 ? 0 : v >> 8);
    }
  }

  friend constexpr bool operator==(const BigEndian&, const BigEndian&) = default;

  // The wire bytes. Public and without an initializer so the type stays a
  // C-style POD: GCC ignores `packed` on structs with non-POD members, and
  // Be16{} still zero-initialises.
  std::array<uint8_t, N> bytes_;
};

using Be16 = BigEndian<uint16_t>;
using Be24 = BigEndian<uint32_t, 3>;
using Be32 = BigEndian<uint32_t>;
using Be64 = BigEndian<uint64_t>;

static_assert(sizeof(Be16) == 2 && alignof(Be16) == 1);
static_assert(sizeof(Be24) == 3 && alignof(Be24) == 1);
static_assert(sizeof(Be32) == 4 && alignof(Be32) == 1);
static_assert(sizeof(Be64) == 8 && alignof(Be64) == 1);
static_assert(std::is_trivial_v<Be32> && std::is_standard_layout_v<Be32>);

}  // namespace conduit::net
