#include "serve/health.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>

#include "mcp/log.h"

namespace mcpcell::serve {
namespace {

mcp::HttpRouteResponse Plain(int status, std::string body) {
  mcp::HttpRouteResponse out;
  out.status = status;
  out.content_type = "text/plain; charset=utf-8";
  out.body = std::move(body);
  return out;
}

// A route answering GET `path` only.
mcp::HttpRoute GetOnly(const std::string& path, std::function<mcp::HttpRouteResponse()> answer) {
  return {path, [path, respond = std::move(answer)](const mcp::HttpRouteRequest& in) {
            if (in.path != path) return Plain(404, "Not Found\n");
            if (in.method != "GET" && in.method != "HEAD") {
              return Plain(405, "Method Not Allowed: " + path + " takes GET\n");
            }
            return respond();
          }};
}

}  // namespace

Readiness::Readiness(std::vector<ReadinessCheck> checks, std::chrono::milliseconds max_age,
                     Clock clock)
    : checks_(std::move(checks)),
      max_age_(max_age),
      clock_(clock ? std::move(clock) : Clock([] { return std::chrono::steady_clock::now(); })) {}

ReadinessReport Readiness::Check() {
  std::lock_guard lock(mu_);
  const auto now = clock_();
  if (have_ && now - checked_at_ < max_age_) return last_;
  ReadinessReport report;
  std::string reasons;
  for (const ReadinessCheck& check : checks_) {
    if (Status st = check.run(); !st) {
      report.failing.push_back(check.name);
      reasons += (reasons.empty() ? "" : "; ") + check.name + ": " + st.error().message;
    }
  }
  report.ready = report.failing.empty();
  if (!have_ || report.ready != last_.ready || report.failing != last_.failing) {
    if (report.ready) {
      mcp::log::Info("readyz: ready");
    } else {
      mcp::log::Warn("readyz: not ready: " + reasons);
    }
  }
  have_ = true;
  checked_at_ = now;
  last_ = report;
  return report;
}

Status DirWritable(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
  if (fd >= 0) {
    ::close(fd);
    return Ok();
  }
  // Filesystems without O_TMPFILE: a named probe, removed at once.
  if (errno != EOPNOTSUPP && errno != EISDIR) {
    return Error::Sys("open(\"" + dir + "\", O_TMPFILE|O_WRONLY)");
  }
  const std::string probe = dir + "/.mcpcell-ready-probe." + std::to_string(::getpid());
  fd = ::open(probe.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) return Error::Sys("open(\"" + probe + "\", O_CREAT|O_EXCL|O_WRONLY)");
  ::close(fd);
  ::unlink(probe.c_str());
  return Ok();
}

std::vector<mcp::HttpRoute> HealthRoutes(std::shared_ptr<Readiness> readiness) {
  std::vector<mcp::HttpRoute> routes;
  routes.push_back(GetOnly("/healthz", [] { return Plain(200, "ok\n"); }));
  routes.push_back(GetOnly("/readyz", [readiness] {
    ReadinessReport report = readiness->Check();
    if (report.ready) return Plain(200, "ready\n");
    mcp::HttpRouteResponse out;
    out.status = 503;
    out.body = nlohmann::json{{"status", "not ready"}, {"failing", report.failing}}.dump() + "\n";
    return out;
  }));
  return routes;
}

}  // namespace mcpcell::serve
