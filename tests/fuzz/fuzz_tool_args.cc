// fuzz_tool_args: tool argument validation, the check between a model's arguments and the
// sandbox tools. The real tools are built (tools/cell_tools.h) with a ToolEnv that has no
// cells and registered on a server, so their schemas pass the same registration check as in
// `mcpcell serve`; only validation runs, never a handler.
//
// Input: JSON text; anything else is raw bytes for the text helpers.
//   - an object: the arguments, validated against every tool's inputSchema;
//   - an array [schema, value]: when `schema` passes CheckFlatSchema (what registration
//     accepts), `value` is validated against it, so the validator meets schemas beyond the
//     nine real ones;
//   - a JSON string, or bytes that are not JSON: the text helpers the tools apply to
//     arguments and to program output (Base64Decode of write_file's base64 content,
//     ToValidUtf8, LooksBinary).
// Properties: validation never throws; every violation names its path ("arguments..."); a
// decoded base64 string encodes and decodes back to itself; ToValidUtf8 yields valid UTF-8.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "base/base64.h"
#include "base/utf8.h"
#include "mcp/schema.h"
#include "mcp/server.h"
#include "tools/cell_tools.h"

namespace {

using mcp::Json;
using namespace mcpcell::tools;
using mcpcell::Base64Decode;
using mcpcell::Base64Encode;
using mcpcell::LooksBinary;
using mcpcell::ToValidUtf8;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_tool_args: %s\n", what.c_str());
  std::abort();
}

const std::vector<mcp::Tool>& RealTools() {
  static const std::vector<mcp::Tool>* tools = [] {
    static ToolEnv env;  // cells == nullptr: the handlers are never called
    auto* out = new std::vector<mcp::Tool>{
        MakeRunCodeTool(env),     MakeRunCommandTool(env), MakeReadFileTool(env),
        MakeWriteFileTool(env),   MakeEditFileTool(env),   MakeListFilesTool(env),
        MakeSessionInfoTool(env), MakePipInstallTool(env), MakeNpmInstallTool(env)};
    // The same registration check `mcpcell serve` runs (flat schemas, names).
    mcp::Server server;
    if (mcp::Status st = RegisterCellTools(server, env); !st) Fail("register: " + st.message());
    return out;
  }();
  return *tools;
}

void CheckViolations(const std::vector<std::string>& errors, const std::string& where) {
  for (const std::string& e : errors) {
    if (!e.starts_with("arguments")) Fail(where + ": violation without its path: " + e);
  }
  (void)mcp::JoinErrors(errors);
}

void FuzzArguments(const Json& args) {
  for (const mcp::Tool& tool : RealTools()) {
    CheckViolations(mcp::ValidateJson(tool.input_schema, args), tool.name);
  }
}

void FuzzSchemaAndValue(const Json& schema, const Json& value) {
  if (!mcp::CheckFlatSchema(schema)) return;
  CheckViolations(mcp::ValidateJson(schema, value), "fuzzed schema");
}

void FuzzText(const std::string& text) {
  if (auto decoded = Base64Decode(text)) {
    auto again = Base64Decode(Base64Encode(*decoded));
    if (!again || *again != *decoded) Fail("base64 does not round-trip");
  }
  std::string valid = ToValidUtf8(text);
  try {
    (void)Json(valid).dump();  // throws on invalid UTF-8
  } catch (const Json::exception& e) {
    Fail(std::string("ToValidUtf8 left invalid UTF-8: ") + e.what());
  }
  (void)LooksBinary(text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  RealTools();
  Json input = Json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (input.is_discarded()) {
    FuzzText(std::string(reinterpret_cast<const char*>(data), size));
    return 0;
  }
  try {
    if (input.is_object()) {
      FuzzArguments(input);
    } else if (input.is_array() && input.size() == 2) {
      FuzzSchemaAndValue(input[0], input[1]);
    } else if (input.is_string()) {
      FuzzText(input.get<std::string>());
    }
  } catch (const std::exception& e) {
    Fail(std::string("validation threw: ") + e.what());
  }
  return 0;
}
