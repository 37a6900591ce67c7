// The lock-free link between the control thread and the engine: an SPSC
// command ring (control -> engine) and an SPSC event ring (engine -> control),
// both shm::SpscProducer/SpscConsumer over process-private memory, plus one
// eventfd per direction so either side can sleep.
//
// Thread roles (each method is for exactly one side):
//   control thread: submit(), poll_events(), control_wake_fd()
//   engine thread:  poll_commands(), post_event(), engine_wake_fd()
//   any thread:     wake_engine()
// submit() kicks the engine's eventfd every time (control operations are rare,
// a syscall each is fine); post_event() kicks the control eventfd likewise, so
// the Asio thread can wait on it. Neither side ever blocks on the other: a full
// ring makes submit() return false (the control thread then answers the client
// with -EBUSY) and post_event() return false (the engine retries next loop).
#pragma once

#include <cstdint>
#include <memory>

#include "control/engine_command.h"
#include "shm/doorbell.h"
#include "shm/spsc_ring.h"

namespace conduit::control {

class EngineChannel {
 public:
  // depth: entries per ring, a power of two.
  static int create(uint32_t depth, std::unique_ptr<EngineChannel>* out);
  ~EngineChannel();
  EngineChannel(const EngineChannel&) = delete;
  EngineChannel& operator=(const EngineChannel&) = delete;

  // ---- control thread ----
  bool submit(const EngineCommand& cmd);
  uint32_t poll_events(EngineEvent* out, uint32_t max);
  int control_wake_fd() const { return control_wake_.fd(); }
  void drain_control_wake() const { control_wake_.drain(); }

  // ---- engine thread ----
  uint32_t poll_commands(EngineCommand* out, uint32_t max);
  bool post_event(const EngineEvent& ev);
  int engine_wake_fd() const { return engine_wake_.fd(); }
  void drain_engine_wake() const { engine_wake_.drain(); }

  // ---- any thread ----
  // Ends the engine's idle sleep (Engine::stop: the stop flag is seen at once, not when the
  // sleep times out). An eventfd write: no lock, never blocks.
  void wake_engine() const { engine_wake_.kick(); }

 private:
  EngineChannel() = default;

  struct RingMemory;
  std::unique_ptr<RingMemory> mem_;
  shm::SpscProducer<EngineCommand> cmd_tx_;
  shm::SpscConsumer<EngineCommand> cmd_rx_;
  shm::SpscProducer<EngineEvent> ev_tx_;
  shm::SpscConsumer<EngineEvent> ev_rx_;
  shm::EventFd engine_wake_;
  shm::EventFd control_wake_;
};

}  // namespace conduit::control
