// UTF-8 for text that goes into JSON: repair invalid sequences, and tell text from binary.
// Valid means what nlohmann/json's dump accepts: no overlong forms, no surrogates, nothing
// above U+10FFFF. Pure functions, no exceptions (cell init links base).
#pragma once

#include <string>
#include <string_view>

namespace mcpcell {

// Replaces invalid UTF-8 with U+FFFD so that any bytes can go into JSON text.
std::string ToValidUtf8(std::string_view bytes);
// True when `bytes` look binary (NUL bytes or invalid UTF-8 in the first 64 KiB; a
// character cut by the end of that sample does not count).
bool LooksBinary(std::string_view bytes);

}  // namespace mcpcell
