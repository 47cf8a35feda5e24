// The conformance fixtures: tools, resources, prompts and completion with the names and
// results the official MCP conformance suite (@modelcontextprotocol/conformance 0.1.16)
// expects, plus three extra tools the e2e tests need (slow_tool, cancellation_report,
// update_watched_resource). Registration only; the Server runs the handlers on its pool.
#pragma once

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>

#include "mcp/server.h"

namespace conformance {

// State shared by the fixtures for the life of the process; handlers run concurrently.
struct FixtureState {
  std::atomic<int> slow_calls_cancelled{0};
  std::atomic<int> slow_calls_completed{0};
  std::mutex watched_mutex;
  std::string watched_text = "Watched resource content";  // guarded by watched_mutex
};

// Each throws std::runtime_error naming the fixture the Server refused to register.
void AddFixtureTools(mcp::Server& server, FixtureState& state);
void AddFixtureResources(mcp::Server& server, FixtureState& state);
void AddFixturePrompts(mcp::Server& server);
// The 2026-07-28 suite's own tools (fixture_era2026.cc).
void AddEra2026Tools(mcp::Server& server);
// Tools and a prompt that answer input_required (fixture_input_required.cc).
void AddInputRequiredFixtures(mcp::Server& server);
// The Tasks extension's tools (fixture_tasks.cc).
void AddTaskFixtures(mcp::Server& server);

// Registration is startup code: a refusal is a bug in this program, so it stops startup.
inline void Require(const mcp::Status& status, const std::string& what) {
  if (!status.ok()) throw std::runtime_error(what + ": " + status.message());
}

}  // namespace conformance
