// `mcpcell doctor`: what this host supports for cells and what follows from it.
//
// Runs the probes of sandbox/linux/host_probe.h (each tries the real operation in a
// short-lived child) and prints one block per probe: verdict, what was found, and what the
// server will do about it. Exit status 0 when cells can be created here (possibly with
// degraded guarantees, which are listed), 1 when they cannot. --json prints the same report
// as one JSON object for scripts and CI. --state-dir DIR (default: the servers' default)
// also checks that DIR would serve cells: its filesystem takes their device nodes, and a
// root server's cells can search every directory above it (serve, run and pool refuse a
// state dir they cannot; then cells are not possible there and the status is 1). Then the
// host limits on the number of live cells (base/host_limits.h) and the count they allow,
// naming the binding one; they do not change the exit status.
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include "base/host_limits.h"
#include "cli/command.h"
#include "sandbox/linux/host_probe.h"
#include "sandbox/state_dir.h"

namespace mcpcell::cli {
namespace {

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string CapacityJson(const HostCapacity& c) {
  std::string out = "{\"cells\":" + (c.cells ? std::to_string(*c.cells) : "null") +
                    ",\"binding\":\"" + JsonEscape(c.binding) + "\",\"limits\":[";
  for (size_t i = 0; i < c.limits.size(); ++i) {
    const HostLimit& l = c.limits[i];
    out += std::string(i > 0 ? "," : "") + "{\"name\":\"" + JsonEscape(l.name) +
           "\",\"detail\":\"" + JsonEscape(l.detail) +
           "\",\"cells\":" + (l.cells ? std::to_string(*l.cells) : "null") + "}";
  }
  out += "],\"inotify\":\"" + JsonEscape(c.inotify) + "\",\"unreadable\":[";
  for (size_t i = 0; i < c.unreadable.size(); ++i) {
    out += std::string(i > 0 ? "," : "") + "\"" + JsonEscape(c.unreadable[i]) + "\"";
  }
  return out + "]}";
}

std::string ReportJson(const sandbox::HostReport& report, const HostCapacity& capacity) {
  std::string out = "{\"root\":" + std::string(report.root ? "true" : "false") +
                    ",\"cells_possible\":" + (report.cells_possible ? "true" : "false") +
                    ",\"probes\":[";
  for (size_t i = 0; i < report.probes.size(); ++i) {
    const sandbox::ProbeResult& p = report.probes[i];
    if (i > 0) out += ",";
    out += "{\"name\":\"" + JsonEscape(p.name) + "\",\"verdict\":\"" +
           sandbox::ProbeVerdictName(p.verdict) + "\",\"detail\":\"" + JsonEscape(p.detail) +
           "\",\"consequence\":\"" + JsonEscape(p.consequence) + "\"}";
  }
  return out + "],\"capacity\":" + CapacityJson(capacity) + "}\n";
}

// The nearest existing directory strictly above `state_dir`: the server makes the state
// dir itself and gives it o+x, but never changes the directories above it.
std::string ExistingParent(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  struct stat st;
  do {
    const size_t slash = dir.rfind('/');
    if (slash == std::string::npos) return ".";
    dir = slash == 0 ? "/" : dir.substr(0, slash);
  } while (dir != "/" && (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)));
  return dir;
}

// What serve, run and pool check at start (sandbox::CheckCellsCanReachStateDir).
sandbox::ProbeResult ProbeStateDirReach(const std::string& state_dir) {
  sandbox::ProbeResult r{"state dir", sandbox::ProbeVerdict::kOk, "", ""};
  if (!sandbox::CellsRunAsOtherUids()) {
    r.detail = state_dir + ": cells run as this user's own uid";
    r.consequence = "cells reach the state dir wherever this user can";
    return r;
  }
  Status reach = sandbox::CheckSearchableByOthers(ExistingParent(state_dir));
  if (reach) {
    r.detail = state_dir + ": every directory above it lets others search it";
    r.consequence = "cells (host uids of their own) reach their scratch, template and workspace";
    return r;
  }
  r.verdict = sandbox::ProbeVerdict::kMissing;
  r.detail = "state dir " + state_dir + ": " + reach.error().message;
  r.consequence =
      "serve, run and pool refuse this state dir at start (every cell would fail mounting its "
      "scratch there with EACCES)";
  return r;
}

// Whether the state dir (or, before it exists, the directory it will be made in) is on a
// tmpfs: on a disk filesystem every cell's directories and files wait for the disk.
sandbox::ProbeResult ProbeStateDirFilesystem(const std::string& state_dir) {
  struct stat st;
  const std::string dir =
      ::stat(state_dir.c_str(), &st) == 0 ? state_dir : ExistingParent(state_dir);
  std::string note = sandbox::StateDirFilesystemNote(dir);
  if (dir != state_dir && !note.empty()) {  // named after the dir it will be made in
    note.replace(0, ("state dir " + dir).size(),
                 "state dir " + state_dir + " (to be made in " + dir + ")");
  }
  if (note.empty()) {
    return {"state dir filesystem", sandbox::ProbeVerdict::kOk, dir + " is on a tmpfs",
            "cells are made and removed without waiting for a disk"};
  }
  return {"state dir filesystem", sandbox::ProbeVerdict::kDegraded, note,
          "cells work; making and removing them waits for the disk"};
}

int RunDoctor(bool json, const std::string& state_dir) {
  sandbox::HostReport report = sandbox::ProbeHost(state_dir);
  report.probes.push_back(ProbeStateDirReach(state_dir));
  const bool reachable = report.probes.back().verdict == sandbox::ProbeVerdict::kOk;
  report.probes.push_back(ProbeStateDirFilesystem(state_dir));
  if (!reachable) report.cells_possible = false;
  const HostCapacity capacity = AssessHostCapacity(RealTextSource());
  const std::string text =
      json ? ReportJson(report, capacity)
           : sandbox::FormatHostReport(report) + "\n" + FormatHostCapacity(capacity);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return report.cells_possible ? 0 : 1;
}

const bool kRegistered = RegisterCommand("doctor", [](CLI::App& parent, int* exit_code) {
  auto json = std::make_shared<bool>(false);
  auto state_dir = std::make_shared<std::string>(sandbox::DefaultStateDir());
  CLI::App* sub = parent.add_subcommand(
      "doctor",
      "Report what this host supports for cells (namespaces, overlayfs, cgroups, "
      "seccomp, openat2, the state dir) and what follows from it");
  sub->add_flag("--json", *json, "Print the report as JSON");
  sub->add_option("--state-dir", *state_dir,
                  "The state dir to check (device nodes, reachable by the cells)")
      ->capture_default_str();
  sub->callback([json, state_dir, exit_code] { *exit_code = RunDoctor(*json, *state_dir); });
});

}  // namespace
}  // namespace mcpcell::cli
