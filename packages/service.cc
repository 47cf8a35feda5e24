// The package service (see service.h): routing, the caller's policy, audit and refusals.
// The work per registry is one level down: pypi_index / wheelhouse (pip), npm_index (npm),
// artifact_cache (the store), upstream (HTTP(S) to the registries).
#include "packages/service.h"

#include <fcntl.h>
#include <httplib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "packages/artifact_cache.h"
#include "packages/npm_directory.h"
#include "packages/npm_index.h"
#include "packages/pypi_index.h"
#include "packages/rules.h"
#include "packages/upstream.h"
#include "packages/wheelhouse.h"

namespace mcpcell::packages {

namespace {

constexpr uint64_t kMaxPypiPageBytes = 16ull << 20;
constexpr uint64_t kMaxPackumentBytes = 64ull << 20;
constexpr auto kPageTtl = std::chrono::seconds(60);
constexpr size_t kMaxCachedPages = 256;
constexpr size_t kMaxKnownArtifacts = 200000;

// Who asked: set by the egress proxy's internal route, so trustworthy.
struct Caller {
  std::string session, tenant;
  const PackagesConfig* policy = nullptr;
};

// An artifact a page listed: where it comes from and what it is.
struct KnownArtifact {
  Registry registry = Registry::kPypi;
  std::string name, version, filename, url;
  DigestAlgo algo = DigestAlgo::kSha256;
  std::string hex;
  bool sdist = false;
};

bool IsHeaderValue(const std::string& v) {
  if (v.empty() || v.size() > 256) return false;
  for (char c : v) {
    if (static_cast<unsigned char>(c) < 0x21 || c == 0x7f) return false;
  }
  return true;
}

}  // namespace

class PackageService::Impl {
 public:
  explicit Impl(ServiceOptions options)
      : options_(std::move(options)), upstream_(UpstreamClient::Options{options_.ca_file}) {}

  Result<uint16_t> Start();
  void Stop() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  uint16_t port() const { return port_; }
  CacheStats Stats() const {
    auto c = cache_->counters();
    return CacheStats{c.bytes, c.artifacts, c.hits, c.misses, c.fetches};
  }

 private:
  // One request's steps, each answering the request itself when it refuses.
  std::optional<Caller> Admit(const httplib::Request& req, httplib::Response& res, Registry r);
  void PypiPage(const Caller& c, const std::string& project, httplib::Response& res);
  void PypiFile(const Caller& c, const std::string& sha, const std::string& filename,
                httplib::Response& res);
  void NpmPackument(const Caller& c, const std::string& name, httplib::Response& res);
  void NpmTarballFile(const Caller& c, DigestAlgo algo, const std::string& hex,
                      const std::string& filename, httplib::Response& res);
  // An artifact from the cache or, on a miss, from upstream; answers the request.
  void ServeCached(const Caller& c, const KnownArtifact& a, httplib::Response& res);

  Result<std::string> UpstreamPage(const std::string& url, const std::string& accept,
                                   uint64_t max_bytes, int* status);
  void Remember(const KnownArtifact& a);
  std::optional<KnownArtifact> Known(DigestAlgo algo, const std::string& hex);

  void Refuse(const Caller& c, httplib::Response& res, int status, Registry r,
              const std::string& name, const std::string& version, const std::string& result,
              const std::string& reason);
  void Audit(const Caller& c, Registry r, const std::string& name, const std::string& version,
             const std::string& filename, const std::string& digest, const std::string& source,
             const std::string& result, const std::string& reason);
  // Lines go into tool results: bytes an upstream chose (file names, URLs) are shown as
  // printable ASCII only.
  void Tell(const Caller& c, const std::string& line) {
    if (!options_.on_refusal || c.session.empty()) return;
    std::string shown = line.substr(0, 2000);
    for (char& ch : shown) {
      if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) >= 0x7f) ch = '?';
    }
    options_.on_refusal(c.session, shown);
  }
  static void ServeFile(const std::string& path, httplib::Response& res, const char* mime);

  ServiceOptions options_;
  UpstreamClient upstream_;
  std::unique_ptr<ArtifactCache> cache_;
  Wheelhouse wheelhouse_;
  NpmDirectory npm_directory_;
  httplib::Server server_;
  std::thread thread_;
  uint16_t port_ = 0;
  std::atomic<int> fetches_{0};
  // Artifact downloads at once: half the workers, so pages and cache hits always find one.
  int max_fetches_ = 1;

  std::mutex mu_;                               // guards the maps below
  std::map<std::string, KnownArtifact> known_;  // "<algo>/<hex>" -> artifact
  std::deque<std::string> known_order_;
  struct CachedPage {
    std::chrono::steady_clock::time_point at;
    std::string body;
  };
  std::map<std::string, CachedPage> pages_;  // upstream URL -> body
};

Result<uint16_t> PackageService::Impl::Start() {
  auto cache = ArtifactCache::Open(options_.cache_dir, options_.cache_max_bytes);
  if (!cache) return cache.error().Wrap("package service");
  cache_ = std::move(cache.value());
  if (!options_.policy_for_tenant) return Error::Msg("package service: no policy_for_tenant");

  int threads = std::max(1, options_.threads);
  max_fetches_ = std::max(1, threads / 2);
  server_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_.set_read_timeout(std::chrono::seconds(30));
  server_.set_write_timeout(std::chrono::seconds(120));
  server_.set_payload_max_length(0);  // GET only: no request body is read
  server_.set_keep_alive_max_count(100);

  server_.Get(R"(/pypi/simple/([^/]*)/?)",
              [this](const httplib::Request& req, httplib::Response& res) {
                if (auto c = Admit(req, res, Registry::kPypi)) PypiPage(*c, req.matches[1], res);
              });
  server_.Get(R"(/pypi/files/([^/]*)/([^/]*))",
              [this](const httplib::Request& req, httplib::Response& res) {
                if (auto c = Admit(req, res, Registry::kPypi))
                  PypiFile(*c, req.matches[1], req.matches[2], res);
              });
  server_.Get(R"(/npm/-/files/(sha512|sha1)-([^/]*)/([^/]*))",
              [this](const httplib::Request& req, httplib::Response& res) {
                if (auto c = Admit(req, res, Registry::kNpm))
                  NpmTarballFile(*c, *DigestFromName(req.matches[1].str()), req.matches[2],
                                 req.matches[3], res);
              });
  server_.Get(R"(/npm/(-/.*))", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Admit(req, res, Registry::kNpm)) return;
    res.status = 404;
    res.set_content("this registry serves packuments and tarballs only (" + req.matches[1].str() +
                        " is not served; npm needs --no-audit)\n",
                    "text/plain");
  });
  server_.Get(R"(/npm/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    if (auto c = Admit(req, res, Registry::kNpm)) NpmPackument(*c, req.matches[1], res);
  });
  // Answers httplib makes itself (no route, unparsable request) still say what was wrong.
  server_.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string why;
    if (req.method != "GET" && req.method != "HEAD" && !req.method.empty()) {
      res.status = 405;
      why = "method " + req.method.substr(0, 16) + " is not served (GET only)";
    } else if (res.status == 404) {
      why = "unknown path \"" + req.path.substr(0, 200) +
            "\" (served: /pypi/simple/<project>/, /npm/<name>)";
    } else {
      why = "bad request: a malformed or oversized request line or headers (HTTP " +
            std::to_string(res.status) + ")";
    }
    res.set_content(why + "\n", "text/plain");
  });
  int port = server_.bind_to_any_port("127.0.0.1");
  if (port <= 0) return Error::Msg("package service: cannot bind 127.0.0.1");
  port_ = static_cast<uint16_t>(port);
  thread_ = std::thread([this] { server_.listen_after_bind(); });
  return port_;
}

std::optional<Caller> PackageService::Impl::Admit(const httplib::Request& req,
                                                  httplib::Response& res, Registry r) {
  Caller c;
  c.session = req.get_header_value(kSessionHeader);
  c.tenant = req.get_header_value(kTenantHeader);
  // An empty tenant (the server's own policy) may arrive as no header at all: HTTP parsers
  // drop empty values. The proxy always sets both and strips any copy a cell sent.
  if (!IsHeaderValue(c.session) || (!c.tenant.empty() && !IsHeaderValue(c.tenant))) {
    res.status = 400;
    res.set_content(std::string("missing or malformed ") + kSessionHeader + "/" + kTenantHeader +
                        ": the package service answers cells through the egress proxy only\n",
                    "text/plain");
    return std::nullopt;
  }
  c.policy = options_.policy_for_tenant(c.tenant);
  if (!c.policy) {
    Refuse(c, res, 403, r, "", "", "refused", "unknown tenant \"" + c.tenant + "\"");
    return std::nullopt;
  }
  if (auto why = CheckRegistryEnabled(*c.policy, r)) {
    Refuse(c, res, 403, r, "", "", "refused", *why);
    return std::nullopt;
  }
  return c;
}

void PackageService::Impl::PypiPage(const Caller& c, const std::string& project,
                                    httplib::Response& res) {
  if (std::string why = CheckPypiName(project); !why.empty()) {
    res.status = 400;
    res.set_content("bad project name \"" + project.substr(0, 200) + "\": " + why + "\n",
                    "text/plain");
    return;
  }
  const std::string name = NormalizePypiName(project);
  Requirement any{Registry::kPypi, name, "", name, {}};
  if (auto why = CheckRequirement(*c.policy, any)) {
    Refuse(c, res, 403, Registry::kPypi, name, "", "refused", *why);
    return;
  }
  const PackagesConfig& p = *c.policy;
  bool offline = p.mode == PackagesMode::kOffline;
  Result<std::vector<IndexFile>> files = std::vector<IndexFile>{};
  std::string upstream_url = p.pypi_index + name + "/";
  if (offline) {
    files = wheelhouse_.FilesOf(p.wheelhouse, name);
  } else {
    int status = 0;
    auto page = UpstreamPage(upstream_url, "text/html", kMaxPypiPageBytes, &status);
    if (!page && status == 404) {
      Refuse(c, res, 404, Registry::kPypi, name, "", "refused",
             "no project \"" + name + "\" on " + p.pypi_index);
      return;
    }
    files =
        page ? ParseSimplePage(*page, upstream_url) : Result<std::vector<IndexFile>>(page.error());
    if (!files && page) files = files.error().Wrap("upstream page " + upstream_url);
  }
  if (!files) {
    Refuse(c, res, 502, Registry::kPypi, name, "", "upstream_error", files.error().message);
    return;
  }
  std::vector<IndexFile> kept;
  std::set<std::string> reasons;
  size_t sdists_refused = 0, considered = 0;
  for (IndexFile& f : *files) {
    auto dist = ParseDistFilename(f.filename, name);
    if (!dist) continue;  // not a distribution of this project (or a name we cannot judge)
    ++considered;
    if (f.sha256.empty()) {
      reasons.insert(f.filename + " has no sha256 on the index page, so it cannot be verified");
    } else if (!dist->wheel && !p.allow_sdist) {
      ++sdists_refused;
      reasons.insert(f.filename + " is an sdist and packages.allow_sdist is false");
    } else if (auto why = CheckVersion(p, Registry::kPypi, name, dist->version)) {
      reasons.insert(*why);
    } else {
      Remember(KnownArtifact{Registry::kPypi, name, dist->version, f.filename, offline ? "" : f.url,
                             DigestAlgo::kSha256, f.sha256, !dist->wheel});
      kept.push_back(f);
    }
  }
  if (kept.empty()) {
    std::string why;
    if (considered == 0) {
      why = "\"" + name + "\": " + (offline ? "the wheelhouse has" : "the index lists") +
            " no files of it";
    } else if (sdists_refused == considered) {
      why = "\"" + name + "\": only an sdist exists and packages.allow_sdist is false";
    } else {
      why = "\"" + name + "\": no file may be served: ";
      int n = 0;
      for (const auto& r : reasons) {
        if (n++ == 3) break;
        why += (n > 1 ? "; " : "") + r;
      }
    }
    Audit(c, Registry::kPypi, name, "", "", "", offline ? "wheelhouse" : "upstream " + upstream_url,
          "refused", why);
    Tell(c, "package refused: " + why);
  }
  res.set_content(RenderSimplePage(name, kept), "text/html; charset=utf-8");
}

void PackageService::Impl::PypiFile(const Caller& c, const std::string& sha,
                                    const std::string& filename, httplib::Response& res) {
  if (!IsLowerHex(sha, 64) || !IsSafeFilename(filename)) {
    res.status = 400;
    res.set_content("bad file path: expected /pypi/files/<sha256 hex>/<file name>\n", "text/plain");
    return;
  }
  const PackagesConfig& p = *c.policy;
  auto a = Known(DigestAlgo::kSha256, sha);
  if (!a || a->filename != filename || a->registry != Registry::kPypi) {
    Refuse(c, res, 404, Registry::kPypi, "", "", "refused",
           "unknown artifact " + filename + " (fetch its project page first)");
    return;
  }
  if (a->sdist && !p.allow_sdist) {
    Refuse(c, res, 403, Registry::kPypi, a->name, a->version, "refused",
           filename + " is an sdist and packages.allow_sdist is false");
    return;
  }
  if (auto why = CheckVersion(p, Registry::kPypi, a->name, a->version)) {
    Refuse(c, res, 403, Registry::kPypi, a->name, a->version, "refused", *why);
    return;
  }
  if (p.mode == PackagesMode::kOffline) {
    auto path = wheelhouse_.Find(p.wheelhouse, sha, filename);
    if (!path) {
      Refuse(c, res, 404, Registry::kPypi, a->name, a->version, "refused",
             filename + " is not (or no longer) in the wheelhouse " + p.wheelhouse);
      return;
    }
    Audit(c, Registry::kPypi, a->name, a->version, filename, "sha256:" + sha, "wheelhouse",
          "served", "");
    ServeFile(*path, res, "application/octet-stream");
    return;
  }
  if (a->url.empty()) {
    Refuse(c, res, 404, Registry::kPypi, a->name, a->version, "refused",
           filename + " was listed from a wheelhouse; this policy is online");
    return;
  }
  ServeCached(c, *a, res);
}

void PackageService::Impl::NpmPackument(const Caller& c, const std::string& name,
                                        httplib::Response& res) {
  if (std::string why = CheckNpmName(name); !why.empty()) {
    res.status = 400;
    res.set_content(why + "\n", "text/plain");
    return;
  }
  Requirement any{Registry::kNpm, name, "", name, {}};
  if (auto why = CheckRequirement(*c.policy, any)) {
    Refuse(c, res, 403, Registry::kNpm, name, "", "refused", *why);
    return;
  }
  const PackagesConfig& p = *c.policy;
  bool offline = p.mode == PackagesMode::kOffline;
  std::string encoded = name;
  if (name[0] == '@') encoded.replace(encoded.find('/'), 1, "%2f");
  std::string url = offline ? p.npm_offline_dir : p.npm_registry + encoded;
  Result<FilteredPackument> filtered = Error::Msg("");
  if (offline) {
    auto doc = npm_directory_.Packument(p.npm_offline_dir, name);
    if (!doc) {
      Refuse(c, res, 404, Registry::kNpm, name, "", "refused", doc.error().message);
      return;
    }
    filtered = FilterPackument(doc->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                               name, p, kNpmRegistryUrl);
  } else {
    int status = 0;
    auto body = UpstreamPage(
        url, "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8, */*",
        kMaxPackumentBytes, &status);
    if (!body && status == 404) {
      Refuse(c, res, 404, Registry::kNpm, name, "", "refused",
             "no package \"" + name + "\" on " + p.npm_registry);
      return;
    }
    filtered = body ? FilterPackument(*body, name, p, kNpmRegistryUrl)
                    : Result<FilteredPackument>(body.error());
  }
  if (!filtered) {
    Refuse(c, res, 502, Registry::kNpm, name, "", "upstream_error",
           filtered.error().message + " (" + url + ")");
    return;
  }
  for (const NpmTarball& t : filtered->tarballs) {
    Remember(
        KnownArtifact{Registry::kNpm, t.name, t.version, t.filename, t.url, t.algo, t.hex, false});
  }
  if (filtered->tarballs.empty()) {
    std::string why = "\"" + name + "\": no version may be served";
    for (size_t i = 0; i < filtered->refusals.size() && i < 3; ++i)
      why += (i ? "; " : ": ") + filtered->refusals[i];
    Audit(c, Registry::kNpm, name, "", "", "", offline ? "npm_offline_dir" : "upstream " + url,
          "refused", why);
    Tell(c, "package refused: " + why);
  }
  res.set_content(filtered->doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "application/json");
}

void PackageService::Impl::NpmTarballFile(const Caller& c, DigestAlgo algo, const std::string& hex,
                                          const std::string& filename, httplib::Response& res) {
  if (!IsLowerHex(hex, DigestHexLength(algo)) || !IsSafeFilename(filename)) {
    res.status = 400;
    res.set_content("bad tarball path: expected /npm/-/files/<algo>-<hex>/<file>.tgz\n",
                    "text/plain");
    return;
  }
  auto a = Known(algo, hex);
  if (!a || a->filename != filename || a->registry != Registry::kNpm) {
    Refuse(c, res, 404, Registry::kNpm, "", "", "refused",
           "unknown tarball " + filename + " (fetch its packument first)");
    return;
  }
  if (auto why = CheckVersion(*c.policy, Registry::kNpm, a->name, a->version)) {
    Refuse(c, res, 403, Registry::kNpm, a->name, a->version, "refused", *why);
    return;
  }
  const PackagesConfig& p = *c.policy;
  bool from_directory = a->url.rfind("file://", 0) == 0;
  if (p.mode == PackagesMode::kOffline) {
    auto path = algo == DigestAlgo::kSha512 && from_directory
                    ? npm_directory_.Find(p.npm_offline_dir, hex, filename)
                    : std::nullopt;
    if (!path) {
      Refuse(c, res, 404, Registry::kNpm, a->name, a->version, "refused",
             filename + " is not (or no longer) in the npm_offline_dir " + p.npm_offline_dir);
      return;
    }
    Audit(c, Registry::kNpm, a->name, a->version, filename, "sha512:" + hex, "npm_offline_dir",
          "served", "");
    ServeFile(*path, res, "application/octet-stream");
    return;
  }
  if (from_directory) {
    Refuse(c, res, 404, Registry::kNpm, a->name, a->version, "refused",
           filename + " was listed from an npm_offline_dir; this policy is online");
    return;
  }
  ServeCached(c, *a, res);
}

void PackageService::Impl::ServeCached(const Caller& c, const KnownArtifact& a,
                                       httplib::Response& res) {
  std::string digest = std::string(DigestName(a.algo)) + ":" + a.hex;
  bool hit = false;
  auto path = cache_->Get(
      a.algo, a.hex, c.policy->max_artifact_bytes,
      [&](const ArtifactCache::Sink& sink) -> Status {
        // Bounded upstream concurrency: beyond it the installer gets a 503 and retries
        // (pip and npm both retry a 503).
        if (fetches_.fetch_add(1) >= max_fetches_) {
          fetches_.fetch_sub(1);
          return Error{"too many artifact downloads at once; retry", EBUSY};
        }
        auto st = upstream_.GetStream(a.url, sink);
        fetches_.fetch_sub(1);
        return st;
      },
      &hit);
  if (!path) {
    bool mismatch = path.error().err == kHashMismatch;
    Refuse(c, res, path.error().err == EBUSY ? 503 : 502, a.registry, a.name, a.version,
           mismatch ? "hash_mismatch" : "upstream_error", a.filename + ": " + path.error().message);
    return;
  }
  Audit(c, a.registry, a.name, a.version, a.filename, digest, hit ? "cache" : "upstream " + a.url,
        "served", "");
  ServeFile(path->string(), res, "application/octet-stream");
}

void PackageService::Impl::ServeFile(const std::string& path, httplib::Response& res,
                                     const char* mime) {
  // Opened now: an eviction that unlinks the file later does not cut the answer short.
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0) close(fd);
    res.status = 503;
    res.set_content("the artifact went away while being served; retry\n", "text/plain");
    return;
  }
  res.set_content_provider(
      static_cast<size_t>(st.st_size), mime,
      [fd](size_t offset, size_t length, httplib::DataSink& sink) {
        char buf[64 * 1024];
        ssize_t n = pread(fd, buf, std::min(length, sizeof(buf)), static_cast<off_t>(offset));
        if (n <= 0) return false;
        return sink.write(buf, static_cast<size_t>(n));
      },
      [fd](bool) { close(fd); });
}

Result<std::string> PackageService::Impl::UpstreamPage(const std::string& url,
                                                       const std::string& accept,
                                                       uint64_t max_bytes, int* status) {
  auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mu_);
    auto it = pages_.find(url);
    if (it != pages_.end() && now - it->second.at < kPageTtl) {
      *status = 200;
      return it->second.body;
    }
  }
  auto body = upstream_.GetText(url, max_bytes, accept, status);
  if (!body) return body;
  std::lock_guard lock(mu_);
  if (pages_.size() >= kMaxCachedPages) {
    auto oldest = pages_.begin();
    for (auto it = pages_.begin(); it != pages_.end(); ++it) {
      if (it->second.at < oldest->second.at) oldest = it;
    }
    pages_.erase(oldest);
  }
  pages_[url] = CachedPage{now, *body};
  return body;
}

void PackageService::Impl::Remember(const KnownArtifact& a) {
  std::string key = std::string(DigestName(a.algo)) + "/" + a.hex;
  std::lock_guard lock(mu_);
  if (known_.count(key)) {
    known_[key] = a;
    return;
  }
  known_[key] = a;
  known_order_.push_back(key);
  while (known_order_.size() > kMaxKnownArtifacts) {
    known_.erase(known_order_.front());
    known_order_.pop_front();
  }
}

std::optional<KnownArtifact> PackageService::Impl::Known(DigestAlgo algo, const std::string& hex) {
  std::lock_guard lock(mu_);
  auto it = known_.find(std::string(DigestName(algo)) + "/" + hex);
  if (it == known_.end()) return std::nullopt;
  return it->second;
}

void PackageService::Impl::Refuse(const Caller& c, httplib::Response& res, int status, Registry r,
                                  const std::string& name, const std::string& version,
                                  const std::string& result, const std::string& reason) {
  res.status = status;
  res.set_content(reason + "\n", "text/plain");
  Audit(c, r, name, version, "", "", "", result, reason);
  Tell(c, "package " + std::string(result == "refused" ? "refused" : "failed") + ": " + reason);
}

void PackageService::Impl::Audit(const Caller& c, Registry r, const std::string& name,
                                 const std::string& version, const std::string& filename,
                                 const std::string& digest, const std::string& source,
                                 const std::string& result, const std::string& reason) {
  if (!options_.audit) return;
  nlohmann::json e = {{"session", c.session},
                      {"tenant", c.tenant},
                      {"registry", RegistryName(r)},
                      {"package", name},
                      {"version", version},
                      {"filename", filename},
                      {"digest", digest},
                      {"source", source},
                      {"result", result},
                      {"reason", reason}};
  options_.audit(e);
}

PackageService::PackageService(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PackageService::~PackageService() { impl_->Stop(); }

Result<std::unique_ptr<PackageService>> PackageService::Start(ServiceOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  auto port = impl->Start();
  if (!port) return port.error();
  return std::unique_ptr<PackageService>(new PackageService(std::move(impl)));
}

uint16_t PackageService::port() const { return impl_->port(); }
CacheStats PackageService::Stats() const { return impl_->Stats(); }

}  // namespace mcpcell::packages
