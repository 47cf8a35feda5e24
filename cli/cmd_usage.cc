// `mcpcell usage`: what each tenant and each session used in a time window (CPU seconds,
// memory GiB-seconds, peak memory, wall seconds, egress bytes, calls), summed from the
// audit trail's session.end and usage records (audit/usage_report.h, docs/audit.md
// "Metering"). Read on the host, without a running server. Exit 2 on usage errors.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include "audit/query.h"
#include "audit/record.h"
#include "audit/trail_files.h"
#include "audit/usage_report.h"
#include "cli/command.h"
#include "sandbox/state_dir.h"

namespace mcpcell::cli {
namespace {

struct UsageOptions {
  std::string state_dir = sandbox::DefaultStateDir();
  std::string since, until, tenant;
  std::string format = "json";
};

int Fail(const std::string& what) {
  std::fprintf(stderr, "mcpcell usage: %s\n", what.c_str());
  return 2;
}

int RunUsage(const UsageOptions& o) {
  if (o.format != "json" && o.format != "csv")
    return Fail("--format: want json or csv, got \"" + o.format + "\"");
  std::optional<int64_t> since, until;
  for (auto [text, out, name] : {std::tuple{&o.since, &since, "--since"},
                                 std::tuple{&o.until, &until, "--until"}}) {
    if (text->empty()) continue;
    auto ms = audit::ParseTimeMs(*text);
    if (!ms) return Fail(std::string(name) + ": " + ms.error().message);
    *out = *ms;
  }
  if (since && until && *since >= *until) return Fail("--since must be before --until");
  audit::UsageReport report(since, until, o.tenant);
  const std::string dir = audit::AuditDir(o.state_dir);
  uint64_t skipped = 0;
  Status s = audit::ForEachRecord(
      dir, [&](const nlohmann::json& record) { report.Add(record); }, &skipped);
  if (!s) return Fail("no audit trail in " + dir + ": " + s.error().message);
  if (skipped > 0)
    std::fprintf(stderr,
                 "mcpcell usage: %llu line(s) that are not records were skipped (mcpcell audit "
                 "verify says where)\n",
                 static_cast<unsigned long long>(skipped));
  std::string out = o.format == "csv" ? report.ToCsv() : report.ToJson().dump(2) + "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

const bool kRegistered = RegisterCommand("usage", [](CLI::App& parent, int* exit_code) {
  auto o = std::make_shared<UsageOptions>();
  CLI::App* usage = parent.add_subcommand(
      "usage", "Per tenant and per session: CPU, memory, wall time, egress and calls used in a "
               "time window, from the audit trail (docs/audit.md)");
  usage->add_option("--state-dir", o->state_dir, "The server's state dir")->capture_default_str();
  usage->add_option("--since", o->since, "Window start, inclusive (RFC 3339 or a date)");
  usage->add_option("--until", o->until, "Window end, exclusive (RFC 3339 or a date)");
  usage->add_option("--tenant", o->tenant, "Only this tenant");
  usage->add_option("--format", o->format, "json or csv")->capture_default_str();
  usage->callback([o, exit_code] { *exit_code = RunUsage(*o); });
});

}  // namespace
}  // namespace mcpcell::cli
