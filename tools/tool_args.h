// ArgReader: reads one tool call's `arguments` object into the tool's arguments struct
// (RunCommandArgs, ReadFileArgs, ...), strictly. Each tool has a Parse<Tool>Args function
// built on it, and its handler takes the struct, never the raw JSON.
//
// The server checks the arguments against the tool's inputSchema before the handler runs
// (mcp/methods.cc), so these checks normally find nothing; they keep the handler safe on
// its own (a unit test, a caller without the server) and say what they refuse in the
// validator's words (mcp/schema.h): `arguments.path: expected string, got integer 7`,
// `arguments.x: unknown field (allowed: path, recursive)`, `arguments.path: is required
// but missing`. Ranges, lengths and enums stay the schema's; what only a tool knows (NUL
// bytes, sizes, names) its parser checks after the types, first failure first.
// Threading: one ArgReader per call, on the handler's thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "mcp/types.h"

namespace mcpcell::tools {

class ArgReader {
 public:
  // `fields`: every field the tool accepts; any other is an unknown field. `args` must
  // outlive the reader (it is read in place, not copied: write_file's content may be MiBs).
  ArgReader(const mcp::Json& args, std::vector<std::string> fields);
  ArgReader(mcp::Json&& args, std::vector<std::string> fields) = delete;

  std::string String(const std::string& name);  // required
  std::optional<std::string> OptionalString(const std::string& name);
  std::optional<int64_t> OptionalInteger(const std::string& name);
  std::optional<bool> OptionalBool(const std::string& name);
  // An object of strings (run_command's env), in key order.
  std::vector<std::pair<std::string, std::string>> OptionalStringMap(const std::string& name);
  std::vector<std::string> StringArray(const std::string& name);  // required

  // Every violation found, joined with "; " as the server's check joins them; Ok if none.
  Status Finish() const;

 private:
  // The field's value when present and of `type` (a JSON Schema type name); else nullptr,
  // with a violation recorded when it is present but of another type.
  const mcp::Json* Field(const std::string& name, const char* type);
  const mcp::Json* RequiredField(const std::string& name, const char* type);
  bool IsOfType(const mcp::Json& value, const char* type, const std::string& path);

  const mcp::Json& args_;
  std::vector<std::string> errors_;
};

}  // namespace mcpcell::tools
