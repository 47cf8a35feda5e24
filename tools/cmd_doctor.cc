// `mcpcell doctor`: what this host supports for cells and what follows from it.
//
// Runs the probes of sandbox/linux/host_probe.h (each tries the real operation in a
// short-lived child) and prints one block per probe: verdict, what was found, and what the
// server will do about it. Exit status 0 when cells can be created here (possibly with
// degraded guarantees, which are listed), 1 when they cannot. --json prints the same report
// as one JSON object for scripts and CI.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "sandbox/linux/host_probe.h"
#include "tools/command.h"

namespace mcpcell::tools {
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

std::string ReportJson(const sandbox::HostReport& report) {
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
  return out + "]}\n";
}

int RunDoctor(bool json) {
  const sandbox::HostReport report = sandbox::ProbeHost();
  const std::string text = json ? ReportJson(report) : sandbox::FormatHostReport(report);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return report.cells_possible ? 0 : 1;
}

const bool kRegistered = RegisterCommand("doctor", [](CLI::App& parent, int* exit_code) {
  auto json = std::make_shared<bool>(false);
  CLI::App* sub = parent.add_subcommand(
      "doctor",
      "Report what this host supports for cells (namespaces, overlayfs, cgroups, "
      "seccomp, openat2) and what follows from it");
  sub->add_flag("--json", *json, "Print the report as JSON");
  sub->callback([json, exit_code] { *exit_code = RunDoctor(*json); });
});

}  // namespace
}  // namespace mcpcell::tools
