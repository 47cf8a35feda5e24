// ProgressStreamer: sends a running program's new output to the client as
// notifications/progress (the output in `message`), rate-limited, plus a heartbeat while
// the program is silent, so clients that reset their request timeout on progress keep
// waiting. Does nothing when the request carried no progressToken.
//
// Threading: Add() is called from the exec thread and only buffers; the heartbeat thread
// alone sends (with the lock released), so notifications go out in order and a client
// that stops reading cannot stall the exec thread's timeout and cancellation checks.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "mcp/context.h"
#include "tools/tool_env.h"

namespace mcpcell::tools {

class ProgressStreamer {
 public:
  ProgressStreamer(mcp::Context& ctx, const CellToolsConfig& config);
  ~ProgressStreamer();  // Stop()
  void Add(std::string_view stream_name, std::string_view chunk);
  // Flushes what is pending and ends the heartbeat. Idempotent.
  void Stop();
  bool enabled() const { return enabled_; }

 private:
  // The pending output as one message (or a "still running" line), under mu_.
  std::string TakeMessageLocked();
  // Sends with mu_ released, so Add() never waits on the client.
  void SendUnlocked(std::unique_lock<std::mutex>& lock, std::string message);
  void Heartbeat(std::stop_token stop);

  mcp::Context& ctx_;
  const CellToolsConfig& config_;
  const bool enabled_;
  const std::chrono::steady_clock::time_point started_;
  std::mutex mu_;
  std::condition_variable_any cv_;
  std::string pending_;
  size_t dropped_ = 0;
  std::string last_stream_;
  double progress_ = 0;
  std::chrono::steady_clock::time_point last_sent_;
  std::jthread heartbeat_;
};

}  // namespace mcpcell::tools
