// Base64 (RFC 4648, standard alphabet, with padding): write_file's binary content,
// read_file's binary results, npm integrity digests, MCP list cursors. Pure functions, no
// exceptions (cell init links base).
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace mcpcell {

std::string Base64Encode(std::string_view bytes);
// Skips ASCII whitespace (line-wrapped input); refuses other characters outside the
// alphabet, data after '=' and bad padding, saying where ("invalid base64 at character 2").
Result<std::string> Base64Decode(std::string_view text);

}  // namespace mcpcell
