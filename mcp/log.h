// The library's own diagnostics (not MCP `notifications/message`): a tiny process-wide
// logger writing one line per event to stderr or a file. Quiet by default (kWarning), and
// never to stdout, which belongs to the stdio transport. Thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "mcp/types.h"

namespace mcp::log {

void SetLevel(LogLevel level);
LogLevel Level();
// Appends to `path` from now on; an empty path means stderr. Returns an error text or "".
std::string SetFile(const std::string& path);

bool Enabled(LogLevel level);
void Write(LogLevel level, std::string_view message);

inline void Debug(std::string_view m) {
  if (Enabled(LogLevel::kDebug)) Write(LogLevel::kDebug, m);
}
inline void Info(std::string_view m) {
  if (Enabled(LogLevel::kInfo)) Write(LogLevel::kInfo, m);
}
inline void Warn(std::string_view m) {
  if (Enabled(LogLevel::kWarning)) Write(LogLevel::kWarning, m);
}
inline void Error(std::string_view m) {
  if (Enabled(LogLevel::kError)) Write(LogLevel::kError, m);
}

}  // namespace mcp::log
