#include "wire/opcode.h"

#include <catch2/catch.hpp>

#include "wire/roce_header.h"

using namespace conduit::wire;

TEST_CASE("opcode table: header layout per opcode") {
  CHECK(opcode_info(Opcode::kSendOnly).header_bytes == kBthBytes);
  CHECK(opcode_info(Opcode::kSendOnlyImm).imm_offset == kBthBytes);
  CHECK(opcode_info(Opcode::kWriteFirst).reth_offset == kBthBytes);
  CHECK(opcode_info(Opcode::kWriteFirst).header_bytes == kBthBytes + kRethBytes);
  CHECK(opcode_info(Opcode::kWriteMiddle).header_bytes == kBthBytes);
  CHECK(opcode_info(Opcode::kWriteOnlyImm).imm_offset == kBthBytes + kRethBytes);
  CHECK(opcode_info(Opcode::kReadRequest).header_bytes == kBthBytes + kRethBytes);
  CHECK(opcode_info(Opcode::kReadResponseMiddle).aeth_offset == 0);
  CHECK(opcode_info(Opcode::kReadResponseFirst).aeth_offset == kBthBytes);
  CHECK(opcode_info(Opcode::kAcknowledge).header_bytes == kBthBytes + kAethBytes);
  CHECK(opcode_info(Opcode::kAtomicAcknowledge).atomic_ack_eth_offset == kBthBytes + kAethBytes);
  CHECK(opcode_info(Opcode::kCompareSwap).header_bytes == kBthBytes + kAtomicEthBytes);
  CHECK(opcode_info(Opcode::kSendOnlyInvalidate).ieth_offset == kBthBytes);
  CHECK(opcode_info(Opcode::kCnp).header_bytes == kBthBytes + 16);
}

TEST_CASE("opcode table: roles") {
  CHECK(opcode_info(Opcode::kSendOnly).has(kOpRequest | kOpSend | kOpFirst | kOpLast));
  CHECK(opcode_info(Opcode::kSendMiddle).has(kOpMiddle));
  CHECK_FALSE(opcode_info(Opcode::kSendMiddle).has(kOpFirst));
  CHECK(opcode_info(Opcode::kReadRequest).has(kOpRequest | kOpRead));
  CHECK_FALSE(opcode_info(Opcode::kReadRequest).has(kOpPayload));
  CHECK(opcode_info(Opcode::kReadResponseOnly).has(kOpResponse | kOpPayload));
  CHECK_FALSE(opcode_info(Opcode::kAcknowledge).has(kOpPayload));
  CHECK(opcode_info(Opcode::kCnp).has(kOpCnp));
}

TEST_CASE("opcode table: every byte maps to an entry; unknown ones are invalid") {
  int valid = 0;
  for (int op = 0; op < 256; ++op) {
    const auto& info = opcode_info(static_cast<uint8_t>(op));
    REQUIRE(info.name != nullptr);
    if (info.has(kOpValid)) ++valid;
  }
  CHECK(valid == 24);  // 23 RC opcodes (0x15 is reserved) + CNP
  CHECK_FALSE(opcode_info(uint8_t{0x15}).has(kOpValid));
  CHECK_FALSE(opcode_info(uint8_t{0x24}).has(kOpValid));  // UC SEND_ONLY: not RC
  CHECK_FALSE(opcode_info(uint8_t{0x64}).has(kOpValid));  // UD SEND_ONLY
}

TEST_CASE("AETH syndrome encodings") {
  CHECK(Aeth::ack(5).syndrome == 0x1F);
  CHECK(Aeth::ack(5).type() == AethType::kAck);
  CHECK(Aeth::rnr_nak(1, 14).syndrome == 0x2E);
  CHECK(Aeth::rnr_nak(1, 14).type() == AethType::kRnrNak);
  CHECK(Aeth::nak(1, NakCode::kPsnSequenceError).syndrome == 0x60);
  CHECK(Aeth::nak(1, NakCode::kRemoteAccessError).syndrome == 0x62);
  CHECK(Aeth::nak(1, NakCode::kRemoteAccessError).type() == AethType::kNak);
  CHECK(Aeth::ack(0x1234567).msn == 0x234567);
}
