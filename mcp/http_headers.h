// The 2026-07-28 HTTP header rules (Streamable HTTP, stateless requests): Mcp-Method,
// Mcp-Name and the Mcp-Param-{Name} headers mirrored from tool arguments marked
// `x-mcp-header` must agree with the JSON-RPC body, so that a load balancer routing by a
// header routes what the server then serves. A disagreement is a HeaderMismatch error
// (-32020, HTTP 400). Pure functions: any thread.
#pragma once

#include <optional>

#include "mcp/http_message.h"
#include "mcp/types.h"

namespace mcp {

// Mcp-Method must equal the body's method; Mcp-Name must equal params.name (tools/call,
// prompts/get) or params.uri (resources/read).
std::optional<RpcError> CheckRoutingHeaders(const HttpRequest& req, const Json& request);

// For each property of `input_schema` marked `x-mcp-header: "X"`: an argument present (and
// not null) needs header Mcp-Param-X equal to its value (a string as is, a number or boolean
// as its JSON text; "=?base64?...?=" carries base64 of the UTF-8 value, which must decode);
// an argument absent or null must not have the header.
std::optional<RpcError> CheckParamHeaders(const HttpRequest& req, const Json& arguments,
                                          const Json& input_schema);

}  // namespace mcp
