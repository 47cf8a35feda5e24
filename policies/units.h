// Human units of policy files: sizes ("512MiB", "1GiB", "64KiB", "100MB", "4096") and
// durations ("30s", "15m", "2h", "1d", "1500ms" rounded up to whole seconds is refused).
// Parse functions return nullopt on anything else; the loader words the error.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mcpcell::policies {

// Bytes. Suffixes: B, KiB, MiB, GiB, TiB (1024) and KB, MB, GB, TB (1000); a bare integer
// is bytes. No fractions, no negatives, no overflow.
std::optional<uint64_t> ParseSize(std::string_view text);
// Whole seconds. Suffixes: s, m, h, d. No fractions, no negatives.
std::optional<std::chrono::seconds> ParseDuration(std::string_view text);

// The shortest exact human form: 1073741824 -> "1GiB", 90 -> "90B"; 3600s -> "1h".
std::string FormatSize(uint64_t bytes);
std::string FormatDuration(std::chrono::seconds d);

}  // namespace mcpcell::policies
