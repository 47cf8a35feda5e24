// Pictures by their magic bytes (image_type.h).
#include "tools/image_type.h"

#include <cctype>
#include <string>

namespace mcpcell::tools {

std::string_view ImageMimeType(std::string_view head) {
  using namespace std::string_view_literals;
  if (head.starts_with("\x89PNG\r\n\x1a\n"sv)) return "image/png";
  if (head.starts_with("\xff\xd8\xff"sv)) return "image/jpeg";
  if (head.starts_with("GIF87a"sv) || head.starts_with("GIF89a"sv)) return "image/gif";
  if (head.size() >= 12 && head.starts_with("RIFF"sv) && head.substr(8, 4) == "WEBP"sv)
    return "image/webp";
  return "";
}

bool HasImageExtension(std::string_view name) {
  size_t dot = name.rfind('.');
  if (dot == std::string_view::npos) return false;
  std::string ext;
  for (char c : name.substr(dot + 1))
    ext += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == "png" || ext == "jpg" || ext == "jpeg" || ext == "gif" || ext == "webp";
}

}  // namespace mcpcell::tools
