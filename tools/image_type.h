// Telling the pictures read_file returns as MCP image content (PNG, JPEG, GIF, WebP) by
// their first bytes, never by their names, and the size cap of that content.
// Pure functions, any thread.
#pragma once

#include <cstddef>
#include <string_view>

namespace mcpcell::tools {

// An image larger than this is refused as image content (read_file names the cap and the
// way on: base64 windows, or a smaller picture): clients and models take a few MiB.
inline constexpr size_t kMaxImageContentBytes = 5ull << 20;
// The bytes ImageMimeType needs to look at.
inline constexpr size_t kImageMagicBytes = 16;

// "image/png", "image/jpeg", "image/gif", "image/webp" when `head` (a file's first bytes)
// starts like one; "" otherwise.
std::string_view ImageMimeType(std::string_view head);

// Whether a file name ends like a picture (.png, .jpg, .jpeg, .gif, .webp, any case):
// list_files only reads the first bytes of such files to confirm.
bool HasImageExtension(std::string_view name);

}  // namespace mcpcell::tools
