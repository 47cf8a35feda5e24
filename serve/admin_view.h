// AdminView: what the operator page's JSON API (serve/admin_api.h, /admin/api/...) reads of
// the running server and does to it: the live sessions (tenant, id, age, state, policy,
// usage), the warm pools, and an operator's pause, resume or end of one session. The API
// checks the operator's token and scope; a view only reports and acts. ServeAdminView is
// the one of `mcpcell serve`; tests give the API a fake.
//
// ServeAdminView reads the MCP server's sessions (attached while it serves), the cell
// sessions, the usage meters and the audit trail it writes the operators' actions to.
// An operator's pause is a hold: the session's cell is frozen now (when no call is running)
// and every tools/call of the session is refused before its handler runs, with a JSON-RPC
// error (code -32003) naming the operator and since when (the on_tool_call hook installed
// by ConnectServer), so a client's call cannot thaw the cell as it thaws an idle pause;
// only the operator's resume (or the session's end) lifts it. Ending writes session.end with the
// operator's name, removes the session's cell and hibernated files, and closes the HTTP session
// through HttpServer::CloseSession (its next request gets 404), or the MCP session over stdio.
// Threading: thread-safe; called on HTTP request threads and, for the gate, on the MCP
// server's handler threads. RunServe owns it; AttachServer (nullptr) before the MCP server
// goes, and the listeners stop before the cells go.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "policies/policy.h"

namespace mcp {
class HttpServer;
class Server;
class Session;
struct ServerOptions;
}  // namespace mcp
namespace mcpcell::sandbox {
class CellSessionManager;
}

namespace mcpcell::serve {

class ServeAudit;
class SessionResume;

struct AdminSession {
  std::string tenant;  // "" = the server's own policy (no authentication)
  std::string id;      // the MCP session id (HTTP: its Mcp-Session-Id)
  double age_s = 0;
  // new (no call yet), running, idle (no cell now), paused, hibernated, held (by an operator)
  std::string state;
  std::string policy;
  nlohmann::json usage = nlohmann::json::object();  // audit::UsageFigures::ToJson
  std::string held_by;                              // the operator holding it; "" = not held
  std::string held_since;  // UTC, ISO 8601 ("2026-12-02T15:04:05Z"); "" = not held
};

struct AdminPool {
  std::string tenant;  // the profile: "" = the server's own policy
  size_t target = 0;   // --warm-cells
  size_t ready = 0;
  size_t parked = 0;
  std::string status;  // why it makes no cells; "" while it works
};

enum class AdminAction { kPause, kResume, kEnd };
const char* AdminActionName(AdminAction action);

// What an action did: 200 with a sentence, 404 (no such live session), 409 (it cannot be
// done now: the message says why).
struct AdminActionResult {
  int status = 200;
  std::string message;
};

class AdminView {
 public:
  virtual ~AdminView() = default;
  virtual std::vector<AdminSession> Sessions() const = 0;
  virtual std::vector<AdminPool> Pools() const = 0;
  // Acts on live session `id` for operator `operator_name` (its scope already checked).
  virtual AdminActionResult Act(AdminAction action, const std::string& id,
                                const std::string& operator_name) = 0;
};

struct ServeAdminViewOptions {
  sandbox::CellSessionManager* cells = nullptr;
  ServeAudit* audit = nullptr;
  SessionResume* resume = nullptr;
  const policies::Policy* server_policy = nullptr;
  const std::map<std::string, policies::Policy>* tenant_policies = nullptr;
  size_t warm_cells = 0;
};

class ServeAdminView : public AdminView {
 public:
  explicit ServeAdminView(ServeAdminViewOptions options) : options_(std::move(options)) {}
  // The MCP server whose sessions are listed and ended; nullptr before it goes.
  void AttachServer(mcp::Server* server);
  // The HTTP transport whose sessions an operator's end closes at once (the client's next
  // request: 404); nullptr (stdio, or once it stops) = the MCP session is closed instead.
  void AttachHttp(mcp::HttpServer* http);
  // Installs the hold's check into on_tool_call (after the hooks already there) of the
  // options of the server that AttachServer will get.
  void ConnectServer(mcp::ServerOptions& server);
  // The refusal a held session's call gets; "" when session `id` is not held.
  std::string HoldRefusal(const std::string& id) const;

  std::vector<AdminSession> Sessions() const override;
  std::vector<AdminPool> Pools() const override;
  AdminActionResult Act(AdminAction action, const std::string& id,
                        const std::string& operator_name) override;

 private:
  std::string StateOf(const std::string& id) const;
  const policies::Policy& PolicyOf(const std::string& tenant) const;
  AdminActionResult End(const std::string& id, const std::string& tenant, const std::string& by);
  AdminActionResult Hold(const std::string& id, const std::string& by);
  AdminActionResult Release(const std::string& id);
  // A session.operator record (action, operator) in the audit trail.
  void Record(AdminAction action, const std::string& tenant, const std::string& id,
              const std::string& operator_name);

  struct OperatorHold {
    std::string by;
    std::chrono::system_clock::time_point since;
  };

  const ServeAdminViewOptions options_;
  mutable std::mutex mu_;  // guards server_ and holds it while in use
  mcp::Server* server_ = nullptr;
  mcp::HttpServer* http_ = nullptr;  // guarded by mu_ too
  // Separate from mu_: the gate reads it on handler threads, never waiting for an action.
  mutable std::mutex holds_mu_;
  std::map<std::string, OperatorHold> holds_;  // by session id
};

}  // namespace mcpcell::serve
