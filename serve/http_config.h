// The HTTP server config file of `mcpcell serve --http` (TOML): who may connect and what
// each tenant gets. Bearer tokens are never stored, only their SHA-256 (hex):
//
//   [http]
//   allowed_hosts   = ["mcp.example.com"]        # Host names accepted besides loopback
//   allowed_origins = ["https://ide.example.com"]
//   tls_cert = "/etc/mcpcell/cert.pem"           # optional; both or neither
//   tls_key  = "/etc/mcpcell/key.pem"
//
//   [[tenant]]
//   name = "alice"
//   token_sha256 = ["9f86d08..."]                # `printf %s TOKEN | sha256sum`
//   policy = "team.toml"  # this tenant's policy, as written (serve/tenant_policies.h);
//                         # absent: the server's --policy with its limit flags
//   inherit_server_mounts = false  # true: also the server's --mount, --output, --workspace
//   max_sessions = 8                             # live sessions (0 = unlimited)
//   max_concurrent_calls = 4                     # requests in flight per session
//   max_body_bytes = 4194304                     # largest POST body
//
//   [[operator]]                                 # reads /admin/audit, never MCP
//   name = "ops-alice"
//   token_sha256 = ["3a7bd3e..."]                # distinct from every tenant's
//   tenants = ["alice"]                          # or "*": every tenant and the trail's own
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "audit/query.h"
#include "mcp/http_server.h"

namespace mcpcell::serve {

struct TenantConfig {
  mcp::HttpTenant quotas;  // quotas.name is the tenant name
  // A shipped profile name or a .toml path, resolved like --policy and used as written;
  // empty (no `policy` key) = the server's own policy with its limit flags.
  std::string policy;
  // The server's --mount, --output and --workspace reach this tenant's cells only when
  // true; otherwise the tenant gets the mounts and workspace of its policy alone.
  bool inherit_server_mounts = false;
};

// An operator: reads the audit trail over HTTP (/admin/audit), scoped to some tenants or all.
struct OperatorConfig {
  std::string name;
  audit::TenantScope scope;
};

struct HttpConfig {
  std::vector<std::string> allowed_hosts;
  std::vector<std::string> allowed_origins;
  std::string tls_cert;
  std::string tls_key;
  std::map<std::string, TenantConfig> tenants;               // by name
  std::map<std::string, std::string> token_hashes;           // sha256 hex -> tenant name
  std::map<std::string, OperatorConfig> operators;           // by name
  std::map<std::string, std::string> operator_token_hashes;  // sha256 hex -> operator name

  // The tenant of a presented bearer token, or nullopt.
  std::optional<TenantConfig> Authenticate(const std::string& token) const;
  // The operator of a presented bearer token, or nullopt (a tenant's token is not one).
  std::optional<OperatorConfig> AuthenticateOperator(const std::string& token) const;
};

// Lower-case hex SHA-256 of `text`.
std::string Sha256Hex(const std::string& text);

// Parses a config file's text; on failure returns nullopt and sets `error` to a message
// naming the file, the key and the problem.
std::optional<HttpConfig> ParseHttpConfig(const std::string& text, const std::string& source,
                                          std::string& error);
std::optional<HttpConfig> LoadHttpConfig(const std::string& path, std::string& error);

}  // namespace mcpcell::serve
