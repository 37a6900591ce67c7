// Encoding and strict decoding of control messages (layout: control_protocol.h).
//
// Decoding never trusts its input: the header's magic, version, type and body
// length are checked, every field is range-checked, strings are length-limited
// and restricted to a safe alphabet, and trailing bytes are an error. A failed
// decode returns the negative errno and a reason to put into the error reply.
// Thread role: pure functions, safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "proto/control_protocol.h"

namespace conduit::proto {

struct CodecError {
  int code = 0;  // negative errno
  std::string reason;
};

struct Header {
  uint32_t magic = 0;
  uint16_t version = 0;
  uint16_t type = 0;
  uint32_t seq = 0;
  uint32_t body_len = 0;
};

// Reads the 16-byte header without validating it (for replying to a bad request
// with the right seq). False if the datagram is shorter than a header.
bool peek_header(std::span<const uint8_t> bytes, Header& out);

std::vector<uint8_t> encode_request(const RequestMessage& msg);
std::vector<uint8_t> encode_reply(const ReplyMessage& msg);

// Both return false and fill `err` on any malformed input; `out` is then unspecified.
bool decode_request(std::span<const uint8_t> bytes, RequestMessage& out, CodecError& err);
bool decode_reply(std::span<const uint8_t> bytes, ReplyMessage& out, CodecError& err);

ReplyMessage make_error_reply(MsgType type, uint32_t seq, int code, std::string reason);

// Field checks shared with the client library, which validates before sending.
bool is_valid_name(const std::string& s, size_t max_bytes);
// Checks a ModifyQp attribute set: known mask bits, fields outside the mask zero,
// fields inside in range. Fills `why` on failure.
bool validate_qp_attr(const QpAttr& a, std::string& why);

}  // namespace conduit::proto
