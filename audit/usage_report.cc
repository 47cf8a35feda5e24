#include "audit/usage_report.h"

#include <algorithm>
#include <cstdio>
#include <tuple>

#include "audit/record.h"

namespace mcpcell::audit {
namespace {

double Num(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

// A count: a non-negative integer (nlohmann parses them as unsigned, but a record made in
// memory may hold a signed one); anything else counts as 0.
uint64_t AsCount(const nlohmann::json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    return static_cast<uint64_t>(v.get<int64_t>());
  }
  return 0;
}

uint64_t Count(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() ? AsCount(*it) : 0;
}

// Cumulative counters never go down within a session; a difference below zero (a record
// edited, or a trail that does not chain) is taken as zero.
double Minus(double a, double b) { return a > b ? a - b : 0.0; }
uint64_t Minus(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

UsageFigures Difference(const UsageFigures& last, const std::optional<UsageFigures>& before) {
  if (!before) return last;
  UsageFigures d = last;
  d.cpu_s = Minus(last.cpu_s, before->cpu_s);
  d.memory_gib_s = Minus(last.memory_gib_s, before->memory_gib_s);
  d.wall_active_s = Minus(last.wall_active_s, before->wall_active_s);
  d.wall_paused_s = Minus(last.wall_paused_s, before->wall_paused_s);
  d.egress_up_bytes = Minus(last.egress_up_bytes, before->egress_up_bytes);
  d.egress_down_bytes = Minus(last.egress_down_bytes, before->egress_down_bytes);
  for (auto& [tool, n] : d.calls_by_tool) {
    auto it = before->calls_by_tool.find(tool);
    if (it != before->calls_by_tool.end()) n = Minus(n, it->second);
  }
  std::erase_if(d.calls_by_tool, [](const auto& kv) { return kv.second == 0; });
  return d;
}

void AddInto(UsageFigures& sum, const UsageFigures& f) {
  sum.cpu_s += f.cpu_s;
  sum.memory_gib_s += f.memory_gib_s;
  sum.peak_memory_bytes = std::max(sum.peak_memory_bytes, f.peak_memory_bytes);
  sum.wall_active_s += f.wall_active_s;
  sum.wall_paused_s += f.wall_paused_s;
  sum.egress_up_bytes += f.egress_up_bytes;
  sum.egress_down_bytes += f.egress_down_bytes;
  sum.storage_bytes += f.storage_bytes;
  for (const auto& [tool, n] : f.calls_by_tool) sum.calls_by_tool[tool] += n;
}

// A CSV field: quoted when it holds a comma, a quote or a line break.
std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string CsvRow(const char* kind, const std::string& tenant, const std::string& session,
                   const UsageFigures& f) {
  char nums[256];
  std::snprintf(
      nums, sizeof nums, "%.3f,%.6f,%llu,%.3f,%.3f,%llu,%llu,%llu,%llu", f.cpu_s, f.memory_gib_s,
      static_cast<unsigned long long>(f.peak_memory_bytes), f.wall_active_s, f.wall_paused_s,
      static_cast<unsigned long long>(f.egress_up_bytes),
      static_cast<unsigned long long>(f.egress_down_bytes),
      static_cast<unsigned long long>(f.storage_bytes), static_cast<unsigned long long>(f.calls()));
  return std::string(kind) + "," + CsvField(tenant) + "," + CsvField(session) + "," + nums + "\n";
}

}  // namespace

UsageFigures UsageFigures::FromJson(const nlohmann::json& u) {
  UsageFigures f;
  if (!u.is_object()) return f;
  f.cpu_s = Num(u, "cpu_s");
  f.memory_gib_s = Num(u, "memory_gib_s");
  f.peak_memory_bytes = Count(u, "peak_memory_bytes");
  f.wall_active_s = Num(u, "wall_active_s");
  f.wall_paused_s = Num(u, "wall_paused_s");
  f.egress_up_bytes = Count(u, "egress_up_bytes");
  f.egress_down_bytes = Count(u, "egress_down_bytes");
  f.storage_bytes = Count(u, "storage_bytes");
  if (auto it = u.find("calls_by_tool"); it != u.end() && it->is_object()) {
    for (const auto& [tool, n] : it->items()) {
      if (uint64_t count = AsCount(n); count > 0) f.calls_by_tool[tool] = count;
    }
  }
  return f;
}

nlohmann::json UsageFigures::ToJson() const {
  return {{"cpu_s", cpu_s},
          {"memory_gib_s", memory_gib_s},
          {"peak_memory_bytes", peak_memory_bytes},
          {"wall_active_s", wall_active_s},
          {"wall_paused_s", wall_paused_s},
          {"egress_up_bytes", egress_up_bytes},
          {"egress_down_bytes", egress_down_bytes},
          {"storage_bytes", storage_bytes},
          {"calls_by_tool", calls_by_tool},
          {"calls", calls()}};
}

uint64_t UsageFigures::calls() const {
  uint64_t n = 0;
  for (const auto& [tool, c] : calls_by_tool) n += c;
  return n;
}

UsageReport::UsageReport(std::optional<int64_t> since_ms, std::optional<int64_t> until_ms,
                         std::string tenant)
    : since_ms_(since_ms), until_ms_(until_ms), tenant_(std::move(tenant)) {}

void UsageReport::Add(const nlohmann::json& record) {
  const std::string type = StringField(record, "type");
  if (type != "session.start" && type != "session.end" && type != "usage") return;
  const std::string tenant = StringField(record, "tenant");
  if (!tenant_.empty() && tenant != tenant_) return;
  const std::string time = StringField(record, "time");
  auto ms = ParseTimeMs(time);
  if (!ms) return;
  if (until_ms_ && *ms >= *until_ms_) return;
  // Session ids start again with each server run and servers share a trail: a session is
  // named by its server too ("<server>/<session>") when the record has one.
  const std::string server = StringField(record, "server");
  const std::string session = StringField(record, "session");
  const std::pair<std::string, std::string> key{tenant,
                                                server.empty() ? session : server + "/" + session};
  auto current = current_.find(key);
  if (type == "session.start" || current == current_.end()) {
    Track track;
    track.tenant = key.first;
    track.session = key.second;
    if (type == "session.start") track.started = time;
    tracks_.push_back(std::move(track));
    current = current_.insert_or_assign(key, tracks_.size() - 1).first;
  }
  if (type == "session.start") return;
  auto usage = record.find("usage");
  if (usage == record.end() || !usage->is_object()) return;
  Track& t = tracks_[current->second];
  UsageFigures figures = UsageFigures::FromJson(*usage);
  if (since_ms_ && *ms < *since_ms_) {
    t.before = std::move(figures);
    return;
  }
  t.last = std::move(figures);
  if (type == "session.end") {
    t.ended = true;
    t.reason = StringField(record, "reason");
  }
}

std::vector<SessionUsageRow> UsageReport::Sessions() const {
  std::vector<SessionUsageRow> rows;
  for (const Track& t : tracks_) {
    if (!t.last) continue;
    rows.push_back(
        {t.tenant, t.session, t.started, t.ended, t.reason, Difference(*t.last, t.before)});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return std::tie(a.tenant, a.session, a.started) < std::tie(b.tenant, b.session, b.started);
  });
  return rows;
}

std::vector<TenantUsageRow> UsageReport::Tenants() const {
  std::vector<TenantUsageRow> rows;
  for (const SessionUsageRow& s : Sessions()) {
    if (rows.empty() || rows.back().tenant != s.tenant) {
      rows.emplace_back();
      rows.back().tenant = s.tenant;
    }
    rows.back().sessions++;
    AddInto(rows.back().figures, s.figures);
  }
  return rows;
}

nlohmann::json UsageReport::ToJson() const {
  nlohmann::json out = {{"tenants", nlohmann::json::array()},
                        {"sessions", nlohmann::json::array()}};
  for (const TenantUsageRow& t : Tenants()) {
    nlohmann::json row = t.figures.ToJson();
    row["tenant"] = t.tenant;
    row["sessions"] = t.sessions;
    out["tenants"].push_back(std::move(row));
  }
  for (const SessionUsageRow& s : Sessions()) {
    nlohmann::json row = s.figures.ToJson();
    row["tenant"] = s.tenant;
    row["session"] = s.session;
    row["started"] = s.started;
    row["ended"] = s.ended;
    row["reason"] = s.reason;
    out["sessions"].push_back(std::move(row));
  }
  return out;
}

std::string UsageReport::ToCsv() const {
  std::string csv =
      "kind,tenant,session,cpu_s,memory_gib_s,peak_memory_bytes,wall_active_s,wall_paused_s,"
      "egress_up_bytes,egress_down_bytes,storage_bytes,calls\n";
  for (const TenantUsageRow& t : Tenants()) csv += CsvRow("tenant", t.tenant, "", t.figures);
  for (const SessionUsageRow& s : Sessions()) {
    csv += CsvRow("session", s.tenant, s.session, s.figures);
  }
  return csv;
}

}  // namespace mcpcell::audit
