// The 2026-07-28 HTTP header rules (see http_headers.h).
#include "mcp/http_headers.h"

#include <variant>

#include "base/base64.h"
#include "mcp/era2026.h"

namespace mcp {

namespace {

RpcError Mismatch(const std::string& what) {
  return {era2026::kHeaderMismatch, "Header mismatch: " + what, nullptr};
}

// The text a header mirrors an argument as; nullopt for objects and arrays (not mirrored).
std::optional<std::string> HeaderText(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number() || value.is_boolean()) return value.dump();
  return std::nullopt;
}

// A header value as the client meant it: "=?base64?B?=" decoded, anything else literal.
std::variant<std::string, RpcError> DecodeHeaderValue(const std::string& name,
                                                      const std::string& raw) {
  static const std::string kOpen = "=?base64?", kClose = "?=";
  if (raw.size() < kOpen.size() + kClose.size() || raw.compare(0, kOpen.size(), kOpen) != 0 ||
      raw.compare(raw.size() - kClose.size(), kClose.size(), kClose) != 0) {
    return raw;
  }
  std::string inner = raw.substr(kOpen.size(), raw.size() - kOpen.size() - kClose.size());
  auto decoded = mcpcell::Base64Decode(inner);
  if (!decoded || inner.find_first_of(" \t\r\n") != std::string::npos) {
    return Mismatch(name + " carries invalid base64 (" +
                    (decoded ? std::string("whitespace") : decoded.error().message) + ")");
  }
  return decoded.value();
}

}  // namespace

std::optional<RpcError> CheckRoutingHeaders(const HttpRequest& req, const Json& request) {
  const std::string method = request.value("method", "");
  if (!req.has_header("Mcp-Method")) return Mismatch("the Mcp-Method header is missing");
  if (std::string header = req.get_header_value("Mcp-Method"); header != method) {
    return Mismatch("Mcp-Method \"" + header + "\" but the body's method is \"" + method + "\"");
  }
  const char* field =
      method == "tools/call" || method == "prompts/get" ? "name"
      : method == "resources/read"                      ? "uri"
      : method == "tasks/get" || method == "tasks/update" || method == "tasks/cancel"
          ? "taskId"  // the Tasks extension routes by task id
          : nullptr;
  if (!field) return std::nullopt;
  const Json params = request.value("params", Json::object());
  const Json value = params.is_object() ? params.value(field, Json()) : Json();
  if (!value.is_string()) return std::nullopt;  // the method itself reports the bad params
  if (!req.has_header("Mcp-Name")) return Mismatch("the Mcp-Name header is missing");
  if (std::string header = req.get_header_value("Mcp-Name"); header != value) {
    return Mismatch("Mcp-Name \"" + header + "\" but params." + field + " is " + value.dump());
  }
  return std::nullopt;
}

std::optional<RpcError> CheckParamHeaders(const HttpRequest& req, const Json& arguments,
                                          const Json& input_schema) {
  if (!input_schema.is_object() || !input_schema.contains("properties") ||
      !input_schema["properties"].is_object()) {
    return std::nullopt;
  }
  for (const auto& [param, schema] : input_schema["properties"].items()) {
    if (!schema.is_object() || !schema.contains("x-mcp-header") ||
        !schema["x-mcp-header"].is_string()) {
      continue;
    }
    const std::string header = "Mcp-Param-" + schema["x-mcp-header"].get<std::string>();
    const Json value = arguments.is_object() ? arguments.value(param, Json()) : Json();
    auto text = HeaderText(value);
    if (!req.has_header(header)) {
      if (!text) continue;
      return Mismatch(header + " is missing but argument \"" + param + "\" is " + value.dump());
    }
    if (!text) {
      return Mismatch(header + " is sent but argument \"" + param + "\" is absent or null");
    }
    auto decoded = DecodeHeaderValue(header, req.get_header_value(header));
    if (auto* error = std::get_if<RpcError>(&decoded)) return *error;
    if (std::get<std::string>(decoded) != *text) {
      return Mismatch(header + " does not match argument \"" + param + "\" (" + value.dump() + ")");
    }
  }
  return std::nullopt;
}

}  // namespace mcp
