#include "mcp/jsonrpc.h"

namespace mcp::jsonrpc {
namespace {
Invalid Bad(Json id, std::string message) {
  return Invalid{std::move(id), RpcError{kInvalidRequest, "Invalid Request: " + message, nullptr}};
}
}  // namespace

std::variant<Json, RpcError> Parse(std::string_view text) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    // e.what() reads "[json.exception.parse_error.101] parse error at line 1, column 2: ...".
    // Not only parse_error: a number too large for a double ("1e400") is out_of_range.406,
    // which, uncaught, would end the reader thread and the whole server (found by fuzzing).
    std::string what = e.what();
    if (auto pos = what.find("] "); pos != std::string::npos) what = what.substr(pos + 2);
    return RpcError{kParseError, "Parse error: " + what, nullptr};
  }
}

bool IsValidId(const Json& id) {
  return id.is_string() || id.is_number_integer() || id.is_number_unsigned();
}

std::string IdKey(const Json& id) { return id.dump(); }

Message Classify(const Json& value) {
  if (!value.is_object()) return Bad(nullptr, "a message must be a JSON object");
  auto id_it = value.find("id");
  bool has_id = id_it != value.end();
  Json echo_id = has_id && IsValidId(*id_it) ? *id_it : Json();
  auto version = value.find("jsonrpc");
  if (version == value.end()) return Bad(echo_id, "missing \"jsonrpc\": \"2.0\"");
  if (*version != "2.0") return Bad(echo_id, "\"jsonrpc\" must be \"2.0\", got " + version->dump());
  if (has_id && !IsValidId(*id_it)) {
    return Bad(nullptr, "\"id\" must be a string or an integer, got " + id_it->dump());
  }

  auto method = value.find("method");
  if (method != value.end()) {
    if (!method->is_string()) return Bad(echo_id, "\"method\" must be a string");
    Json params;
    if (auto p = value.find("params"); p != value.end()) {
      if (!p->is_object() && !p->is_array()) {
        return Bad(echo_id, "\"params\" must be an object or an array");
      }
      params = *p;
    }
    if (has_id) return Request{*id_it, method->get<std::string>(), std::move(params)};
    return Notification{method->get<std::string>(), std::move(params)};
  }

  bool has_result = value.contains("result");
  auto error = value.find("error");
  bool has_error = error != value.end();
  if (!has_result && !has_error) return Bad(echo_id, "missing \"method\"");
  if (has_result && has_error)
    return Bad(echo_id, "a response has \"result\" or \"error\", not both");
  if (!has_id) return Bad(nullptr, "a response needs an \"id\"");
  Response response{*id_it, nullptr, std::nullopt};
  if (has_result) {
    response.result = value["result"];
  } else {
    const Json& e = *error;
    if (!e.is_object() || !e.contains("code") || !e["code"].is_number_integer() ||
        !e.contains("message") || !e["message"].is_string()) {
      return Bad(echo_id, "\"error\" must be an object with an integer code and a string message");
    }
    response.error = RpcError{e["code"].get<int>(), e["message"].get<std::string>(),
                              e.contains("data") ? e["data"] : Json()};
  }
  return response;
}

Json MakeResult(const Json& id, Json result) {
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

Json MakeError(const Json& id, const RpcError& error) {
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"error", error.ToJson()}};
}

Json MakeNotification(std::string_view method, Json params) {
  Json j = {{"jsonrpc", "2.0"}, {"method", method}};
  if (!params.is_null()) j["params"] = std::move(params);
  return j;
}

Json MakeRequest(const Json& id, std::string_view method, Json params) {
  Json j = {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}};
  if (!params.is_null()) j["params"] = std::move(params);
  return j;
}

}  // namespace mcp::jsonrpc
