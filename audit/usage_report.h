// The metering report behind `mcpcell usage` (docs/audit.md "Metering"): per session and
// per tenant, what was used in a time window, from the trail's session.end and usage
// records (whose `usage` field holds the session's cumulative figures so far).
//
// A session's figures for [since, until) are its last cumulative record in the window
// minus its last one before `since` (storage_bytes: its last reading) (so a long session is split
// across windows without counting twice); peak memory is the peak as of the last record. Sessions
// with no record in the window are left out. Session ids start again with each server run ("s1"),
// so a session is one session.start and what follows it under that id. Pure: fed records in trail
// order, any thread.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace mcpcell::audit {

// A session's usage figures: cumulative counters, except storage_bytes and peak memory,
// which are the latest reading and the peak. The one struct of the meter (tools/usage_meter),
// the records and the report.
struct UsageFigures {
  double cpu_s = 0;
  double memory_gib_s = 0;
  uint64_t peak_memory_bytes = 0;
  double wall_active_s = 0;
  double wall_paused_s = 0;
  uint64_t egress_up_bytes = 0;
  uint64_t egress_down_bytes = 0;
  // Bytes on disk (allocated blocks) of the session's workspace at the last reading: a
  // level, not a counter. The cell's writable root layer is not counted (it lives in cell
  // init's own tmpfs, not visible from the host).
  uint64_t storage_bytes = 0;
  std::map<std::string, uint64_t> calls_by_tool;

  static UsageFigures FromJson(const nlohmann::json& usage);  // a record's `usage`
  nlohmann::json ToJson() const;
  uint64_t calls() const;
};

struct SessionUsageRow {
  std::string tenant, session;
  std::string started;  // its session.start's time ("" when before the trail's records)
  bool ended = false;   // its session.end is in the window
  std::string reason;   // session.end's reason
  UsageFigures figures;
};

struct TenantUsageRow {
  std::string tenant;
  uint64_t sessions = 0;
  UsageFigures figures;  // sums; peak is the largest
};

class UsageReport {
 public:
  UsageReport(std::optional<int64_t> since_ms, std::optional<int64_t> until_ms,
              std::string tenant = "");
  // Feed every record of the trail in order; records other than session.start,
  // session.end and usage (and those of other tenants, or after `until`) are ignored.
  void Add(const nlohmann::json& record);

  std::vector<SessionUsageRow> Sessions() const;  // by tenant, session, start
  std::vector<TenantUsageRow> Tenants() const;    // by tenant

  // {"sessions": [...], "tenants": [...]}.
  nlohmann::json ToJson() const;
  // One header line, then "tenant" rows and "session" rows.
  std::string ToCsv() const;

 private:
  struct Track {
    std::string tenant, session, started;
    std::optional<UsageFigures> before, last;
    bool ended = false;
    std::string reason;
  };
  std::optional<int64_t> since_ms_, until_ms_;
  std::string tenant_;
  std::vector<Track> tracks_;
  std::map<std::pair<std::string, std::string>, size_t> current_;  // (tenant, session) -> track
};

}  // namespace mcpcell::audit
