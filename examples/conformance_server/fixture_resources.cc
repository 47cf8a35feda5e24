// The fixture resources (resources-*.ts in the conformance suite): a text resource, a
// binary one, a template that substitutes {id}, and a watched resource whose updates are
// sent to subscribers (the library tracks subscriptions; update_watched_resource changes
// it). Also the completion handler, which completes the template's {id} and the prompt
// arguments.
#include <map>
#include <string>
#include <vector>

#include "examples/conformance_server/fixtures.h"
#include "examples/conformance_server/media.h"

namespace conformance {
namespace {

using mcp::Context;
using mcp::Json;
using mcp::ResourceContents;
using Variables = std::map<std::string, std::string>;

ResourceContents TextContents(std::string uri, std::string mime_type, std::string text) {
  ResourceContents contents;
  contents.uri = std::move(uri);
  contents.mime_type = std::move(mime_type);
  contents.text = std::move(text);
  return contents;
}

std::vector<std::string> WithPrefix(const std::vector<std::string>& candidates,
                                    const std::string& prefix) {
  std::vector<std::string> matches;
  for (const std::string& candidate : candidates) {
    if (candidate.starts_with(prefix)) matches.push_back(candidate);
  }
  return matches;
}

mcp::CompletionResult Complete(const mcp::CompletionRequest& request) {
  static const std::vector<std::string> kPromptValues = {"test", "testing", "test-value", "hello",
                                                         "world"};
  static const std::vector<std::string> kTemplateIds = {"1", "2", "3", "42", "123"};
  const std::string type = request.ref.value("type", "");
  mcp::CompletionResult result;
  if (type == "ref/prompt" && request.ref.value("name", "") == "test_prompt_with_arguments" &&
      (request.argument_name == "arg1" || request.argument_name == "arg2")) {
    result.values = WithPrefix(kPromptValues, request.argument_value);
  } else if (type == "ref/resource" &&
             request.ref.value("uri", "") == "test://template/{id}/data" &&
             request.argument_name == "id") {
    result.values = WithPrefix(kTemplateIds, request.argument_value);
  }
  result.total = static_cast<int64_t>(result.values.size());
  return result;
}

}  // namespace

void AddFixtureResources(mcp::Server& server, FixtureState& state) {
  mcp::Resource text;
  text.uri = "test://static-text";
  text.name = "static-text";
  text.title = "Static Text Resource";
  text.description = "A static text resource for testing";
  text.mime_type = "text/plain";
  text.read = [](const std::string& uri, const Variables&, Context&) {
    return std::vector{
        TextContents(uri, "text/plain", "This is the content of the static text resource.")};
  };
  Require(server.AddResource(std::move(text)), "test://static-text");

  mcp::Resource binary;
  binary.uri = "test://static-binary";
  binary.name = "static-binary";
  binary.title = "Static Binary Resource";
  binary.description = "A static binary resource (a PNG image)";
  binary.mime_type = "image/png";
  binary.read = [](const std::string& uri, const Variables&, Context&) {
    ResourceContents contents;
    contents.uri = uri;
    contents.mime_type = "image/png";
    contents.blob = kRedPixelPngBase64;
    return std::vector{contents};
  };
  Require(server.AddResource(std::move(binary)), "test://static-binary");

  mcp::ResourceTemplate data;
  data.uri_template = "test://template/{id}/data";
  data.name = "template";
  data.title = "Resource Template";
  data.description = "A resource template with parameter substitution";
  data.mime_type = "application/json";
  data.read = [](const std::string& uri, const Variables& variables, Context&) {
    const std::string& id = variables.at("id");
    Json json = {{"id", id}, {"templateTest", true}, {"data", "Data for ID: " + id}};
    return std::vector{TextContents(uri, "application/json", json.dump())};
  };
  Require(server.AddResourceTemplate(std::move(data)), "test://template/{id}/data");

  mcp::Resource watched;
  watched.uri = "test://watched-resource";
  watched.name = "watched-resource";
  watched.title = "Watched Resource";
  watched.description =
      "A resource whose subscribers are told of updates (update_watched_resource changes it)";
  watched.mime_type = "text/plain";
  watched.read = [&state](const std::string& uri, const Variables&, Context&) {
    std::lock_guard lock(state.watched_mutex);
    return std::vector{TextContents(uri, "text/plain", state.watched_text)};
  };
  Require(server.AddResource(std::move(watched)), "test://watched-resource");

  server.SetCompletionHandler(
      [](const mcp::CompletionRequest& request, Context&) { return Complete(request); });
}

}  // namespace conformance
