// server/discover (2026-07-28): what the server speaks and offers, asked per request in
// place of initialize (see era2026.h).
#include "mcp/era2026.h"
#include "mcp/session_impl.h"

namespace mcp {

Json Session::Impl::Discover(const Json& /*params*/, Context& ctx) {
  {
    std::lock_guard lock(mu);
    if (phase != Phase::kStateless) {
      throw RpcException(kMethodNotFound,
                         "Method not found: server/discover belongs to protocol version " +
                             std::string(era2026::kVersion) + "; this session initialized " +
                             version);
    }
  }
  Json caps = server->Capabilities();
  // listChanged and subscribe stay: a new-era client gets them through subscriptions/listen
  // (listen.cc).
  // The Tasks extension's methods are served to every new-era client that declares it.
  caps["extensions"][kTasksExtension] = Json::object();
  Json supported = Json::array();
  for (const char* v : era2026::kStatelessVersions) supported.push_back(v);
  const ServerOptions& o = server->options;
  Json server_info = {{"name", o.name}, {"version", o.version}};
  if (!o.title.empty()) server_info["title"] = o.title;
  Json result = {{"supportedVersions", supported},
                 {"capabilities", caps},
                 {"_meta", {{era2026::kMetaServerInfo, server_info}}}};
  std::string instructions =
      o.session_instructions ? o.session_instructions(ctx.session()) : o.instructions;
  if (!instructions.empty()) result["instructions"] = instructions;
  return result;
}

}  // namespace mcp
