// `mcpcell audit verify|query|export`: the operator's view of the audit trail in
// <state_dir>/audit (audit/, docs/audit.md), read on the host without a running server.
//
// verify checks the whole chain (and, with --public-key, the checkpoints' signatures) and
// exits 0 when it holds, 1 when it found tampering (naming file, line and seq), 2 on usage
// errors (bad options, no trail, an unreadable key). query prints the matching records as
// JSON Lines; export prints them as JSON Lines or as OCSF-like events (--format ocsf).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include "audit/query.h"
#include "audit/record.h"
#include "audit/signing.h"
#include "audit/trail_files.h"
#include "audit/verify.h"
#include "cli/command.h"
#include "sandbox/state_dir.h"

namespace mcpcell::cli {
namespace {

constexpr int kTampered = 1;
constexpr int kUsage = 2;

struct AuditOptions {
  std::string state_dir = sandbox::DefaultStateDir();
  std::string public_key;
  std::string tenant, session, type, since, until;
  std::string format = "jsonl";
};

int Fail(int code, const std::string& what) {
  std::fprintf(stderr, "mcpcell audit: %s\n", what.c_str());
  return code;
}

int RunVerify(const AuditOptions& o) {
  std::unique_ptr<audit::SignatureVerifier> verifier;
  if (!o.public_key.empty()) {
    auto loaded = audit::SignatureVerifier::Load(o.public_key);
    if (!loaded) return Fail(kUsage, loaded.error().message);
    verifier = std::move(*loaded);
  }
  const std::string dir = audit::AuditDir(o.state_dir);
  auto report = audit::VerifyTrail(dir, verifier.get());
  if (!report) return Fail(kUsage, "no audit trail in " + dir + ": " + report.error().message);
  std::printf(
      "audit trail %s: %llu record(s) in %llu file(s), seq %llu..%llu, %llu checkpoint(s), "
      "%llu signature(s) verified\n",
      dir.c_str(), static_cast<unsigned long long>(report->records),
      static_cast<unsigned long long>(report->files),
      static_cast<unsigned long long>(report->first_seq),
      static_cast<unsigned long long>(report->last_seq),
      static_cast<unsigned long long>(report->checkpoints),
      static_cast<unsigned long long>(report->signatures_verified));
  for (const std::string& note : report->notes) std::printf("note: %s\n", note.c_str());
  if (report->failure) {
    std::printf("TAMPERED: %s\n", audit::Describe(*report->failure).c_str());
    return kTampered;
  }
  std::printf("ok\n");
  return 0;
}

// query and export: the filtered records, one JSON object per line.
int RunQuery(const AuditOptions& o, bool ocsf) {
  audit::QueryFilter filter;
  filter.tenant = o.tenant;
  filter.session = o.session;
  filter.type = o.type;
  for (auto [text, out, name] : {std::tuple{&o.since, &filter.since_ms, "--since"},
                                 std::tuple{&o.until, &filter.until_ms, "--until"}}) {
    if (text->empty()) continue;
    auto ms = audit::ParseTimeMs(*text);
    if (!ms) return Fail(kUsage, std::string(name) + ": " + ms.error().message);
    *out = *ms;
  }
  const std::string dir = audit::AuditDir(o.state_dir);
  uint64_t skipped = 0;
  Status s = audit::ForEachRecord(
      dir,
      [&](const nlohmann::json& record) {
        if (!audit::Matches(record, filter)) return;
        std::string line = audit::CanonicalJson(ocsf ? audit::ToOcsf(record) : record);
        line += '\n';
        std::fwrite(line.data(), 1, line.size(), stdout);
      },
      &skipped);
  if (!s) return Fail(kUsage, "no audit trail in " + dir + ": " + s.error().message);
  if (skipped > 0)
    std::fprintf(stderr,
                 "mcpcell audit: %llu line(s) that are not records were skipped "
                 "(mcpcell audit verify says where)\n",
                 static_cast<unsigned long long>(skipped));
  return 0;
}

void AddFilters(CLI::App* sub, AuditOptions* o) {
  sub->add_option("--tenant", o->tenant, "Only this tenant's records");
  sub->add_option("--session", o->session, "Only this session's records");
  sub->add_option("--type", o->type,
                  "Only this type (exec.start), or types with this prefix (exec. or exec*)");
  sub->add_option("--since", o->since, "Records at or after this time (RFC 3339 or a date)");
  sub->add_option("--until", o->until, "Records before this time (RFC 3339 or a date)");
}

const bool kRegistered = RegisterCommand("audit", [](CLI::App& parent, int* exit_code) {
  auto o = std::make_shared<AuditOptions>();
  CLI::App* audit = parent.add_subcommand(
      "audit", "Verify, query and export the tamper-evident audit trail (docs/audit.md)");
  audit->require_subcommand(1);
  audit->add_option("--state-dir", o->state_dir, "The server's state dir")->capture_default_str();

  CLI::App* verify = audit->add_subcommand(
      "verify", "Check the hash chain and checkpoints; exit 1 naming the first tampering");
  verify->add_option("--state-dir", o->state_dir, "The server's state dir");
  verify->add_option("--public-key", o->public_key,
                     "PEM Ed25519 public key: check the checkpoints' signatures");
  verify->callback([o, exit_code] { *exit_code = RunVerify(*o); });

  CLI::App* query = audit->add_subcommand("query", "Print matching records as JSON Lines");
  query->add_option("--state-dir", o->state_dir, "The server's state dir");
  AddFilters(query, o.get());
  query->callback([o, exit_code] { *exit_code = RunQuery(*o, false); });

  CLI::App* exp = audit->add_subcommand("export", "Print matching records for a SIEM");
  exp->add_option("--state-dir", o->state_dir, "The server's state dir");
  exp->add_option("--format", o->format, "jsonl (the records) or ocsf (OCSF-like events)")
      ->capture_default_str();
  AddFilters(exp, o.get());
  exp->callback([o, exit_code] {
    if (o->format != "jsonl" && o->format != "ocsf")
      *exit_code = Fail(kUsage, "--format: want jsonl or ocsf, got \"" + o->format + "\"");
    else
      *exit_code = RunQuery(*o, o->format == "ocsf");
  });
});

}  // namespace
}  // namespace mcpcell::cli
