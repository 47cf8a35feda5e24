// Tool::new_era_input_schema: a tool that takes more in the 2026-07-28 era (an argument naming
// the state a protocol session held before) lists and validates that schema for new-era
// requests only; today's era sees and is checked against input_schema, on the same server.
#include <gtest/gtest.h>

#include "mcp/era2026.h"
#include "mcp/session.h"
#include "test_util.h"

namespace mcp {
namespace {

using testing::ErrorCode;

Json Meta() {
  return {{"io.modelcontextprotocol/protocolVersion", "2026-07-28"},
          {"io.modelcontextprotocol/clientCapabilities", Json::object()}};
}

Json WithMeta(Json params) {
  params["_meta"] = Meta();
  return params;
}

// "where" answers with the `box` argument it got, or "none".
Tool WhereTool() {
  Tool t;
  t.name = "where";
  t.input_schema = {{"type", "object"},
                    {"properties", {{"path", {{"type", "string"}}}}},
                    {"additionalProperties", false}};
  t.new_era_input_schema = {
      {"type", "object"},
      {"properties",
       {{"path", {{"type", "string"}}}, {"box", {{"type", "string"}, {"x-mcp-header", "Box"}}}}},
      {"required", {"box"}},
      {"additionalProperties", false}};
  t.handler = [](const Json& args, Context&) {
    return ToolResult::Text(args.value("box", std::string("none")));
  };
  return t;
}

Json ListedSchema(const Json& list_response) {
  for (const Json& t : list_response["result"]["tools"]) {
    if (t["name"] == "where") return t["inputSchema"];
  }
  return nullptr;
}

TEST(EraSchema, EachEraListsAndValidatesItsOwnSchema) {
  Server server(testing::TestOptions());
  ASSERT_TRUE(server.AddTool(WhereTool()));
  MemoryClient old_client(server);
  MemoryClient new_client(server);
  ASSERT_EQ(ErrorCode(old_client.Initialize("2025-11-25")), 0);

  Json old_schema = ListedSchema(old_client.Request("tools/list"));
  Json new_schema = ListedSchema(new_client.Request("tools/list", WithMeta(Json::object())));
  EXPECT_FALSE(old_schema["properties"].contains("box")) << old_schema.dump();
  EXPECT_EQ(new_schema["properties"]["box"]["x-mcp-header"], "Box") << new_schema.dump();

  Json call = {{"name", "where"}, {"arguments", {{"box", "b1"}}}};
  Json r = new_client.Request("tools/call", WithMeta(call));
  ASSERT_EQ(ErrorCode(r), 0) << r.dump();
  EXPECT_EQ(testing::FirstText(r), "b1");
  // Today's schema has no `box`: refused there, by the same strict check.
  r = old_client.Request("tools/call", call);
  EXPECT_TRUE(r["result"].value("isError", false)) << r.dump();
  // And the new era requires it.
  r = new_client.Request("tools/call",
                         WithMeta({{"name", "where"}, {"arguments", Json::object()}}));
  EXPECT_TRUE(r["result"].value("isError", false)) << r.dump();
  EXPECT_NE(testing::FirstText(r).find("box"), std::string::npos) << r.dump();
  // The HTTP transport reads the new era's header marks.
  EXPECT_EQ(server.ToolInputSchema("where")["properties"]["box"]["x-mcp-header"], "Box");
}

TEST(EraSchema, ANewEraSchemaThatIsNotFlatIsRefusedAtRegistration) {
  Server server(testing::TestOptions());
  Tool t = WhereTool();
  t.new_era_input_schema = {{"type", "object"},
                            {"properties", {{"box", {{"$ref", "#/$defs/box"}}}}}};
  Status st = server.AddTool(t);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("2026-07-28"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace mcp
