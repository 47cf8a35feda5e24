#include "serve/session_records.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "serve/workspaces.h"

namespace mcpcell::serve {
namespace {

constexpr const char* kSuffix = ".json";

// The fields of a record and their JSON types; nothing else is accepted.
enum class Kind { kString, kObject, kInteger };
const std::vector<std::pair<const char*, Kind>>& Fields() {
  static const std::vector<std::pair<const char*, Kind>> fields = {
      {"version", Kind::kInteger},      {"resume_id", Kind::kString},
      {"transport", Kind::kString},     {"tenant", Kind::kString},
      {"snapshot_id", Kind::kString},   {"policy_name", Kind::kString},
      {"policy_sha256", Kind::kString}, {"protocol_version", Kind::kString},
      {"client_info", Kind::kObject},   {"client_capabilities", Kind::kObject},
      {"created", Kind::kString},       {"last_used", Kind::kString},
      {"hibernated_at", Kind::kString}, {"server_id", Kind::kString}};
  return fields;
}

bool HasKind(const mcp::Json& v, Kind kind) {
  switch (kind) {
    case Kind::kString:
      return v.is_string();
    case Kind::kObject:
      return v.is_object();
    case Kind::kInteger:
      return v.is_number_integer();
  }
  return false;
}

const char* KindName(Kind kind) {
  return kind == Kind::kString ? "a string" : kind == Kind::kObject ? "an object" : "an integer";
}

// Field-level checks beyond the JSON types.
Status CheckValues(const SessionRecord& r) {
  if (!IsResumeId(r.resume_id)) return Error::Msg("resume_id: not 32 lower-case hex digits");
  if (r.transport != "http" && r.transport != "stdio")
    return Error::Msg("transport: \"" + r.transport + "\" is neither \"http\" nor \"stdio\"");
  if (!IsResumeId(r.snapshot_id)) return Error::Msg("snapshot_id: not a snapshot id");
  for (const auto& [name, value] :
       {std::pair{"created", &r.created}, std::pair{"last_used", &r.last_used},
        std::pair{"hibernated_at", &r.hibernated_at}}) {
    if (!ParseUtc(*value))
      return Error::Msg(std::string(name) + ": not a UTC time \"" + *value + "\"");
  }
  if (r.protocol_version.empty()) return Error::Msg("protocol_version: empty");
  return Ok();
}

Status WriteAtomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Error::Sys("open(\"" + tmp + "\")");
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Error e = Error::Sys("write(\"" + tmp + "\")");
      ::close(fd);
      ::unlink(tmp.c_str());
      return e;
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    Error e = Error::Sys("fsync(\"" + tmp + "\")");
    ::close(fd);
    ::unlink(tmp.c_str());
    return e;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Error e = Error::Sys("rename(\"" + tmp + "\", \"" + path + "\")");
    ::unlink(tmp.c_str());
    return e;
  }
  return Ok();
}

}  // namespace

bool IsResumeId(const std::string& id) {
  return id.size() == 32 && std::all_of(id.begin(), id.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::string NewResumeId() {
  unsigned char buf[16];
  if (RAND_bytes(buf, sizeof buf) != 1) throw std::runtime_error("RAND_bytes failed");
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : buf) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

Result<SessionRecord> ParseSessionRecord(const std::string& text, const std::string& file) {
  auto fail = [&file](const std::string& what) {
    return Error::Msg("session record " + file + ": " + what);
  };
  mcp::Json j = mcp::Json::parse(text, nullptr, false);
  if (j.is_discarded()) return fail("not valid JSON (truncated or corrupt)");
  if (!j.is_object()) return fail("not a JSON object");
  for (const auto& [key, value] : j.items()) {
    auto known = std::find_if(Fields().begin(), Fields().end(),
                              [&key](const auto& f) { return key == f.first; });
    if (known == Fields().end()) return fail("unknown field \"" + key + "\"");
    if (!HasKind(value, known->second))
      return fail("\"" + key + "\" must be " + KindName(known->second));
  }
  for (const auto& [name, kind] : Fields()) {
    if (!j.contains(name)) return fail("missing field \"" + std::string(name) + "\"");
  }
  if (j["version"].get<int64_t>() != kSessionRecordVersion) {
    return fail("version " + j["version"].dump() + " is not " +
                std::to_string(kSessionRecordVersion) + " (written by another mcpcell?)");
  }
  SessionRecord r;
  r.resume_id = j["resume_id"];
  r.transport = j["transport"];
  r.tenant = j["tenant"];
  r.snapshot_id = j["snapshot_id"];
  r.policy_name = j["policy_name"];
  r.policy_sha256 = j["policy_sha256"];
  r.protocol_version = j["protocol_version"];
  r.client_info = j["client_info"];
  r.client_capabilities = j["client_capabilities"];
  r.created = j["created"];
  r.last_used = j["last_used"];
  r.hibernated_at = j["hibernated_at"];
  r.server_id = j["server_id"];
  if (Status st = CheckValues(r); !st) return fail(st.error().message);
  return r;
}

std::string SessionRecordText(const SessionRecord& r) {
  mcp::Json j = {{"version", kSessionRecordVersion},
                 {"resume_id", r.resume_id},
                 {"transport", r.transport},
                 {"tenant", r.tenant},
                 {"snapshot_id", r.snapshot_id},
                 {"policy_name", r.policy_name},
                 {"policy_sha256", r.policy_sha256},
                 {"protocol_version", r.protocol_version},
                 {"client_info", r.client_info},
                 {"client_capabilities", r.client_capabilities},
                 {"created", r.created},
                 {"last_used", r.last_used},
                 {"hibernated_at", r.hibernated_at},
                 {"server_id", r.server_id}};
  return j.dump(1) + "\n";
}

SessionRecords::SessionRecords(std::string dir) : dir_(std::move(dir)) {}

std::string SessionRecords::PathOf(const std::string& resume_id) const {
  return dir_ + "/" + resume_id + kSuffix;
}

Status SessionRecords::Write(const SessionRecord& record) const {
  if (Status st = CheckValues(record); !st) return st.error().Wrap("session record");
  if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST)
    return Error::Sys("mkdir(\"" + dir_ + "\")");
  return WriteAtomic(PathOf(record.resume_id), SessionRecordText(record));
}

Result<SessionRecord> SessionRecords::Read(const std::string& resume_id) const {
  if (!IsResumeId(resume_id))
    return Error::Msg("\"" + resume_id + "\" is not a session id (32 lower-case hex digits)");
  const std::string path = PathOf(resume_id);
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return Error::Msg("no hibernated session \"" + resume_id + "\"");
    return Error::Sys("open(\"" + path + "\")");
  }
  std::stringstream text;
  text << in.rdbuf();
  auto record = ParseSessionRecord(text.str(), path);
  if (!record) return record.error();
  if (record->resume_id != resume_id)
    return Error::Msg("session record " + path + ": resume_id \"" + record->resume_id +
                      "\" is not the file's name");
  return record;
}

Status SessionRecords::Remove(const std::string& resume_id) const {
  if (!IsResumeId(resume_id)) return Ok();
  const std::string path = PathOf(resume_id);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Error::Sys("unlink(\"" + path + "\")");
  return Ok();
}

std::vector<SessionRecord> SessionRecords::List(std::vector<std::string>* warnings) const {
  std::vector<SessionRecord> out;
  DIR* d = ::opendir(dir_.c_str());
  if (!d) {
    if (errno != ENOENT) warnings->push_back("session records: opendir(\"" + dir_ + "\") failed");
    return out;
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0) continue;  // mid-write
    names.push_back(std::move(name));
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string id = name.size() > 5 ? name.substr(0, name.size() - 5) : name;
    if (name.size() <= 5 || name.substr(name.size() - 5) != kSuffix || !IsResumeId(id)) {
      warnings->push_back("session records: " + dir_ + "/" + name +
                          " is not a record (<32 hex digits>.json); skipped");
      continue;
    }
    auto record = Read(id);
    if (!record) {
      warnings->push_back(record.error().message + "; skipped");
      continue;
    }
    out.push_back(std::move(*record));
  }
  return out;
}

}  // namespace mcpcell::serve
