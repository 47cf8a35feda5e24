#include "tools/client_log.h"

#include <memory>

#include "mcp/session.h"
#include "tools/tool_env.h"

namespace mcpcell::tools {

mcp::Json ClientLogData(std::string_view event, std::string message) {
  return {{"event", std::string(event)}, {"message", std::move(message)}};
}

void LogCallWarning(const mcp::Context& ctx, std::string_view event, std::string message,
                    const SecretValuesFn* secret_values) {
  if (secret_values) {
    if (auto redactor = MakeRedactor(*secret_values, CallKey(ctx)))
      message = redactor->Redact(message);
  }
  ctx.Log(mcp::LogLevel::kWarning, ClientLogData(event, std::move(message)), kClientLogger);
}

void SessionLogRouter::Attach(mcp::Server* server) {
  std::lock_guard lock(mu_);
  server_ = server;
}

void SessionLogRouter::SetSecretValues(SecretValuesFn values) {
  std::lock_guard lock(mu_);
  secret_values_ = std::move(values);
}

void SessionLogRouter::Warn(const std::string& session_id, std::string_view event,
                            std::string message) {
  std::shared_ptr<mcp::Session> session;
  SecretValuesFn values;
  {
    std::lock_guard lock(mu_);
    if (server_) session = server_->FindSession(session_id);
    values = secret_values_;
  }
  if (!session) return;
  if (auto redactor = MakeRedactor(values, session_id)) message = redactor->Redact(message);
  // Outside the lock: the write to a slow client must not hold up other sessions' warnings
  // or the detach.
  if (session) {
    session->Log(mcp::LogLevel::kWarning, ClientLogData(event, std::move(message)), kClientLogger);
  }
}

}  // namespace mcpcell::tools
