// SessionRecords: what a hibernated session needs to come back after a server restart, one
// JSON file per session in <state_dir>/sessions/<resume id>.json (docs/lifecycle.md,
// "Surviving a restart").
//
// A record names the session's resume id (the HTTP Mcp-Session-Id, or the id a stdio client
// gives to `serve --resume`), its tenant, the hidden snapshot holding its files, the policy
// it ran under, and what its client said at initialize. It is written when the session
// hibernates (at idle expiry, or at a clean shutdown), always to a temp file renamed over
// the record, so a reader sees the old record or the new one, never half of one; it is
// removed when the session really ends.
//
// Reading is strict: an unknown or missing field, a wrong type, an unknown `version`, a
// resume id that is not the file's name are errors naming the file and the field. A bad
// record is skipped by the server (with a warning), never trusted.
//
// Threading: a SessionRecords is stateless beyond its dir; callers serialise writes of one
// record (serve/session_resume.h does).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "mcp/types.h"

namespace mcpcell::serve {

// The record format's version; a record of another version is refused.
inline constexpr int kSessionRecordVersion = 1;

struct SessionRecord {
  std::string resume_id;  // 32 lower-case hex digits; the file's name
  std::string transport;  // "http" or "stdio"
  std::string tenant;     // "" = the server's own sessions (stdio, HTTP without tokens)
  std::string snapshot_id;
  std::string policy_name;
  std::string policy_sha256;
  std::string protocol_version;
  mcp::Json client_info = mcp::Json::object();
  mcp::Json client_capabilities = mcp::Json::object();
  std::string created;        // UTC "2026-01-02T03:04:05Z": when the session started
  std::string last_used;      // its last call before it hibernated
  std::string hibernated_at;  // when its files were kept
  std::string server_id;      // the server instance that wrote it (a restart changes it)
};

// True for a well-formed resume id (32 lower-case hex digits): the only names a record may have.
bool IsResumeId(const std::string& id);
// A new random resume id.
std::string NewResumeId();

// Strict parse of one record's text; `file` names it in errors.
Result<SessionRecord> ParseSessionRecord(const std::string& text, const std::string& file);
std::string SessionRecordText(const SessionRecord& record);

class SessionRecords {
 public:
  explicit SessionRecords(std::string dir);  // usually <state_dir>/sessions

  // Writes `record` atomically (temp file, fsync, rename); makes the dir (0700) if needed.
  Status Write(const SessionRecord& record) const;
  // The record of `resume_id`; "no hibernated session" for a missing one.
  Result<SessionRecord> Read(const std::string& resume_id) const;
  // Removes it; a missing record is fine.
  Status Remove(const std::string& resume_id) const;
  // Every readable record (by resume id); each unreadable file adds a warning naming it.
  std::vector<SessionRecord> List(std::vector<std::string>* warnings) const;
  std::string PathOf(const std::string& resume_id) const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace mcpcell::serve
