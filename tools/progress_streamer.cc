#include "tools/progress_streamer.h"

#include "base/utf8.h"

namespace mcpcell::tools {

namespace {
bool HasProgressToken(const mcp::Context& ctx) {
  const mcp::Json& meta = ctx.meta();
  return meta.is_object() && meta.contains("progressToken") && !meta["progressToken"].is_null();
}
}  // namespace

ProgressStreamer::ProgressStreamer(mcp::Context& ctx, const CellToolsConfig& config)
    : ctx_(ctx),
      config_(config),
      enabled_(HasProgressToken(ctx)),
      started_(std::chrono::steady_clock::now()),
      last_sent_(started_) {
  if (enabled_) heartbeat_ = std::jthread([this](std::stop_token st) { Heartbeat(st); });
}

ProgressStreamer::~ProgressStreamer() { Stop(); }

void ProgressStreamer::Add(std::string_view stream_name, std::string_view chunk) {
  if (!enabled_ || chunk.empty()) return;
  std::lock_guard lock(mu_);
  if (stream_name != last_stream_) {
    if (!pending_.empty()) pending_ += '\n';
    pending_ += "[" + std::string(stream_name) + "] ";
    last_stream_ = stream_name;
  }
  size_t room = config_.progress_max_message_bytes > pending_.size()
                    ? config_.progress_max_message_bytes - pending_.size()
                    : 0;
  pending_.append(chunk.substr(0, room));
  dropped_ += chunk.size() > room ? chunk.size() - room : 0;
  progress_ += static_cast<double>(chunk.size());
  // Sending is the heartbeat thread's job: a client that stops reading must never stall
  // the exec thread, which enforces the timeout and cancellation.
}

std::string ProgressStreamer::TakeMessageLocked() {
  std::string message = ToValidUtf8(pending_);
  if (dropped_ > 0) {
    message += "\n[" + std::to_string(dropped_) + " bytes not shown in progress]";
  }
  if (message.empty()) {
    auto secs = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() -
                                                                 started_);
    message = "still running (" + std::to_string(secs.count()) + " s)";
  }
  pending_.clear();
  dropped_ = 0;
  last_stream_.clear();
  last_sent_ = std::chrono::steady_clock::now();
  return message;
}

void ProgressStreamer::SendUnlocked(std::unique_lock<std::mutex>& lock, std::string message) {
  progress_ += 1;  // strictly increasing, as the spec asks; only this thread sends
  double value = progress_;
  lock.unlock();
  ctx_.Progress(value, 0, message);
  lock.lock();
}

void ProgressStreamer::Heartbeat(std::stop_token stop) {
  std::unique_lock lock(mu_);
  while (!stop.stop_requested()) {
    cv_.wait_for(lock, stop, config_.progress_min_interval, [] { return false; });
    if (stop.stop_requested()) break;
    auto since = std::chrono::steady_clock::now() - last_sent_;
    if (!pending_.empty() || since >= config_.progress_heartbeat)
      SendUnlocked(lock, TakeMessageLocked());
  }
  if (!pending_.empty()) SendUnlocked(lock, TakeMessageLocked());  // the last output
}

void ProgressStreamer::Stop() {
  if (!enabled_) return;
  if (heartbeat_.joinable()) {
    heartbeat_.request_stop();
    heartbeat_.join();  // it sends what is still pending before it ends
  }
}

}  // namespace mcpcell::tools
