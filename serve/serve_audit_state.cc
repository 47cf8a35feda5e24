// ServeAudit's records of the sessions' state (serve_audit.h): snapshot.create,
// snapshot.restore, snapshot.delete and session.hibernate. What a snapshot is (id, name,
// digest, files, bytes), never what it holds. And exec.end of background processes (their
// exit, never their output). Apart from serve_audit.cc to keep its size.
#include <string>

#include "serve/serve_audit.h"
#include "tools/process_table.h"

namespace mcpcell::serve {
namespace {

nlohmann::json SnapshotFields(const sandbox::SnapshotInfo& info) {
  return {{"snapshot", info.id},
          {"name", info.name},
          {"digest", info.digest},
          {"files", info.files},
          {"bytes", info.stored_bytes}};
}

}  // namespace

void ServeAudit::SnapshotCreated(const std::string& tenant, const std::string& session_key,
                                 const sandbox::SnapshotInfo& info) {
  // Metered as the session's storage while it exists (storage_bytes).
  if (auto meter = usage_.Find(session_key)) meter->SnapshotStored(info.id, info.stored_bytes);
  Append("snapshot.create", tenant, session_key, "", SnapshotFields(info));
}

void ServeAudit::SnapshotRestored(const std::string& tenant, const std::string& session_key,
                                  const sandbox::SnapshotInfo& info, uint64_t programs_ended) {
  nlohmann::json fields = SnapshotFields(info);
  fields["programs_ended"] = programs_ended;
  Append("snapshot.restore", tenant, session_key, "", fields);
}

void ServeAudit::SnapshotDeleted(const std::string& tenant, const sandbox::SnapshotInfo& info) {
  // Any session of the tenant may delete it: the maker's meter, whichever it is, stops
  // counting it.
  for (const auto& [session, meter] : usage_.All()) meter->SnapshotRemoved(info.id);
  Append("snapshot.delete", tenant, "", "", SnapshotFields(info));
}

void ServeAudit::SessionHibernated(const std::string& tenant, const std::string& session_key,
                                   const std::string& cell_id, const sandbox::SnapshotInfo& info,
                                   bool frozen) {
  nlohmann::json fields = SnapshotFields(info);
  fields["frozen"] = frozen;
  Append("session.hibernate", tenant, session_key, cell_id, fields);
}

void ServeAudit::BackgroundExecEnded(const tools::BackgroundProcess& p,
                                     const tools::ProcessState& s) {
  const auto ran = std::chrono::system_clock::now() - p.started_at;
  nlohmann::json fields = {
      {"tool", p.kind == "python" ? "python" : "run_command"},
      {"background", true},
      {"process_id", p.id},
      {"state", s.state},  // exited, killed, stopped (lost with its cell)
      {"exit_status", s.state == "exited" ? s.exit_code : -1},
      {"signal", s.signal},
      {"duration_ms", std::chrono::duration_cast<std::chrono::milliseconds>(ran).count()},
      {"cpu_ms", s.cpu_ms},
      {"peak_memory_bytes", s.peak_memory_bytes}};
  if (s.state == "stopped") fields["reason"] = s.detail;
  Append("exec.end", p.tenant, p.session_key, p.cell_id, fields);
}

}  // namespace mcpcell::serve
