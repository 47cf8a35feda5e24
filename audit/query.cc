#include "audit/query.h"

#include <fstream>
#include <string_view>
#include <vector>

#include "audit/record.h"
#include "audit/trail_files.h"

namespace mcpcell::audit {

using nlohmann::json;

namespace {
bool TypeMatches(const std::string& type, std::string_view want) {
  if (want.empty()) return true;
  if (want.back() == '*')
    want.remove_suffix(1);
  else if (want.back() != '.')
    return type == want;
  return type.compare(0, want.size(), want) == 0;
}

}  // namespace

bool Matches(const json& record, const QueryFilter& f) {
  if (!f.tenant.empty() && StringField(record, "tenant") != f.tenant) return false;
  if (!f.session.empty() && StringField(record, "session") != f.session) return false;
  if (!TypeMatches(StringField(record, "type"), f.type)) return false;
  if (f.since_ms || f.until_ms) {
    auto t = ParseTimeMs(StringField(record, "time"));
    if (!t) return false;
    if (f.since_ms && *t < *f.since_ms) return false;
    if (f.until_ms && *t >= *f.until_ms) return false;
  }
  return true;
}

bool Visible(const json& record, const TenantScope& scope) {
  if (scope.all_tenants) return true;
  std::string tenant = StringField(record, "tenant");
  return !tenant.empty() && scope.tenants.count(tenant) > 0;
}

namespace {
struct OcsfClass {
  int class_uid;
  const char* class_name;
  int category_uid;
  const char* category_name;
};

// By the type's prefix; docs/audit.md lists the same table.
OcsfClass ClassOf(const std::string& type) {
  auto starts = [&](const char* p) { return type.rfind(p, 0) == 0; };
  if (starts("exec.")) return {1007, "Process Activity", 1, "System Activity"};
  if (starts("file.")) return {1001, "File System Activity", 1, "System Activity"};
  if (starts("egress.")) return {4001, "Network Activity", 4, "Network Activity"};
  if (starts("package.")) return {4002, "HTTP Activity", 4, "Network Activity"};
  if (starts("auth.")) return {3002, "Authentication", 3, "Identity & Access Management"};
  if (starts("session.") || starts("policy.") || starts("secret."))
    return {6003, "API Activity", 6, "Application Activity"};
  return {6002, "Application Lifecycle", 6, "Application Activity"};
}

// OCSF activity ids: 1 create/launch/open, 2 read/terminate, 3 update, 4 delete, 99 other.
int ActivityOf(const std::string& type) {
  auto ends = [&](std::string_view s) {
    return type.size() >= s.size() && type.compare(type.size() - s.size(), s.size(), s) == 0;
  };
  if (ends(".start") || ends(".create")) return 1;
  if (ends(".end") || ends(".destroy") || ends(".read")) return 2;
  if (ends(".write") || ends(".edit")) return 3;
  if (ends(".delete")) return 4;
  return 99;
}
}  // namespace

json ToOcsf(const json& record) {
  const std::string type = StringField(record, "type");
  OcsfClass c = ClassOf(type);
  int activity = ActivityOf(type);
  auto ms = ParseTimeMs(StringField(record, "time"));
  json metadata = {{"version", "1.1.0"},
                   {"product", {{"name", "mcpcell"}, {"vendor_name", "mcpcell"}}},
                   {"uid", StringField(record, "hash")},
                   {"sequence", UintField(record, "seq")},
                   {"tenant_uid", StringField(record, "tenant")}};
  bool refused = type == "auth.refused" || type == "policy.refused" || type == "recovered";
  return {{"class_uid", c.class_uid},
          {"class_name", c.class_name},
          {"category_uid", c.category_uid},
          {"category_name", c.category_name},
          {"activity_id", activity},
          {"type_uid", c.class_uid * 100 + activity},
          {"time", ms ? *ms : 0},
          {"severity_id", refused ? 3 : 1},
          {"message", type},
          {"metadata", metadata},
          {"unmapped", record}};
}

Status ForEachRecord(const std::string& dir, const std::function<void(const json&)>& fn,
                     uint64_t* skipped) {
  auto files = ListTrailFiles(dir);
  if (!files) return files.error();
  for (const TrailFile& file : *files) {
    std::ifstream in(file.path, std::ios::binary);
    if (!in) return Error::Sys("open(\"" + file.path + "\")");
    std::string line;
    while (std::getline(in, line)) {
      auto record = ParseRecordLine(line);
      if (!record) {
        if (skipped) ++*skipped;
        continue;
      }
      fn(*record);
    }
  }
  return Ok();
}

Status ForEachRecordNewestFirst(const std::string& dir, const std::function<bool(const json&)>& fn,
                                uint64_t* skipped) {
  auto files = ListTrailFiles(dir);
  if (!files) return files.error();
  for (auto file = files->rbegin(); file != files->rend(); ++file) {
    std::ifstream in(file->path, std::ios::binary);
    if (!in) return Error::Sys("open(\"" + file->path + "\")");
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(std::move(line));
    for (auto line = lines.rbegin(); line != lines.rend(); ++line) {
      auto record = ParseRecordLine(*line);
      if (!record) {
        if (skipped) ++*skipped;
        continue;
      }
      if (!fn(*record)) return Ok();
    }
  }
  return Ok();
}

}  // namespace mcpcell::audit
