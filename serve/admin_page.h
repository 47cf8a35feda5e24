// The operator page's files, served by the /admin route (serve/admin_api.h) without a token:
// they hold no data, and the script reads everything from /admin/api/... with the token the
// operator types in. The files are serve/admin_page/ (index.html, admin.css, admin.js),
// embedded in the binary at build time (serve/admin_page/embed.cmake writes them into a .cc
// as raw string literals), so the page needs nothing on disk, no framework and no CDN.
// Every answer carries a Content-Security-Policy that allows only 'self' (no inline script
// or style, no other origin, no framing) and no-store caching.
// Threading: pure; any thread.
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "mcp/http_server.h"

namespace mcpcell::serve {

inline constexpr const char* kAdminPageCsp =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

struct AdminPageFile {
  std::string_view name;  // "index.html"
  std::string_view content_type;
  std::string_view body;
};

// The embedded files (defined in the generated admin_page_files.cc).
std::span<const AdminPageFile> AdminPageFiles();

// The answer for a page path (/admin -> /admin/, /admin/, /admin/index.html and the other
// files), or nullopt when `in` is not for the page (the API's paths).
std::optional<mcp::HttpRouteResponse> ServeAdminPage(const mcp::HttpRouteRequest& in);

}  // namespace mcpcell::serve
