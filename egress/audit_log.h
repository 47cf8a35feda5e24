// Where the egress proxy's audit events go: a sink function, and the JSON-lines file that
// serves as the sink until the audit issue provides a real one
// ("<state dir>/audit/egress.jsonl").
//
// One event per connection attempt, emitted when the connection ends (proxy.h lists the
// fields). JsonLinesFile appends each event as one line with one write(2) on an O_APPEND
// descriptor, so lines from several threads or processes never interleave.
// Threading: JsonLinesFile::Write may be called from any thread.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace mcpcell::egress {

// Called on the proxy's threads, possibly from several at once (one per cell strand): it
// must be thread-safe, must not block for long and must not call back into the proxy.
using AuditSink = std::function<void(const nlohmann::json& event)>;

class JsonLinesFile {
 public:
  // Opens (creating it 0600, and its directory 0700, if needed) for appending.
  static Result<std::shared_ptr<JsonLinesFile>> Open(const std::string& path);
  ~JsonLinesFile();
  JsonLinesFile(const JsonLinesFile&) = delete;
  JsonLinesFile& operator=(const JsonLinesFile&) = delete;

  // Appends event as one line. Write errors are counted, not thrown: auditing must not take
  // the proxy down (failed_writes() lets the server report them). A line is written whole
  // or not at all: a short write (disk full) is truncated away, so every line parses.
  void Write(const nlohmann::json& event);
  uint64_t failed_writes() const;
  // Why the last failed write failed ("No space left on device", ...); "" if none did.
  std::string last_error() const;
  // A sink that keeps this file alive.
  static AuditSink Sink(std::shared_ptr<JsonLinesFile> file);

 private:
  explicit JsonLinesFile(int fd) : fd_(fd) {}
  int fd_;
  mutable std::mutex mu_;
  uint64_t failed_ = 0;
  std::string last_error_;
};

// "<state_dir>/audit/egress.jsonl"
std::string EgressAuditPath(const std::string& state_dir);

// "2025-01-31T12:34:56.789Z"
std::string Rfc3339UtcNow();

}  // namespace mcpcell::egress
