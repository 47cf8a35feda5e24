// Human units (see units.h). No exceptions: cell init links base.
#include "base/units.h"

#include <array>
#include <utility>

namespace mcpcell {
namespace {

// Splits "512MiB" into 512 and "MiB"; nullopt without leading digits or on overflow.
std::optional<std::pair<uint64_t, std::string_view>> SplitNumber(std::string_view text) {
  size_t i = 0;
  uint64_t n = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    uint64_t d = static_cast<uint64_t>(text[i] - '0');
    if (n > (UINT64_MAX - d) / 10) return std::nullopt;
    n = n * 10 + d;
    ++i;
  }
  if (i == 0) return std::nullopt;
  return std::make_pair(n, text.substr(i));
}

bool MulChecked(uint64_t a, uint64_t b, uint64_t* out) {
  if (a != 0 && b > UINT64_MAX / a) return false;
  *out = a * b;
  return true;
}

constexpr std::array<std::pair<std::string_view, uint64_t>, 9> kSizeUnits = {{
    {"B", 1},
    {"KiB", 1ull << 10},
    {"MiB", 1ull << 20},
    {"GiB", 1ull << 30},
    {"TiB", 1ull << 40},
    {"KB", 1000},
    {"MB", 1000 * 1000},
    {"GB", 1000 * 1000 * 1000},
    {"TB", 1000ull * 1000 * 1000 * 1000},
}};

// The flags' short form ("512M", "2g"): one letter, either case, 1024-based.
constexpr std::array<std::pair<char, uint64_t>, 4> kSizeLetters = {{
    {'k', 1ull << 10},
    {'m', 1ull << 20},
    {'g', 1ull << 30},
    {'t', 1ull << 40},
}};

std::optional<uint64_t> SizeMultiplier(std::string_view suffix) {
  for (const auto& [name, mult] : kSizeUnits) {
    if (suffix == name) return mult;
  }
  if (suffix.size() == 1) {
    char c =
        suffix[0] >= 'A' && suffix[0] <= 'Z' ? static_cast<char>(suffix[0] - 'A' + 'a') : suffix[0];
    for (const auto& [letter, mult] : kSizeLetters) {
      if (c == letter) return mult;
    }
  }
  return std::nullopt;
}

constexpr std::array<std::pair<std::string_view, uint64_t>, 4> kTimeUnits = {{
    {"s", 1},
    {"m", 60},
    {"h", 3600},
    {"d", 86400},
}};

}  // namespace

std::optional<uint64_t> ParseSize(std::string_view text) {
  auto split = SplitNumber(text);
  if (!split) return std::nullopt;
  if (split->second.empty()) return split->first;
  auto mult = SizeMultiplier(split->second);
  uint64_t out;
  if (!mult || !MulChecked(split->first, *mult, &out)) return std::nullopt;
  return out;
}

std::optional<std::chrono::seconds> ParseDuration(std::string_view text) {
  auto split = SplitNumber(text);
  if (!split) return std::nullopt;
  for (const auto& [suffix, mult] : kTimeUnits) {
    uint64_t out;
    if (split->second == suffix) {
      if (!MulChecked(split->first, mult, &out) || out > (1ull << 40)) return std::nullopt;
      return std::chrono::seconds(static_cast<int64_t>(out));
    }
  }
  return std::nullopt;
}

std::string FormatSize(uint64_t bytes) {
  static constexpr std::array<std::pair<const char*, uint64_t>, 4> kBinary = {{
      {"TiB", 1ull << 40},
      {"GiB", 1ull << 30},
      {"MiB", 1ull << 20},
      {"KiB", 1ull << 10},
  }};
  for (const auto& [suffix, mult] : kBinary) {
    if (bytes != 0 && bytes % mult == 0) return std::to_string(bytes / mult) + suffix;
  }
  return std::to_string(bytes) + "B";
}

std::string FormatDuration(std::chrono::seconds d) {
  int64_t s = d.count();
  if (s != 0 && s % 86400 == 0) return std::to_string(s / 86400) + "d";
  if (s != 0 && s % 3600 == 0) return std::to_string(s / 3600) + "h";
  if (s != 0 && s % 60 == 0) return std::to_string(s / 60) + "m";
  return std::to_string(s) + "s";
}

}  // namespace mcpcell
