// UTF-8 validation and repair (see utf8.h).
#include "base/utf8.h"

#include <cstdint>

namespace mcpcell {

namespace {
// Length of the valid UTF-8 sequence at s[i], or 0 when invalid (overlongs, surrogates
// and code points above U+10FFFF are invalid, as nlohmann/json's dump requires).
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if ((c & 0xE0) == 0xC0)
    n = 2, cp = c & 0x1F;
  else if ((c & 0xF0) == 0xE0)
    n = 3, cp = c & 0x0F;
  else if ((c & 0xF8) == 0xF0)
    n = 4, cp = c & 0x07;
  else
    return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}
}  // namespace

std::string ToValidUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    size_t n = Utf8SequenceLength(bytes, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(bytes.substr(i, n));
      i += n;
    }
  }
  return out;
}

bool LooksBinary(std::string_view bytes) {
  std::string_view sample = bytes.substr(0, 64 * 1024);
  if (sample.find('\0') != std::string_view::npos) return true;
  for (size_t i = 0; i < sample.size();) {
    size_t n = Utf8SequenceLength(sample, i);
    if (n == 0) {
      // A multi-byte character cut by the end of the sample is not evidence of binary.
      bool cut_by_sample = sample.size() < bytes.size() && i + 4 > sample.size();
      return !cut_by_sample;
    }
    i += n;
  }
  return false;
}

}  // namespace mcpcell
