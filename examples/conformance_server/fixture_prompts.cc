// The fixture prompts (prompts-*.ts in the conformance suite): a simple one, one with two
// required arguments, one embedding a resource named by its argument, one with an image.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "examples/conformance_server/fixtures.h"
#include "examples/conformance_server/media.h"

namespace conformance {
namespace {

using mcp::Context;
using mcp::Json;
using mcp::PromptResult;
using Arguments = std::map<std::string, std::string>;

Json UserMessage(Json content) { return {{"role", "user"}, {"content", std::move(content)}}; }
Json TextBlock(std::string text) { return {{"type", "text"}, {"text", std::move(text)}}; }

mcp::PromptArgument RequiredArgument(std::string name, std::string description) {
  mcp::PromptArgument argument;
  argument.name = std::move(name);
  argument.description = std::move(description);
  argument.required = true;
  return argument;
}

// Registers a prompt or stops startup (a builder: see AddTool in fixture_tools.cc).
void AddPrompt(mcp::Server& server, std::string name, std::string title, std::string description,
               std::vector<mcp::PromptArgument> arguments, mcp::PromptHandler handler) {
  mcp::Prompt prompt;
  prompt.name = std::move(name);
  prompt.title = std::move(title);
  prompt.description = std::move(description);
  prompt.arguments = std::move(arguments);
  prompt.handler = std::move(handler);
  const std::string what = prompt.name;
  Require(server.AddPrompt(std::move(prompt)), what);
}

}  // namespace

void AddFixturePrompts(mcp::Server& server) {
  AddPrompt(server, "test_simple_prompt", "Simple Test Prompt", "A simple prompt without arguments",
            {}, [](const Arguments&, Context&) {
              return PromptResult::UserText("This is a simple prompt for testing.");
            });
  AddPrompt(server, "test_prompt_with_arguments", "Prompt With Arguments",
            "A prompt with two required arguments",
            {RequiredArgument("arg1", "First test argument"),
             RequiredArgument("arg2", "Second test argument")},
            [](const Arguments& args, Context&) {
              return PromptResult::UserText("Prompt with arguments: arg1='" + args.at("arg1") +
                                            "', arg2='" + args.at("arg2") + "'");
            });
  AddPrompt(server, "test_prompt_with_embedded_resource", "Prompt With Embedded Resource",
            "A prompt that embeds the resource named by resourceUri",
            {RequiredArgument("resourceUri", "URI of the resource to embed")},
            [](const Arguments& args, Context&) {
              Json resource = {{"uri", args.at("resourceUri")},
                               {"mimeType", "text/plain"},
                               {"text", "Embedded resource content for testing."}};
              PromptResult result;
              result.messages.push_back(
                  UserMessage({{"type", "resource"}, {"resource", std::move(resource)}}));
              result.messages.push_back(
                  UserMessage(TextBlock("Please process the embedded resource above.")));
              return result;
            });
  AddPrompt(server, "test_prompt_with_image", "Prompt With Image", "A prompt with an image", {},
            [](const Arguments&, Context&) {
              PromptResult result;
              result.messages.push_back(UserMessage(
                  {{"type", "image"}, {"data", kRedPixelPngBase64}, {"mimeType", "image/png"}}));
              result.messages.push_back(UserMessage(TextBlock("Please analyze the image above.")));
              return result;
            });
}

}  // namespace conformance
