// `mcpcell snapshot list|show|delete|verify|export|import`: the operator's view of the
// snapshot store in <state_dir>/snapshots (sandbox/snapshot_store.h), on the host, without
// a running server. Every command acts for one tenant (--tenant, default "default"): another
// tenant's snapshots are not found, as they would not be for that tenant's sessions.
//
// Delete refuses a snapshot a running server marks in use (a live session's base) and, unless
// --force, a hibernated session's files (kind "hibernation"): a stopped server's session
// would come back without them.
//
// Exit status: 0 done, 1 verify found damage (naming the first bad path), 2 anything else
// (unknown snapshot, bad options, an archive import refused).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/units.h"  // ParseSize
#include "cli/command.h"
#include "sandbox/snapshot_store.h"
#include "sandbox/state_dir.h"

namespace mcpcell::cli {
namespace {

constexpr int kDamaged = 1;
constexpr int kUsage = 2;

struct SnapshotOptions {
  std::string state_dir = sandbox::DefaultStateDir();
  std::string tenant = "default";
  std::string snapshot;  // id or name
  std::string path;      // export/import archive
  std::string quota;     // import: [limits] snapshot_storage to apply; "" = none
  bool force = false;    // delete: a hibernation snapshot too
};

int Fail(int code, const std::string& what) {
  std::fprintf(stderr, "mcpcell snapshot: %s\n", what.c_str());
  return code;
}

sandbox::SnapshotStore Store(const SnapshotOptions& o) {
  return sandbox::SnapshotStore(o.state_dir + "/snapshots");
}

// "snapshot" (made by snapshot_create or imported) or "hibernation" (a session's files).
std::string KindName(const sandbox::SnapshotInfo& s) {
  return s.kind.empty() ? "snapshot" : s.kind;
}

nlohmann::json Summary(const sandbox::SnapshotInfo& s) {
  nlohmann::json j = {{"id", s.id},           {"tenant", s.tenant},
                      {"name", s.name},       {"kind", KindName(s)},
                      {"created", s.created}, {"digest", s.digest},
                      {"files", s.files},     {"stored_bytes", s.stored_bytes}};
  if (!s.layers.empty()) {
    nlohmann::json layers = nlohmann::json::object();
    for (const auto& layer : s.layers) layers[layer.name] = layer.entries.size();
    j["layer_entries"] = layers;
  }
  return j;
}

// 1048564 -> "1.0 MiB": a column to read, not an exact figure (show has that).
std::string Approx(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

int RunList(const SnapshotOptions& o) {
  auto list = Store(o).List(o.tenant);
  if (!list) return Fail(kUsage, list.error().message);
  std::printf("%-32s  %-20s  %-11s  %-27s  %8s  %10s\n", "ID", "NAME", "KIND", "CREATED", "FILES",
              "SIZE");
  for (const auto& s : *list)
    std::printf("%-32s  %-20s  %-11s  %-27s  %8llu  %10s\n", s.id.c_str(), s.name.c_str(),
                KindName(s).c_str(), s.created.c_str(), static_cast<unsigned long long>(s.files),
                Approx(s.stored_bytes).c_str());
  return 0;
}

int RunShow(const SnapshotOptions& o) {
  auto s = Store(o).Get(o.tenant, o.snapshot);
  if (!s) return Fail(kUsage, s.error().message);
  std::printf("%s\n", Summary(*s).dump(2).c_str());
  return 0;
}

int RunDelete(const SnapshotOptions& o) {
  sandbox::SnapshotStore store = Store(o);
  auto info = store.Get(o.tenant, o.snapshot);
  if (!info) return Fail(kUsage, info.error().message);
  if (info->kind == sandbox::kSnapshotKindHibernation && !o.force)
    return Fail(kUsage, "snapshot " + info->id +
                            " holds a hibernated session's files (kind hibernation): deleting it "
                            "loses them for good; add --force to delete it anyway");
  // By id: the name was resolved above, for the kind's check.
  if (Status s = store.Delete(o.tenant, info->id); !s) return Fail(kUsage, s.error().message);
  std::printf("deleted %s\n", o.snapshot.c_str());
  return 0;
}

int RunVerify(const SnapshotOptions& o) {
  sandbox::SnapshotStore store = Store(o);
  auto s = store.Get(o.tenant, o.snapshot);
  if (!s) return Fail(kUsage, s.error().message);
  if (Status v = store.Verify(s->id, /*rehash_all=*/true); !v) {
    std::printf("DAMAGED: snapshot %s: %s\n", s->id.c_str(), v.error().message.c_str());
    return kDamaged;
  }
  std::printf("snapshot %s: %llu file(s), digest %s: ok\n", s->id.c_str(),
              static_cast<unsigned long long>(s->files), s->digest.c_str());
  return 0;
}

int RunExport(const SnapshotOptions& o) {
  if (Status s = Store(o).Export(o.tenant, o.snapshot, o.path); !s)
    return Fail(kUsage, s.error().message);
  std::printf("exported %s to %s\n", o.snapshot.c_str(), o.path.c_str());
  return 0;
}

int RunImport(const SnapshotOptions& o) {
  sandbox::SnapshotLimits limits;
  if (!o.quota.empty()) {
    auto bytes = ParseSize(o.quota);
    if (!bytes) return Fail(kUsage, "--quota: expected a size like \"10GiB\", got " + o.quota);
    limits.storage_bytes = *bytes;
  }
  auto s = Store(o).Import(o.tenant, o.path, limits);
  if (!s) return Fail(kUsage, s.error().message);
  std::printf("%s\n", Summary(*s).dump(2).c_str());
  return 0;
}

// One subcommand with the shared options (they may be given before or after its name).
CLI::App* Add(CLI::App* parent, const char* name, const char* help, SnapshotOptions* o) {
  CLI::App* sub = parent->add_subcommand(name, help);
  sub->add_option("--state-dir", o->state_dir, "The server's state dir");
  sub->add_option("--tenant", o->tenant, "The tenant whose snapshots these are");
  return sub;
}

const bool kRegistered = RegisterCommand("snapshot", [](CLI::App& parent, int* exit_code) {
  auto o = std::make_shared<SnapshotOptions>();
  CLI::App* snap = parent.add_subcommand(
      "snapshot", "List, show, delete, verify, export and import tenants' snapshots");
  snap->require_subcommand(1);
  snap->add_option("--state-dir", o->state_dir, "The server's state dir")->capture_default_str();
  snap->add_option("--tenant", o->tenant, "The tenant whose snapshots these are")
      ->capture_default_str();

  Add(snap, "list", "The tenant's snapshots, oldest first", o.get())->callback([o, exit_code] {
    *exit_code = RunList(*o);
  });
  auto with_snapshot = [&](const char* name, const char* help, int (*run)(const SnapshotOptions&)) {
    CLI::App* sub = Add(snap, name, help, o.get());
    sub->add_option("snapshot", o->snapshot, "Snapshot id or name")->required();
    sub->callback([o, exit_code, run] { *exit_code = run(*o); });
    return sub;
  };
  with_snapshot("show", "A snapshot's id, name, digest, size and entries per layer", RunShow);
  with_snapshot("delete",
                "Delete a snapshot and the files no other snapshot holds (refused while a "
                "running server's session has it as its base)",
                RunDelete)
      ->add_flag("--force", o->force, "Delete a hibernated session's snapshot too");
  with_snapshot("verify",
                "Re-hash every file and check the layer trees; exit 1 naming the "
                "first damaged path",
                RunVerify);
  with_snapshot("export", "Write a snapshot as a tar.gz (manifest and contents)", RunExport)
      ->add_option("archive", o->path, "The tar.gz to write")
      ->required();
  CLI::App* imp = Add(snap, "import",
                      "Read an exported tar.gz as a new snapshot of the tenant; "
                      "every path, size and digest is checked",
                      o.get());
  imp->add_option("archive", o->path, "The tar.gz to read")->required();
  imp->add_option("--quota", o->quota,
                  "Refuse when the tenant's snapshots would exceed this size (e.g. 10GiB)");
  imp->callback([o, exit_code] { *exit_code = RunImport(*o); });
});

}  // namespace
}  // namespace mcpcell::cli
