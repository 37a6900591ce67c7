// Fuzzes the control-message decoders: any bytes a client (or a daemon, for the
// reply decoder) sends must be rejected or accepted without crashing, and an
// accepted message must re-encode to exactly the bytes it came from.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "proto/control_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace conduit::proto;
  std::span<const uint8_t> in(data, size);
  CodecError err;
  RequestMessage req;
  if (decode_request(in, req, err)) {
    auto again = encode_request(req);
    if (again.size() != size || !std::equal(again.begin(), again.end(), data)) std::abort();
  } else if (err.code >= 0 || err.reason.empty()) {
    std::abort();  // every rejection names an errno and a reason
  }
  ReplyMessage rep;
  if (decode_reply(in, rep, err)) {
    auto again = encode_reply(rep);
    if (again.size() != size || !std::equal(again.begin(), again.end(), data)) std::abort();
  } else if (err.code >= 0 || err.reason.empty()) {
    std::abort();
  }
  return 0;
}
