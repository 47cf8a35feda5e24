#include "tools/tool_env.h"

#include <cerrno>

#include "mcp/era2026.h"
#include "sandbox/cell_channel.h"
#include "tools/client_log.h"

namespace mcpcell::tools {

const CellToolsConfig* ToolEnv::ConfigFor(const std::string& tenant) const {
  if (tenant.empty()) return &config;
  auto it = tenants.find(tenant);
  return it == tenants.end() ? nullptr : &it->second;
}

bool ToolEnv::ToolEnabled(const std::string& tenant, const std::string& name) const {
  const CellToolsConfig* c = ConfigFor(tenant);
  return c && c->Enables(name);
}

std::string ToolEnv::CellProfile(const std::string& tenant) const { return tenant; }

std::vector<const CellToolsConfig*> ToolEnv::AllConfigs() const {
  std::vector<const CellToolsConfig*> all = {&config};
  for (const auto& [name, c] : tenants) all.push_back(&c);
  return all;
}

bool IsNewEraCall(const mcp::Context& ctx) {
  return ctx.session().protocol_version() == mcp::era2026::kVersion;
}

namespace {
thread_local const CallKeyScope* current_key_scope = nullptr;
}  // namespace

CallKeyScope::CallKeyScope(std::string key) : key_(std::move(key)), outer_(current_key_scope) {
  current_key_scope = this;
}

CallKeyScope::~CallKeyScope() { current_key_scope = outer_; }

const std::string* CallKeyScope::Current() {
  return current_key_scope ? &current_key_scope->key_ : nullptr;
}

std::string CallKey(const mcp::Context& ctx) {
  if (const std::string* key = CallKeyScope::Current()) return *key;
  // A new-era session lives for one request (HTTP) or is shared by unrelated ones (stdio):
  // its id must never name a cell.
  return IsNewEraCall(ctx) ? std::string() : ctx.session().id();
}

const CellToolsConfig* SessionConfig(const ToolEnv& env, const mcp::Context& ctx) {
  return env.ConfigFor(ctx.session().tenant());
}

Result<std::shared_ptr<sandbox::CellSession>> SessionCells(const ToolEnv& env,
                                                           const mcp::Context& ctx) {
  const std::string& tenant = ctx.session().tenant();
  if (!env.ConfigFor(tenant)) {
    return Error::Msg("no policy is configured for tenant \"" + tenant + "\"");
  }
  const std::string key = CallKey(ctx);
  if (key.empty()) {
    return Error::Msg("this 2026-07-28 request names no sandbox: call a tool with its \"" +
                      std::string(kSandboxArgument) + "\" argument (from sandbox_create)");
  }
  return env.cells->Get(key, env.CellProfile(tenant));
}

namespace {
// How a client gets a new cell once its own has ended, in its era.
std::string NewCellHint(const mcp::Context& ctx) {
  return IsNewEraCall(ctx) ? ". Call sandbox_create for a new sandbox handle."
                           : ". Start a new MCP session to get a new cell.";
}
}  // namespace

LeaseOrError AcquireCell(const ToolEnv& env, mcp::Context& ctx) {
  LeaseOrError out;
  out.config = SessionConfig(env, ctx);
  auto session = SessionCells(env, ctx);
  if (!session) {
    out.error = mcp::ToolResult::Error(session.error().message + NewCellHint(ctx));
    return out;
  }
  auto lease = (*session)->Acquire();
  if (!lease) {
    const std::string& why = lease.error().message;
    const bool ended = why.rfind("the session has ended", 0) == 0;
    out.error = mcp::ToolResult::Error(
        why + (ended ? NewCellHint(ctx)
                     : ". The sandbox could not be prepared; retry once, and if it fails again "
                       "report this message to the operator (`mcpcell doctor` checks the "
                       "host)."));
    return out;
  }
  out.lease.emplace(std::move(lease).value());
  // The client hears it too (the tools put the replacement in their result for the model).
  if (!out.lease->replaced_reason().empty())
    LogCallWarning(ctx, kEventCellReplaced, out.lease->replaced_reason(), &env.secret_values);
  if (!out.lease->lifetime_notice().empty())
    LogCallWarning(ctx, kEventSessionEnding, out.lease->lifetime_notice(), &env.secret_values);
  return out;
}

std::string NulByteError(const std::string& field, std::string_view value, const std::string& why) {
  const size_t at = value.find('\0');
  if (at == std::string_view::npos) return "";
  return "arguments." + field + ": contains a NUL byte at offset " + std::to_string(at) + "; " +
         why;
}

namespace {
std::string HintFor(const Error& error) {
  switch (error.err) {
    case ENOENT:
      return "Check the path with list_files (relative paths start at /workspace).";
    case ENOTDIR:
      return "A component of the path is a file, not a directory; check it with list_files.";
    case EISDIR:
      return "The path is a directory; use list_files to see what is in it.";
    case EACCES:
    case EPERM:
      return "The sandbox's user may not do that there; work under /workspace or /tmp.";
    case ELOOP:
      return "The path goes through too many symbolic links (or a loop of them).";
    case ENAMETOOLONG:
      return "Use a shorter path.";
    default:
      return "";
  }
}
}  // namespace

mcp::ToolResult SandboxError(const std::string& what, const Error& error, const std::string& hint) {
  std::string text = what + " failed: " + error.message + ".";
  if (!hint.empty()) text += " " + hint;
  return mcp::ToolResult::Error(std::move(text));
}

mcp::ToolResult PathError(const std::string& what, const Error& error, const std::string& hint) {
  return SandboxError(what, error, hint.empty() ? HintFor(error) : hint);
}

Result<std::string> ReadCellFile(const sandbox::CellLease& channel, const std::string& path,
                                 uint64_t max_bytes, uint64_t* size) {
  auto st = channel.Stat(path, /*follow_symlinks=*/true);
  if (!st) return st.error();
  if (st->type == sandbox::control::FileType::kDirectory)
    return Error::Msg(path + " is a directory (use list_files)");
  if (st->type != sandbox::control::FileType::kRegular)
    return Error::Msg(path + " is not a regular file");
  if (size) *size = st->size;
  return channel.ReadFile(path, max_bytes);
}

}  // namespace mcpcell::tools
