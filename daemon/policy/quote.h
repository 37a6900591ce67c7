// Quoting of user text inside error messages.
#pragma once

#include <string>
#include <string_view>

namespace conduit::policy {

// 'text' in single quotes, non-printable bytes as \xNN, cut after 40 bytes:
// error messages stay one printable line whatever the file held.
std::string quote(std::string_view text);

}  // namespace conduit::policy
