// The per-request `_meta` of the 2026-07-28 era and the result fields every new-era result
// carries (see era2026.h).
#include <algorithm>
#include <set>

#include "mcp/era2026.h"

namespace mcp::era2026 {

namespace {

RpcError BadMeta(const std::string& what) {
  return {kInvalidParams, "Invalid params: " + what, nullptr};
}

bool IsStatelessVersion(const std::string& v) {
  return std::any_of(std::begin(kStatelessVersions), std::end(kStatelessVersions),
                     [&](const char* known) { return v == known; });
}

}  // namespace

bool StartsNewEra(const std::string& method, const Json& params) {
  if (method == "server/discover") return true;
  if (!params.is_object()) return false;
  auto meta = params.find("_meta");
  return meta != params.end() && meta->is_object() && meta->contains(kMetaProtocolVersion);
}

std::variant<RequestMeta, RpcError> ParseRequestMeta(const Json& params) {
  if (!params.is_object() || !params.contains("_meta")) {
    return BadMeta(std::string("a 2026-07-28 request needs params._meta with \"") +
                   kMetaProtocolVersion + "\" and \"" + kMetaClientCapabilities + "\"");
  }
  const Json& meta = params["_meta"];
  if (!meta.is_object()) return BadMeta("params._meta must be an object");
  RequestMeta out;
  auto version = meta.find(kMetaProtocolVersion);
  if (version == meta.end()) {
    return BadMeta(std::string("params._meta lacks \"") + kMetaProtocolVersion + "\"");
  }
  auto caps = meta.find(kMetaClientCapabilities);
  if (caps == meta.end()) {
    return BadMeta(std::string("params._meta lacks \"") + kMetaClientCapabilities + "\"");
  }
  if (!caps->is_object()) {
    return BadMeta(std::string("params._meta[\"") + kMetaClientCapabilities +
                   "\"] must be an object");
  }
  if (!version->is_string() || !IsStatelessVersion(version->get<std::string>())) {
    Json supported = Json::array();
    for (const char* v : kStatelessVersions) supported.push_back(v);
    std::string requested = version->is_string() ? version->get<std::string>() : version->dump();
    return RpcError{kUnsupportedProtocolVersion,
                    "Unsupported protocol version \"" + requested + "\": this server speaks " +
                        supported.dump() + " without initialize",
                    {{"supported", supported}, {"requested", requested}}};
  }
  out.protocol_version = version->get<std::string>();
  out.client_capabilities = *caps;
  if (auto info = meta.find(kMetaClientInfo); info != meta.end()) {
    if (!info->is_object()) {
      return BadMeta(std::string("params._meta[\"") + kMetaClientInfo + "\"] must be an object");
    }
    out.client_info = *info;
  }
  if (auto level = meta.find(kMetaLogLevel); level != meta.end()) {
    auto parsed = level->is_string() ? ParseLogLevel(level->get<std::string>()) : std::nullopt;
    if (!parsed) {
      return BadMeta(std::string("params._meta[\"") + kMetaLogLevel + "\"] must be one of " +
                     "debug, info, notice, warning, error, critical, alert, emergency; got " +
                     level->dump());
    }
    out.log_level = parsed;
  }
  return out;
}

bool IsRemovedMethod(const std::string& method) {
  static const std::set<std::string, std::less<>> kRemoved = {
      "initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"};
  return kRemoved.count(method) > 0;
}

void DecorateResult(const std::string& method, Json& result) {
  if (!result.is_object()) return;
  if (!result.contains("resultType")) result["resultType"] = "complete";
  static const std::set<std::string, std::less<>> kCacheable = {
      "server/discover",          "tools/list",    "prompts/list", "resources/list",
      "resources/templates/list", "resources/read"};
  if (!kCacheable.count(method)) return;
  // Lists change when tools are registered at run time and resources are read live:
  // nothing may be reused without asking again, and only by this client.
  if (!result.contains("ttlMs")) result["ttlMs"] = 0;
  if (!result.contains("cacheScope")) result["cacheScope"] = "private";
}

int HttpStatusOf(const Json& response) {
  if (!response.is_object() || !response.contains("error")) return 200;
  int code = response["error"].value("code", 0);
  if (code == kMethodNotFound) return 404;
  if (code == kInvalidRequest || code == kInvalidParams || code == kHeaderMismatch ||
      code == kMissingClientCapability || code == kUnsupportedProtocolVersion) {
    return 400;
  }
  return 200;
}

RpcError MissingCapability(const std::string& name, const std::string& why) {
  return {kMissingClientCapability,
          "Missing required client capability \"" + name + "\": " + why +
              "; declare it in params._meta[\"" + kMetaClientCapabilities + "\"]",
          {{"requiredCapabilities", {{name, Json::object()}}}}};
}

}  // namespace mcp::era2026
