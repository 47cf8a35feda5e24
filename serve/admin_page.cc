#include "serve/admin_page.h"

#include <nlohmann/json.hpp>
#include <string>

namespace mcpcell::serve {
namespace {

const AdminPageFile* FindFile(std::string_view name) {
  for (const AdminPageFile& file : AdminPageFiles()) {
    if (file.name == name) return &file;
  }
  return nullptr;
}

void AddPageHeaders(mcp::HttpRouteResponse& out) {
  out.headers.emplace_back("Content-Security-Policy", kAdminPageCsp);
  out.headers.emplace_back("X-Content-Type-Options", "nosniff");
  out.headers.emplace_back("Referrer-Policy", "no-referrer");
  out.headers.emplace_back("Cache-Control", "no-store");
}

}  // namespace

std::optional<mcp::HttpRouteResponse> ServeAdminPage(const mcp::HttpRouteRequest& in) {
  mcp::HttpRouteResponse out;
  if (in.path == "/admin") {
    out.status = 308;
    out.content_type = "text/plain; charset=utf-8";
    out.body = "The operator page is at /admin/\n";
    out.headers.emplace_back("Location", "/admin/");
    return out;
  }
  const std::string prefix = "/admin/";
  if (in.path.rfind(prefix, 0) != 0) return std::nullopt;
  std::string name = in.path.substr(prefix.size());
  if (name.empty()) name = "index.html";
  const AdminPageFile* file = FindFile(name);
  if (!file) return std::nullopt;  // an API path, or unknown: after the token check
  AddPageHeaders(out);
  if (in.method != "GET") {
    out.status = 405;
    out.body = nlohmann::json{{"error", "Method Not Allowed: " + in.path + " takes GET"}}.dump();
    out.headers.emplace_back("Allow", "GET");
    return out;
  }
  out.content_type = std::string(file->content_type);
  out.body = std::string(file->body);
  return out;
}

}  // namespace mcpcell::serve
