#include "mcp/types.h"

#include <array>

namespace mcp {
namespace {
constexpr std::array<std::string_view, 9> kLevelNames = {
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency", "off"};
}  // namespace

Json RpcError::ToJson() const {
  Json j = {{"code", code}, {"message", message}};
  if (!data.is_null()) j["data"] = data;
  return j;
}

std::string_view LogLevelName(LogLevel level) { return kLevelNames[static_cast<size_t>(level)]; }

std::optional<LogLevel> ParseLogLevel(std::string_view name, bool allow_off) {
  for (size_t i = 0; i < kLevelNames.size(); ++i) {
    if (kLevelNames[i] != name) continue;
    auto level = static_cast<LogLevel>(i);
    if (level == LogLevel::kOff && !allow_off) return std::nullopt;
    return level;
  }
  return std::nullopt;
}

}  // namespace mcp
