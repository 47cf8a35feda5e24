#include "mcp/features.h"

namespace mcp {
namespace {
void PutIfSet(Json& j, const char* key, const std::string& value) {
  if (!value.empty()) j[key] = value;
}
void PutIfSet(Json& j, const char* key, const Json& value) {
  if (!value.is_null()) j[key] = value;
}
}  // namespace

ToolResult ToolResult::Text(std::string text) {
  ToolResult r;
  r.AddText(std::move(text));
  return r;
}

ToolResult ToolResult::Error(std::string message) {
  ToolResult r = Text(std::move(message));
  r.is_error = true;
  return r;
}

ToolResult ToolResult::Structured(Json value) {
  ToolResult r = Text(value.dump(-1, ' ', false, Json::error_handler_t::replace));
  r.structured_content = std::move(value);
  return r;
}

ToolResult& ToolResult::AddText(std::string text) {
  content.push_back(Json{{"type", "text"}, {"text", std::move(text)}});
  return *this;
}

Json ToolResult::ToJson() const {
  Json j = {{"content", content.is_array() ? content : Json::array()}};
  PutIfSet(j, "structuredContent", structured_content);
  if (is_error) j["isError"] = true;
  PutIfSet(j, "_meta", meta);
  return j;
}

Json Tool::ToJson(bool new_era) const {
  Json j = {{"name", name}};
  PutIfSet(j, "title", title);
  PutIfSet(j, "description", description);
  j["inputSchema"] = InputSchema(new_era);
  PutIfSet(j, "outputSchema", output_schema);
  PutIfSet(j, "annotations", annotations);
  if (task_support != TaskSupport::kForbidden) {
    j["execution"] = {{"taskSupport", TaskSupportName(task_support)}};
  }
  return j;
}

Json ResourceContents::ToJson() const {
  Json j = {{"uri", uri}};
  PutIfSet(j, "mimeType", mime_type);
  if (text) j["text"] = *text;
  if (blob) j["blob"] = *blob;
  if (!text && !blob) j["text"] = "";
  return j;
}

Json Resource::ToJson() const {
  Json j = {{"uri", uri}, {"name", name}};
  PutIfSet(j, "title", title);
  PutIfSet(j, "description", description);
  PutIfSet(j, "mimeType", mime_type);
  if (size) j["size"] = *size;
  PutIfSet(j, "annotations", annotations);
  return j;
}

Json ResourceTemplate::ToJson() const {
  Json j = {{"uriTemplate", uri_template}, {"name", name}};
  PutIfSet(j, "title", title);
  PutIfSet(j, "description", description);
  PutIfSet(j, "mimeType", mime_type);
  PutIfSet(j, "annotations", annotations);
  return j;
}

PromptResult PromptResult::UserText(std::string text) {
  PromptResult r;
  r.messages.push_back(
      Json{{"role", "user"}, {"content", {{"type", "text"}, {"text", std::move(text)}}}});
  return r;
}

Json PromptResult::ToJson() const {
  Json j = {{"messages", messages}};
  PutIfSet(j, "description", description);
  return j;
}

Json Prompt::ToJson() const {
  Json j = {{"name", name}};
  PutIfSet(j, "title", title);
  PutIfSet(j, "description", description);
  if (!arguments.empty()) {
    Json args = Json::array();
    for (const auto& a : arguments) {
      Json arg = {{"name", a.name}};
      PutIfSet(arg, "title", a.title);
      PutIfSet(arg, "description", a.description);
      if (a.required) arg["required"] = true;
      args.push_back(std::move(arg));
    }
    j["arguments"] = std::move(args);
  }
  return j;
}

}  // namespace mcp
