// Shared helpers of the mcp/ unit tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "mcp/server.h"
#include "mcp/test_client.h"

namespace mcp::testing {

inline ServerOptions TestOptions() {
  ServerOptions o;
  o.name = "test-server";
  o.version = "9.9.9";
  o.worker_threads = 4;
  return o;
}

// The error code of a response message, or 0 when it is a result.
inline int ErrorCode(const Json& response) {
  if (!response.is_object() || !response.contains("error")) return 0;
  return response["error"]["code"].get<int>();
}

inline std::string ErrorMessage(const Json& response) {
  if (!response.is_object() || !response.contains("error")) return "";
  return response["error"]["message"].get<std::string>();
}

// The text of the first content block of a tools/call result.
inline std::string FirstText(const Json& response) {
  return response["result"]["content"][0]["text"].get<std::string>();
}

inline Tool EchoTool() {
  Tool t;
  t.name = "echo";
  t.description = "Echoes its text";
  t.input_schema = {{"type", "object"},
                    {"properties", {{"text", {{"type", "string"}}}}},
                    {"required", {"text"}},
                    {"additionalProperties", false}};
  t.handler = [](const Json& args, Context&) { return ToolResult::Text(args["text"]); };
  return t;
}

}  // namespace mcp::testing
