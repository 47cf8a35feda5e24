// Reading the trail for people and other systems: filters (tenant, session, type, time
// range), the tenant scope of an operator, and the OCSF-like export form (docs/audit.md has
// the mapping). Pure functions over records; ForEachRecord reads the files. Any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "base/status.h"

namespace mcpcell::audit {

struct QueryFilter {
  std::string tenant;   // exact; "" = any
  std::string session;  // exact; "" = any
  // Exact type ("exec.start"), or a prefix when it ends with '.' or '*' ("exec.", "exec*").
  std::string type;
  std::optional<int64_t> since_ms;  // record time >= since
  std::optional<int64_t> until_ms;  // record time < until
};

bool Matches(const nlohmann::json& record, const QueryFilter& filter);

// Which tenants' records an operator may read: all, or a list. Records of no tenant (the
// trail's own: checkpoints, rotation, recovery) are for all-tenant operators only.
struct TenantScope {
  bool all_tenants = false;
  std::set<std::string> tenants;
};
bool Visible(const nlohmann::json& record, const TenantScope& scope);

// The record as an OCSF-like event: class_uid, category_uid, activity_id, type_uid, time
// (ms), severity_id, metadata (product, uid = hash, sequence = seq, tenant), and the
// original record in `unmapped`.
nlohmann::json ToOcsf(const nlohmann::json& record);

// Calls fn with each record of the trail in dir, in chain order. Lines that are not records
// are skipped and counted in *skipped (verify says why). An unreadable dir is an error.
Status ForEachRecord(const std::string& dir, const std::function<void(const nlohmann::json&)>& fn,
                     uint64_t* skipped);

// Calls fn with each record of the trail in dir, newest first: the files from the newest
// (the current one) back, each one's lines from its end, until fn returns false; what a
// "latest N" view asks, without reading a long trail's older files. Only one file's lines
// are held at a time. Skipped lines and errors as ForEachRecord.
Status ForEachRecordNewestFirst(const std::string& dir,
                                const std::function<bool(const nlohmann::json&)>& fn,
                                uint64_t* skipped);

}  // namespace mcpcell::audit
