#include "control/engine_channel.h"

#include <cerrno>
#include <vector>

namespace conduit::control {

// The rings' control blocks and slots. Aligned like the shared-memory ones so
// the two indices stay on separate cache lines.
struct EngineChannel::RingMemory {
  alignas(128) conduit_shm_ring_ctrl cmd_ctrl{};
  alignas(128) conduit_shm_ring_ctrl ev_ctrl{};
  std::vector<EngineCommand> cmd_slots;
  std::vector<EngineEvent> ev_slots;
};

EngineChannel::~EngineChannel() = default;

int EngineChannel::create(uint32_t depth, std::unique_ptr<EngineChannel>* out) {
  if (!shm::is_pow2(depth)) return -EINVAL;
  std::unique_ptr<EngineChannel> ch(new EngineChannel());
  ch->mem_ = std::make_unique<RingMemory>();
  ch->mem_->cmd_slots.resize(depth);
  ch->mem_->ev_slots.resize(depth);
  shm::reset_ring(&ch->mem_->cmd_ctrl, 0);
  shm::reset_ring(&ch->mem_->ev_ctrl, 0);
  ch->cmd_tx_ =
      shm::SpscProducer<EngineCommand>(&ch->mem_->cmd_ctrl, ch->mem_->cmd_slots.data(), depth, 0);
  ch->cmd_rx_ =
      shm::SpscConsumer<EngineCommand>(&ch->mem_->cmd_ctrl, ch->mem_->cmd_slots.data(), depth, 0);
  ch->ev_tx_ =
      shm::SpscProducer<EngineEvent>(&ch->mem_->ev_ctrl, ch->mem_->ev_slots.data(), depth, 0);
  ch->ev_rx_ =
      shm::SpscConsumer<EngineEvent>(&ch->mem_->ev_ctrl, ch->mem_->ev_slots.data(), depth, 0);
  if (int rc = shm::EventFd::create(&ch->engine_wake_); rc < 0) return rc;
  if (int rc = shm::EventFd::create(&ch->control_wake_); rc < 0) return rc;
  *out = std::move(ch);
  return 0;
}

bool EngineChannel::submit(const EngineCommand& cmd) {
  if (!cmd_tx_.try_enqueue(cmd)) return false;
  engine_wake_.kick();
  return true;
}

uint32_t EngineChannel::poll_events(EngineEvent* out, uint32_t max) {
  return ev_rx_.dequeue_burst(out, max);
}

uint32_t EngineChannel::poll_commands(EngineCommand* out, uint32_t max) {
  return cmd_rx_.dequeue_burst(out, max);
}

bool EngineChannel::post_event(const EngineEvent& ev) {
  if (!ev_tx_.try_enqueue(ev)) return false;
  control_wake_.kick();
  return true;
}

const char* engine_op_name(EngineOp op) {
  switch (op) {
    case EngineOp::kAddClient:
      return "add_client";
    case EngineOp::kRemoveClient:
      return "remove_client";
    case EngineOp::kAddCq:
      return "add_cq";
    case EngineOp::kRemoveCq:
      return "remove_cq";
    case EngineOp::kAddQp:
      return "add_qp";
    case EngineOp::kModifyQp:
      return "modify_qp";
    case EngineOp::kRemoveQp:
      return "remove_qp";
    case EngineOp::kAddMr:
      return "add_mr";
    case EngineOp::kRemoveMr:
      return "remove_mr";
    case EngineOp::kQueryQp:
      return "query_qp";
    case EngineOp::kSnapshot:
      return "snapshot";
    case EngineOp::kCmListen:
      return "cm_listen";
    case EngineOp::kCmUnlisten:
      return "cm_unlisten";
    case EngineOp::kCmConnect:
      return "cm_connect";
    case EngineOp::kCmAccept:
      return "cm_accept";
    case EngineOp::kCmReject:
      return "cm_reject";
    case EngineOp::kCmDisconnect:
      return "cm_disconnect";
    case EngineOp::kSetPolicy:
      return "set_policy";
    case EngineOp::kKernelFrame:
      return "kernel_frame";
  }
  return "unknown";
}

}  // namespace conduit::control
