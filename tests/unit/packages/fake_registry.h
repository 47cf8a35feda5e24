// A registry for the package service tests: a cpp-httplib server on 127.0.0.1 (plain or TLS)
// that serves PEP 503 pages (/simple/<project>/), files (/files/<name>), npm packuments
// (/npm/<name>) and tarballs (/tarballs/<name>), and counts every request per path so a
// test can prove what the service downloaded. Files can be advertised with a wrong digest
// (a tampered artifact) and answered slowly (concurrent fetch tests).
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "packages/digest.h"

namespace mcpcell::packages::testing {

inline std::string Sha256Hex(const std::string& bytes) {
  Digest d(DigestAlgo::kSha256);
  d.Update(bytes.data(), bytes.size());
  return d.FinalHex();
}

inline std::string Sha512Base64(const std::string& bytes) {
  Digest d(DigestAlgo::kSha512);
  d.Update(bytes.data(), bytes.size());
  return HexToBase64(d.FinalHex());
}

class FakeRegistry {
 public:
  // `server` may be an httplib::SSLServer; nullptr: plain HTTP.
  explicit FakeRegistry(std::unique_ptr<httplib::Server> server = nullptr)
      : server_(server ? std::move(server) : std::make_unique<httplib::Server>()) {
    server_->Get(R"(/simple/([^/]+)/)", [this](const httplib::Request& req,
                                               httplib::Response& res) {
      Count(req.path);
      std::lock_guard lock(mu_);
      auto it = projects_.find(req.matches[1]);
      if (it == projects_.end()) {
        res.status = 404;
        return;
      }
      std::string html = "<!DOCTYPE html><html><body>\n";
      for (const auto& f : it->second) {
        html +=
            "<a href=\"../../" + f.dir + "/" + f.filename + "#sha256=" + f.advertised_sha + "\"" +
            (f.requires_python.empty() ? ""
                                       : " data-requires-python=\"" + f.requires_python + "\"") +
            ">" + f.filename + "</a><br/>\n";
      }
      res.set_content(html + "</body></html>\n", "text/html");
    });
    // /moved/<name> -> /files/<name>; /moved-away/<name> -> a non-http(s) URL.
    server_->Get(R"(/moved/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
      Count(req.path);
      res.set_redirect("/files/" + req.matches[1].str());
    });
    server_->Get(R"(/moved-away/([^/]+))",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   Count(req.path);
                   res.set_redirect("ftp://127.0.0.1/" + req.matches[1].str());
                 });
    server_->Get(R"(/(files|tarballs)/([^/]+))",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   Count(req.path);
                   if (delay_ms_ > 0)
                     std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_.load()));
                   std::lock_guard lock(mu_);
                   auto it = bytes_.find(req.matches[2]);
                   if (it == bytes_.end()) {
                     res.status = 404;
                     return;
                   }
                   res.set_content(it->second, "application/octet-stream");
                 });
    server_->Get(R"(/npm/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
      Count(req.path);
      std::lock_guard lock(mu_);
      auto it = packuments_.find(req.matches[1]);
      if (it == packuments_.end()) {
        res.status = 404;
        return;
      }
      res.set_content(it->second.dump(), "application/json");
    });
    port_ = server_->bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    while (!server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeRegistry() {
    server_->stop();
    thread_.join();
  }

  // "http://127.0.0.1:PORT" (or https).
  std::string origin(bool tls = false) const {
    return std::string(tls ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_);
  }

  // A pip file; advertised_sha "" = the true digest.
  // dir: where the page's href points ("files", or "moved"/"moved-away" to redirect).
  void AddFile(const std::string& project, const std::string& filename, const std::string& bytes,
               std::string advertised_sha = "", std::string requires_python = "",
               std::string dir = "files") {
    std::lock_guard lock(mu_);
    if (advertised_sha.empty()) advertised_sha = Sha256Hex(bytes);
    projects_[project].push_back({filename, advertised_sha, requires_python, dir});
    bytes_[filename] = bytes;
  }

  // An npm version; tamper: the integrity names other bytes.
  void AddNpmVersion(const std::string& name, const std::string& version, const std::string& bytes,
                     bool tamper = false, const std::string& latest = "") {
    std::lock_guard lock(mu_);
    std::string base = name.substr(name.find('/') + 1);
    std::string file = base + "-" + version + ".tgz";
    bytes_[file] = bytes;
    nlohmann::json& doc = packuments_[name];
    doc["name"] = name;
    doc["versions"][version] = {
        {"name", name},
        {"version", version},
        {"dist",
         {{"tarball", origin(tls_) + "/tarballs/" + file},
          {"integrity", "sha512-" + Sha512Base64(tamper ? bytes + "x" : bytes)}}}};
    if (!latest.empty()) doc["dist-tags"]["latest"] = latest;
    doc["time"][version] = "2024-01-01T00:00:00.000Z";
  }

  int Hits(const std::string& path) {
    std::lock_guard lock(mu_);
    return hits_[path];
  }
  int TotalHits() {
    std::lock_guard lock(mu_);
    int n = 0;
    for (const auto& [p, h] : hits_) n += h;
    return n;
  }
  void set_delay(std::chrono::milliseconds d) { delay_ms_ = static_cast<int>(d.count()); }
  void set_tls(bool tls) { tls_ = tls; }

 private:
  struct File {
    std::string filename, advertised_sha, requires_python, dir;
  };
  void Count(const std::string& path) {
    std::lock_guard lock(mu_);
    ++hits_[path];
  }

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<bool> tls_{false};
  std::atomic<int> delay_ms_{0};
  std::mutex mu_;
  std::map<std::string, std::vector<File>> projects_;
  std::map<std::string, std::string> bytes_;
  std::map<std::string, nlohmann::json> packuments_;
  std::map<std::string, int> hits_;
};

}  // namespace mcpcell::packages::testing
