// Quoting of user text inside error messages.
#pragma once

#include <string>
#include <string_view>

namespace conduit::policy {

// 'text' in single quotes, non-printable bytes as \xNN, cut after 40 bytes:
// error messages stay one printable line whatever the file held.
std::string quote(std::string_view text);

// text with non-printable bytes as \xNN, not cut (for yaml-cpp's messages,
// which can embed the offending input byte).
std::string printable(std::string_view text);

}  // namespace conduit::policy
