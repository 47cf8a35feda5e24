// upload_archive's `url` (archive_url.h): the URL check, the in-cell fetcher and the
// reading of what it reports.
#include "tools/archive_url.h"

#include <algorithm>
#include <cstdio>

namespace mcpcell::tools {
namespace {

// Held in server memory between the fetch and the extraction (the fetcher's stdout, then
// the helper's stdin): the bound on what one call may hold, whatever the policy allows.
constexpr uint64_t kMaxHeldArchiveBytes = 256ull << 20;

// Exit statuses of the fetcher, each with one stderr line saying more.
constexpr int kExitHttpStatus = 3;   // the server (or the proxy) answered with an error
constexpr int kExitTooLarge = 4;     // Content-Length or the body passed the cap
constexpr int kExitNetwork = 5;      // no answer: refused tunnel, DNS, connect, TLS, timeout
constexpr int kExitNoProgram = 127;  // the shell's "not found": no python3 in the cell

// Standard library only. The egress proxy's refusal is a 403 whose reason line (and
// X-Mcpcell-Reason header) is "mcpcell: egress to HOST:PORT denied: ..."; for https it
// arrives as urllib's "Tunnel connection failed: 403 mcpcell: ...".
constexpr const char* kFetcher = R"PY(import sys, urllib.request, urllib.error
url, cap = sys.argv[1], int(sys.argv[2])
def fail(code, line):
    sys.stderr.write(line.replace("\n", " ")[:2000] + "\n")
    sys.exit(code)
try:
    req = urllib.request.Request(url, headers={"User-Agent": "mcpcell-upload-archive"})
    with urllib.request.urlopen(req, timeout=60) as r:
        declared = r.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > cap:
            fail(4, "Content-Length " + declared)
        out, n = sys.stdout.buffer, 0
        while True:
            chunk = r.read(1 << 16)
            if not chunk:
                break
            n += len(chunk)
            if n > cap:
                fail(4, "body passed the cap after " + str(n) + " bytes")
            out.write(chunk)
        out.flush()
except urllib.error.HTTPError as e:
    fail(3, str(e.code) + " " + (e.headers.get("X-Mcpcell-Reason") or str(e.reason)))
except (urllib.error.URLError, OSError, ValueError) as e:
    fail(5, str(getattr(e, "reason", e)))
)PY";

std::string Bytes(uint64_t n) {
  if (n < (1 << 20)) return std::to_string(n) + " bytes";
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(n) / (1 << 20));
  return text;
}

// The fetcher's one stderr line (its last non-empty line; python's own traceback when it
// crashed).
std::string LastLine(const std::string& text) {
  size_t end = text.find_last_not_of("\n ");
  if (end == std::string::npos) return "";
  size_t start = text.rfind('\n', end);
  return text.substr(
      start == std::string::npos ? 0 : start + 1,
      std::min<size_t>(end + 1 - (start == std::string::npos ? 0 : start + 1), 2000));
}

bool IsDenial(const std::string& line) {
  return line.find("mcpcell: egress to ") != std::string::npos;
}

std::string WithRefusals(std::string text, const std::vector<std::string>& refusals,
                         const std::string& line) {
  for (const std::string& r : refusals)
    if (line.find(r) == std::string::npos) text += "\n  " + r;
  return text;
}

}  // namespace

Status CheckArchiveUrl(const std::string& url) {
  auto bad = [&](const std::string& why) {
    return Error::Msg("arguments.url: " + why +
                      "; give an http:// or https:// URL of a host the policy's network.allow "
                      "names");
  };
  if (url.size() > 4096) return bad("longer than 4096 bytes");
  for (unsigned char c : url)
    if (c <= 0x20 || c == 0x7f) return bad("contains a space or control character");
  std::string rest;
  if (url.rfind("http://", 0) == 0) {
    rest = url.substr(7);
  } else if (url.rfind("https://", 0) == 0) {
    rest = url.substr(8);
  } else {
    return bad("\"" + url.substr(0, 64) + "\" is not an http:// or https:// URL");
  }
  const std::string authority = rest.substr(0, rest.find_first_of("/?#"));
  if (authority.find('@') != std::string::npos)
    return bad("credentials (user:password@) are not accepted in the URL");
  const size_t colon = authority.rfind(':');
  const bool bracketed = !authority.empty() && authority.front() == '[';
  const std::string host = colon != std::string::npos && (!bracketed || authority[colon - 1] == ']')
                               ? authority.substr(0, colon)
                               : authority;
  if (host.empty() || host == "[]") return bad("no host");
  if (colon != std::string::npos && host.size() != authority.size()) {
    const std::string port = authority.substr(colon + 1);
    if (port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        std::stoi(port) == 0 || std::stoi(port) > 65535)
      return bad("port \"" + port + "\" is not a number from 1 to 65535");
  }
  return Ok();
}

uint64_t ArchiveUrlCap(uint64_t policy_archive_bytes) {
  return std::min(policy_archive_bytes, kMaxHeldArchiveBytes);
}

std::vector<std::string> ArchiveFetchArgv(const std::string& url, uint64_t cap) {
  // -I: no PYTHON* variables, no user site, no script directory on sys.path (the cell's
  // files cannot replace the standard library the fetcher imports).
  return {"python3", "-I", "-c", kFetcher, url, std::to_string(cap)};
}

Result<std::string> ArchiveFetchOutcome(const sandbox::ExecResult& exec, const std::string& url,
                                        uint64_t cap, const std::vector<std::string>& refusals) {
  const std::string line = LastLine(exec.err.data);
  const std::string what = "fetching " + url;
  if (exec.exit_code == 0) {
    if (exec.out.truncated() || exec.out.total > cap)
      return Error::Msg(what + ": the body passed the " + Bytes(cap) + " cap for archives");
    if (exec.out.data.empty()) return Error::Msg(what + ": the server sent an empty body");
    return exec.out.data;
  }
  switch (exec.exit_code) {
    case kExitTooLarge:
      return Error::Msg(what + ": the archive is over the " + Bytes(cap) +
                        " cap for archives (limits.archive_bytes, at most " +
                        Bytes(kMaxHeldArchiveBytes) + " per call) (" + line +
                        "); fetch a smaller archive or split it");
    case kExitHttpStatus:
    case kExitNetwork:
      if (IsDenial(line) || !refusals.empty()) {
        return Error::Msg(
            WithRefusals(what + ": refused by the egress policy: " + line, refusals, line) +
            "\nOnly hosts the policy's network.allow names can be fetched.");
      }
      return Error::Msg(
          what +
          (exec.exit_code == kExitHttpStatus ? ": the server answered HTTP " : ": no answer: ") +
          line);
    case kExitNoProgram:
      return Error::Msg(what +
                        ": the fetch runs python3 in the sandbox, and its image has none; "
                        "send the archive base64 in arguments.data instead");
    default:
      return Error::Msg(what + ": the fetcher exited with status " +
                        std::to_string(exec.exit_code) + (line.empty() ? "" : ": " + line));
  }
}

}  // namespace mcpcell::tools
