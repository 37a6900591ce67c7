// A stand-in for the engine in control-plane tests: a thread that takes
// commands off the EngineChannel, records them, and acks each one. The tests
// use the recorded kAddClient pointers to play the engine's data-path role
// (consume SQ entries, produce CQEs) from the test thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "control/engine_channel.h"

namespace conduit::test {

class TestEngine {
 public:
  explicit TestEngine(control::EngineChannel& ch) : ch_(ch), thread_([this] { run(); }) {}
  ~TestEngine() {
    stop_ = true;
    thread_.join();
  }

  // Posts ev from the engine thread (the event ring has one producer), ahead of
  // the acks of commands submitted later.
  void inject(const control::EngineEvent& ev) {
    std::lock_guard lock(mu_);
    inject_.push_back(ev);
  }
  // Posts ev right after the ack of the next command with this op, as the
  // engine answers a command: a CM reply that arrives before the request
  // would find the QP in a state the request does not expect.
  void reply_to(control::EngineOp op, const control::EngineEvent& ev) {
    std::lock_guard lock(mu_);
    replies_.push_back({op, ev});
  }
  // Runs fn on the engine thread for each command, before its ack (the engine's work on
  // it: e.g. the flush completions a kRemoveQp writes into the client's CQ ring).
  void before_ack(std::function<void(const control::EngineCommand&)> fn) {
    std::lock_guard lock(mu_);
    before_ack_ = std::move(fn);
  }
  // The connection id kCmConnect acks carry.
  static constexpr uint32_t kCmConn = 77;

  std::vector<control::EngineCommand> commands() {
    std::lock_guard lock(mu_);
    return log_;
  }
  // Waits up to timeout until at least n commands with this op have arrived and
  // returns them (fewer on timeout). Commands the control server does not wait
  // on (kAddCq, kModifyQp) reach this thread after the client's call returns.
  std::vector<control::EngineCommand> wait_for_n(control::EngineOp op, size_t n,
                                                 std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    std::vector<control::EngineCommand> found;
    for (;;) {
      found.clear();
      {
        std::lock_guard lock(mu_);
        for (const auto& c : log_) {
          if (c.op == op) found.push_back(c);
        }
      }
      if (found.size() >= n || std::chrono::steady_clock::now() >= deadline) return found;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  // Waits up to timeout for a command with this op (and client, if non-zero).
  // The most recent command `op` of client_id the engine received; false when none.
  bool last(control::EngineOp op, uint32_t client_id, control::EngineCommand* out) {
    std::lock_guard lock(mu_);
    for (auto it = log_.rbegin(); it != log_.rend(); ++it) {
      if (it->op == op && it->client_id == client_id) {
        *out = *it;
        return true;
      }
    }
    return false;
  }
  bool wait_for(control::EngineOp op, uint32_t client_id, std::chrono::milliseconds timeout,
                control::EngineCommand* out = nullptr) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard lock(mu_);
        for (const auto& c : log_) {
          if (c.op == op && (client_id == 0 || c.client_id == client_id)) {
            if (out != nullptr) *out = c;
            return true;
          }
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }

 private:
  void run() {
    control::EngineCommand cmd[16];
    while (!stop_) {
      std::vector<control::EngineEvent> injected;
      {
        std::lock_guard lock(mu_);
        injected.swap(inject_);
      }
      for (const auto& ev : injected) {
        while (!ch_.post_event(ev) && !stop_) std::this_thread::yield();
      }
      uint32_t n = ch_.poll_commands(cmd, 16);
      for (uint32_t i = 0; i < n; ++i) {
        std::function<void(const control::EngineCommand&)> hook;
        {
          std::lock_guard lock(mu_);
          log_.push_back(cmd[i]);
          hook = before_ack_;
        }
        if (hook) hook(cmd[i]);
        control::EngineEvent ev;
        ev.cookie = cmd[i].cookie;
        ev.kind = control::EngineEventKind::kAck;
        if (cmd[i].op == control::EngineOp::kCmConnect) ev.cm.conn = kCmConn;
        while (!ch_.post_event(ev) && !stop_) std::this_thread::yield();
        std::optional<control::EngineEvent> answer;  // at most one reply per command
        {
          std::lock_guard lock(mu_);
          auto it = std::find_if(replies_.begin(), replies_.end(),
                                 [&](const auto& r) { return r.first == cmd[i].op; });
          if (it != replies_.end()) {
            answer = it->second;
            replies_.erase(it);
          }
        }
        if (answer) {
          while (!ch_.post_event(*answer) && !stop_) std::this_thread::yield();
        }
      }
      if (n == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  control::EngineChannel& ch_;
  std::mutex mu_;
  std::vector<control::EngineCommand> log_;
  std::vector<control::EngineEvent> inject_;
  std::vector<std::pair<control::EngineOp, control::EngineEvent>> replies_;
  std::function<void(const control::EngineCommand&)> before_ack_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace conduit::test
