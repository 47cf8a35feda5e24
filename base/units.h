// Human units, one grammar for policy files and command-line flags: sizes ("512MiB",
// "1GiB", "100MB", "4096", "512M", "2g") and durations ("30s", "15m", "2h", "1d").
// Parse functions return nullopt on anything else; the caller words the error (the policy
// loader names the field, the flags name the flag). No exceptions: cell init links base.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mcpcell {

// Bytes. Suffixes: B, KiB, MiB, GiB, TiB (1024) and KB, MB, GB, TB (1000), spelled as
// shown; K, M, G, T (1024, the flags' short form) in either case; a bare integer is bytes.
// No fractions, no spaces, no negatives, no overflow.
std::optional<uint64_t> ParseSize(std::string_view text);
// Whole seconds. Suffixes: s, m, h, d. No fractions, no negatives.
std::optional<std::chrono::seconds> ParseDuration(std::string_view text);

// The shortest exact human form: 1073741824 -> "1GiB", 90 -> "90B"; 3600s -> "1h".
std::string FormatSize(uint64_t bytes);
std::string FormatDuration(std::chrono::seconds d);

}  // namespace mcpcell
