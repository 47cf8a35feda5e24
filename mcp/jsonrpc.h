// JSON-RPC 2.0 framing: classify one parsed JSON value as a request, a notification or a
// response, or say why it is not a valid message; and build the outgoing messages.
// Pure functions, no state, no threads. The session (mcp/session.h) decides what to do.
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include "mcp/types.h"

namespace mcp::jsonrpc {

// Parses message text. Malformed JSON or invalid UTF-8 -> RpcError{kParseError, ...}.
std::variant<Json, RpcError> Parse(std::string_view text);

struct Request {
  Json id;  // a string or an integer
  std::string method;
  Json params;  // object, array, or null when absent
};
struct Notification {
  std::string method;
  Json params;
};
struct Response {
  Json id;
  Json result;                    // when !error
  std::optional<RpcError> error;  // set for an error response
};
// A message that is not valid JSON-RPC. `id` is the request's id when it could be read
// (so the error response can echo it), else null.
struct Invalid {
  Json id;
  RpcError error;
};
using Message = std::variant<Request, Notification, Response, Invalid>;

// Classifies one JSON value (not an array: batches are split by the caller).
Message Classify(const Json& value);

// Valid ids are strings and integers (MCP forbids null; fractions are refused).
bool IsValidId(const Json& id);
// Canonical text of an id, used as a map key ("\"a\"" and "1" stay distinct).
std::string IdKey(const Json& id);

Json MakeResult(const Json& id, Json result);
Json MakeError(const Json& id, const RpcError& error);
Json MakeNotification(std::string_view method, Json params);  // params null -> omitted
Json MakeRequest(const Json& id, std::string_view method, Json params);

}  // namespace mcp::jsonrpc
