#include "tools/tool_args.h"

#include <algorithm>

#include "mcp/schema.h"

namespace mcpcell::tools {

ArgReader::ArgReader(const mcp::Json& args, std::vector<std::string> fields) : args_(args) {
  if (!IsOfType(args_, "object", "arguments")) return;
  // The validator lists the schema's properties, which a JSON object keeps sorted.
  std::sort(fields.begin(), fields.end());
  std::string allowed;
  for (const std::string& f : fields) allowed += (allowed.empty() ? "" : ", ") + f;
  for (const auto& [key, value] : args_.items()) {
    if (std::find(fields.begin(), fields.end(), key) == fields.end())
      errors_.push_back("arguments." + key +
                        ": unknown field (allowed: " + (allowed.empty() ? "none" : allowed) + ")");
  }
}

bool ArgReader::IsOfType(const mcp::Json& value, const char* type, const std::string& path) {
  // The validator's own check, so the words are the same as the server's.
  std::vector<std::string> errors = mcp::ValidateJson({{"type", type}}, value, path);
  errors_.insert(errors_.end(), errors.begin(), errors.end());
  return errors.empty();
}

const mcp::Json* ArgReader::Field(const std::string& name, const char* type) {
  if (!args_.is_object()) return nullptr;
  auto it = args_.find(name);
  if (it == args_.end()) return nullptr;
  return IsOfType(*it, type, "arguments." + name) ? &*it : nullptr;
}

const mcp::Json* ArgReader::RequiredField(const std::string& name, const char* type) {
  if (args_.is_object() && !args_.contains(name))
    errors_.push_back("arguments." + name + ": is required but missing");
  return Field(name, type);
}

std::string ArgReader::String(const std::string& name) {
  const mcp::Json* v = RequiredField(name, "string");
  return v ? v->get<std::string>() : "";
}

std::optional<std::string> ArgReader::OptionalString(const std::string& name) {
  const mcp::Json* v = Field(name, "string");
  return v ? std::optional(v->get<std::string>()) : std::nullopt;
}

std::optional<int64_t> ArgReader::OptionalInteger(const std::string& name) {
  const mcp::Json* v = Field(name, "integer");  // 3.0 is an integer to the schema too
  return v ? std::optional(v->get<int64_t>()) : std::nullopt;
}

std::optional<bool> ArgReader::OptionalBool(const std::string& name) {
  const mcp::Json* v = Field(name, "boolean");
  return v ? std::optional(v->get<bool>()) : std::nullopt;
}

std::vector<std::pair<std::string, std::string>> ArgReader::OptionalStringMap(
    const std::string& name) {
  std::vector<std::pair<std::string, std::string>> out;
  const mcp::Json* v = Field(name, "object");
  if (!v) return out;
  for (const auto& [key, value] : v->items()) {
    if (IsOfType(value, "string", "arguments." + name + "." + key))
      out.emplace_back(key, value.get<std::string>());
  }
  return out;
}

std::vector<std::string> ArgReader::StringArray(const std::string& name) {
  std::vector<std::string> out;
  const mcp::Json* v = RequiredField(name, "array");
  if (!v) return out;
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string path = "arguments." + name + "[" + std::to_string(i) + "]";
    if (IsOfType((*v)[i], "string", path)) out.push_back((*v)[i].get<std::string>());
  }
  return out;
}

Status ArgReader::Finish() const {
  if (errors_.empty()) return Ok();
  return Error::Msg(mcp::JoinErrors(errors_));
}

}  // namespace mcpcell::tools
