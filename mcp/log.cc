#include "mcp/log.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>

namespace mcp::log {
namespace {
std::atomic<LogLevel> g_level{LogLevel::kWarning};
std::mutex g_mu;
FILE* g_file = nullptr;  // null = stderr; guarded by g_mu
}  // namespace

void SetLevel(LogLevel level) { g_level.store(level); }
LogLevel Level() { return g_level.load(); }
bool Enabled(LogLevel level) { return level != LogLevel::kOff && level >= g_level.load(); }

std::string SetFile(const std::string& path) {
  FILE* f = nullptr;
  if (!path.empty()) {
    f = std::fopen(path.c_str(), "ae");
    if (!f) return "open log file \"" + path + "\": " + std::strerror(errno);
  }
  std::lock_guard lock(g_mu);
  if (g_file) std::fclose(g_file);
  g_file = f;
  return "";
}

void Write(LogLevel level, std::string_view message) {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string_view name = LogLevelName(level);
  std::lock_guard lock(g_mu);
  FILE* out = g_file ? g_file : stderr;
  std::fprintf(out, "%s.%03dZ %.*s mcp: %.*s\n", stamp, static_cast<int>(ms.count()),
               static_cast<int>(name.size()), name.data(), static_cast<int>(message.size()),
               message.data());
  std::fflush(out);
}

}  // namespace mcp::log
