// The isolation, limits and time sections of a policy file (see loader_sections.h).
#include <chrono>
#include <string>

#include "base/units.h"
#include "policies/loader_sections.h"

namespace mcpcell::policies {

void ReadIsolation(TomlReader& r, const toml::table& root, IsolationPolicy* out) {
  const toml::table* t = r.Table(root, "", "isolation");
  if (!t) return;
  r.OnlyKeys(*t, "isolation", {"backend", "seccomp"});
  const toml::node* backend = t->get("backend");
  r.String(*t, "isolation", "backend", &out->backend, {"namespaces", "microvm"});
  if (!r.failed() && out->backend == "microvm") {
    r.Fail(backend->source(), "isolation.backend",
           "\"microvm\" is reserved for a future backend; only \"namespaces\" exists today");
  }
  r.Bool(*t, "isolation", "seccomp", &out->seccomp);
}

void ReadLimits(TomlReader& r, const toml::table& root, LimitsPolicy* out) {
  const toml::table* t = r.Table(root, "", "limits");
  if (!t) return;
  const std::string p = "limits";
  r.OnlyKeys(*t, p,
             {"memory", "pids", "cpus", "disk", "tmp", "open_files", "max_file_size", "output_kept",
              "snapshot_storage", "archive_bytes", "archive_ratio", "archive_entries"});
  r.Size(*t, p, "memory", 16ull << 20, 1ull << 40, &out->memory_bytes);
  r.Count(*t, p, "pids", 8, 1 << 22, &out->pids);
  if (const toml::node* n = t->get("cpus"); n && !r.failed()) {
    double cpus = 0;
    if (n->is_integer())
      cpus = static_cast<double>(n->as_integer()->get());
    else if (n->is_floating_point())
      cpus = n->as_floating_point()->get();
    else
      r.Fail(n->source(), "limits.cpus",
             "expected a number of CPUs like 1 or 0.5, got " + TomlReader::TypeName(*n));
    if (!r.failed() && !(cpus >= 0.01 && cpus <= 1024)) {
      r.Fail(n->source(), "limits.cpus",
             "must be between 0.01 and 1024, got " + TomlReader::Shown(*n));
    }
    if (!r.failed()) out->cpu_millicores = static_cast<uint32_t>(cpus * 1000 + 0.5);
  }
  r.Size(*t, p, "disk", 16ull << 20, 1ull << 40, &out->disk_bytes);
  r.Size(*t, p, "tmp", 1ull << 20, 1ull << 40, &out->tmp_bytes);
  r.Count(*t, p, "open_files", 16, 1 << 20, &out->open_files);
  r.Size(*t, p, "max_file_size", 4096, 1ull << 42, &out->file_size_bytes);
  r.Size(*t, p, "output_kept", 256, 16ull << 20, &out->output_keep_bytes);
  r.Size(*t, p, "snapshot_storage", 1ull << 20, 1ull << 50, &out->snapshot_storage_bytes);
  r.Size(*t, p, "archive_bytes", 4096, 1ull << 42, &out->archive_bytes);
  r.Count(*t, p, "archive_ratio", 2, 100000, &out->archive_ratio);
  r.Count(*t, p, "archive_entries", 1, 10000000, &out->archive_entries);
}

namespace {

// time.session_pause_idle: a duration or "off"; shorter than session_idle when given. The
// default (60 s) is off when session_idle is not longer (idle expiry comes first).
void ReadPauseIdle(TomlReader& r, const toml::table& t, TimePolicy* out) {
  if (r.failed()) return;
  const toml::node* n = t.get("session_pause_idle");
  if (!n) {
    if (out->session_pause_idle >= out->session_idle) out->session_pause_idle = {};
    return;
  }
  if (const auto* text = n->as_string(); text && text->get() == "off") {
    out->session_pause_idle = {};
    return;
  }
  using std::chrono::seconds;
  r.Duration(t, "time", "session_pause_idle", seconds(1), seconds(30 * 86400),
             &out->session_pause_idle);
  if (!r.failed() && out->session_pause_idle >= out->session_idle) {
    r.Fail(n->source(), "time.session_pause_idle",
           "must be shorter than time.session_idle (" + FormatDuration(out->session_pause_idle) +
               " >= " + FormatDuration(out->session_idle) + "), or \"off\"");
  }
}

}  // namespace

void ReadTime(TomlReader& r, const toml::table& root, TimePolicy* out) {
  const toml::table* t = r.Table(root, "", "time");
  if (!t) return;
  const std::string p = "time";
  using std::chrono::seconds;
  r.OnlyKeys(*t, p,
             {"exec_default", "exec_max", "session_idle", "session_max", "session_pause_idle",
              "workspace_retention"});
  r.Duration(*t, p, "exec_default", seconds(1), seconds(86400), &out->exec_default);
  r.Duration(*t, p, "exec_max", seconds(1), seconds(86400), &out->exec_max);
  r.Duration(*t, p, "session_idle", seconds(1), seconds(30 * 86400), &out->session_idle);
  r.Duration(*t, p, "session_max", seconds(1), seconds(30 * 86400), &out->session_max);
  r.Duration(*t, p, "workspace_retention", seconds(3600), seconds(3650 * 86400),
             &out->workspace_retention);
  if (!r.failed() && out->exec_default > out->exec_max) {
    r.Fail(t->get("exec_default") ? t->get("exec_default")->source() : t->source(),
           "time.exec_default",
           "is longer than time.exec_max (" + FormatDuration(out->exec_default) + " > " +
               FormatDuration(out->exec_max) + ")");
  }
  if (!r.failed() && out->session_idle > out->session_max) {
    r.Fail(t->get("session_idle") ? t->get("session_idle")->source() : t->source(),
           "time.session_idle", "is longer than time.session_max");
  }
  ReadPauseIdle(r, *t, out);
}

}  // namespace mcpcell::policies
