// The package service against registries served by the test on loopback: filtered pages with
// rewritten hrefs, one download for many sessions, tampered artifacts, denied and disabled
// policies, sdists, the offline wheelhouse, eviction, npm packuments, HTTPS with a test CA.
#include "packages/service.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <sstream>

#include "fake_registry.h"
#include "packages/npm_directory.h"

namespace mcpcell::packages {
namespace {

namespace fs = std::filesystem;
using testing::FakeRegistry;
using testing::Sha256Hex;

std::string MakeTempDir() {
  char tmpl[] = "/tmp/mcpcell-packages-test-XXXXXX";
  char* d = mkdtemp(tmpl);
  if (!d) throw std::runtime_error("mkdtemp failed");
  return d;
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class PackageServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    policy_.mode = PackagesMode::kOnline;
    policy_.registries = {"pypi", "npm"};
    policy_.pypi_index = upstream_.origin() + "/simple/";
    policy_.npm_registry = upstream_.origin() + "/npm/";
    policy_.allow = {"pypi:*", "npm:*"};
  }
  void TearDown() override {
    service_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void Start(uint64_t cache_max = 1ull << 30, std::string ca_file = "", int threads = 16) {
    ServiceOptions o;
    o.threads = threads;
    o.cache_dir = dir_ + "/cache";
    o.cache_max_bytes = cache_max;
    o.audit = [this](const nlohmann::json& event) {
      std::lock_guard lock(mu_);
      audit_.push_back(event);
    };
    o.ca_file = std::move(ca_file);
    o.policy_for_tenant = [this](const std::string& tenant) -> const PackagesConfig* {
      if (tenant.empty()) return &policy_;
      if (tenant == "other") return &other_policy_;
      return nullptr;
    };
    o.on_refusal = [this](const std::string& session, const std::string& line) {
      std::lock_guard lock(mu_);
      refusals_.push_back(session + ": " + line);
    };
    auto s = PackageService::Start(std::move(o));
    ASSERT_TRUE(s.ok()) << s.error().message;
    service_ = std::move(s.value());
  }

  httplib::Result Get(const std::string& path, const std::string& session = "s1",
                      const std::string& tenant = "", bool headers = true) {
    httplib::Client c("127.0.0.1", service_->port());
    c.set_read_timeout(std::chrono::seconds(30));
    httplib::Headers h;
    if (headers) h = {{kSessionHeader, session}, {kTenantHeader, tenant}};
    return c.Get(path, h);
  }

  std::vector<nlohmann::json> Audit() {
    std::lock_guard lock(mu_);
    return audit_;
  }
  std::vector<std::string> Refusals() {
    std::lock_guard lock(mu_);
    return refusals_;
  }
  // The served href of `filename` on a page, without the fragment.
  static std::string HrefOf(const std::string& page, const std::string& filename) {
    size_t at = page.find("/" + filename + "#sha256=");
    if (at == std::string::npos) return "";
    size_t start = page.rfind("href=\"", at) + 6;
    return page.substr(start, at + 1 + filename.size() - start);
  }

  FakeRegistry upstream_;
  std::string dir_;
  PackagesConfig policy_, other_policy_;
  std::unique_ptr<PackageService> service_;
  std::mutex mu_;
  std::vector<std::string> refusals_;
  std::vector<nlohmann::json> audit_;  // the service's audit events, in order
};

TEST_F(PackageServiceTest, PageIsFilteredAndHrefsPointAtHashedFiles) {
  upstream_.AddFile("demo", "demo-1.0-py3-none-any.whl", "wheel one", "", ">=3.8");
  upstream_.AddFile("demo", "demo-2.0-py3-none-any.whl", "wheel two");
  upstream_.AddFile("demo", "demo-1.5.tar.gz", "sdist");
  policy_.allow = {"pypi:demo<2"};
  Start();
  auto r = Get("/pypi/simple/Demo/");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  std::string sha = Sha256Hex("wheel one");
  EXPECT_NE(
      r->body.find("href=\"/pypi/files/" + sha + "/demo-1.0-py3-none-any.whl#sha256=" + sha + "\""),
      std::string::npos)
      << r->body;
  EXPECT_NE(r->body.find("data-requires-python=\"&gt;=3.8\""), std::string::npos);
  EXPECT_EQ(r->body.find("demo-2.0"), std::string::npos) << "2.0 is outside demo<2";
  EXPECT_EQ(r->body.find("demo-1.5.tar.gz"), std::string::npos) << "sdists are off by default";
  EXPECT_EQ(r->body.find(upstream_.origin()), std::string::npos) << "no upstream URL leaks";
  auto f = Get(HrefOf(r->body, "demo-1.0-py3-none-any.whl"));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status, 200);
  EXPECT_EQ(f->body, "wheel one");
}

TEST_F(PackageServiceTest, SecondSessionHitsTheCacheAndUpstreamSeesOneDownload) {
  upstream_.AddFile("demo", "demo-1.0-py3-none-any.whl", std::string(100000, 'w'));
  Start();
  for (const char* session : {"s1", "s2"}) {
    auto page = Get("/pypi/simple/demo/", session);
    ASSERT_EQ(page->status, 200);
    auto f = Get(HrefOf(page->body, "demo-1.0-py3-none-any.whl"), session, "");
    ASSERT_EQ(f->status, 200) << f->body;
    EXPECT_EQ(f->body, std::string(100000, 'w'));
  }
  // Another tenant with its own policy shares the same artifact.
  other_policy_ = policy_;
  auto page = Get("/pypi/simple/demo/", "s3", "other");
  ASSERT_EQ(Get(HrefOf(page->body, "demo-1.0-py3-none-any.whl"), "s3", "other")->status, 200);
  EXPECT_EQ(upstream_.Hits("/files/demo-1.0-py3-none-any.whl"), 1);
  auto stats = service_->Stats();
  EXPECT_EQ(stats.upstream_fetches, 1u);
  EXPECT_EQ(stats.hits, 2u);
  EXPECT_EQ(stats.artifacts, 1u);
  EXPECT_EQ(stats.bytes, 100000u);
  std::string sha = Sha256Hex(std::string(100000, 'w'));
  EXPECT_EQ(ReadFile(dir_ + "/cache/sha256/" + sha.substr(0, 2) + "/" + sha),
            std::string(100000, 'w'));
  auto audit = Audit();
  ASSERT_EQ(audit.size(), 3u);
  EXPECT_EQ(audit[0]["result"], "served");
  EXPECT_EQ(audit[0]["session"], "s1");
  EXPECT_EQ(audit[0]["registry"], "pypi");
  EXPECT_EQ(audit[0]["package"], "demo");
  EXPECT_EQ(audit[0]["version"], "1.0");
  EXPECT_EQ(audit[0]["filename"], "demo-1.0-py3-none-any.whl");
  EXPECT_EQ(audit[0]["digest"], "sha256:" + sha);
  EXPECT_EQ(audit[0]["source"],
            "upstream " + upstream_.origin() + "/files/demo-1.0-py3-none-any.whl");
  EXPECT_EQ(audit[1]["source"], "cache");
  EXPECT_EQ(audit[2]["tenant"], "other");
}

TEST_F(PackageServiceTest, ConcurrentRequestsForOneArtifactDownloadOnce) {
  upstream_.AddFile("demo", "demo-1.0-py3-none-any.whl", "slow wheel");
  upstream_.set_delay(std::chrono::milliseconds(300));
  Start();
  auto page = Get("/pypi/simple/demo/");
  std::string href = HrefOf(page->body, "demo-1.0-py3-none-any.whl");
  std::vector<std::future<std::string>> results;
  for (int i = 0; i < 4; ++i) {
    results.push_back(std::async(std::launch::async, [&, i] {
      auto r = Get(href, "s" + std::to_string(i));
      return r ? std::to_string(r->status) + " " + r->body : std::string("no answer");
    }));
  }
  for (auto& r : results) EXPECT_EQ(r.get(), "200 slow wheel");
  EXPECT_EQ(upstream_.Hits("/files/demo-1.0-py3-none-any.whl"), 1);
}

TEST_F(PackageServiceTest, DownloadsBeyondHalfTheWorkersAre503AndPagesStillServed) {
  for (const char* v : {"1", "2", "3"})
    upstream_.AddFile("demo", std::string("demo-") + v + ".0-py3-none-any.whl", v);
  upstream_.set_delay(std::chrono::milliseconds(600));
  Start(1ull << 30, "", 4);  // 4 workers: 2 downloads at once
  auto page = Get("/pypi/simple/demo/");
  std::vector<std::future<int>> downloads;
  for (const char* v : {"1", "2", "3"}) {
    std::string href = HrefOf(page->body, std::string("demo-") + v + ".0-py3-none-any.whl");
    downloads.push_back(std::async(std::launch::async, [this, href] {
      auto r = Get(href);
      return r ? r->status : 0;
    }));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // While two downloads run, the last worker still answers a page.
  EXPECT_EQ(Get("/pypi/simple/demo/")->status, 200);
  std::multiset<int> statuses;
  for (auto& d : downloads) statuses.insert(d.get());
  EXPECT_EQ(statuses, (std::multiset<int>{200, 200, 503}));
}

TEST_F(PackageServiceTest, TamperedArtifactIsRefusedAndNotStored) {
  upstream_.AddFile("demo", "demo-1.0-py3-none-any.whl", "tampered bytes",
                    Sha256Hex("the published bytes"));
  Start();
  auto page = Get("/pypi/simple/demo/");
  std::string href = HrefOf(page->body, "demo-1.0-py3-none-any.whl");
  ASSERT_FALSE(href.empty()) << page->body;
  auto f = Get(href);
  ASSERT_EQ(f->status, 502);
  EXPECT_NE(f->body.find("hash mismatch"), std::string::npos) << f->body;
  // Nothing stored: the second try downloads again and fails again.
  EXPECT_EQ(Get(href)->status, 502);
  EXPECT_EQ(upstream_.Hits("/files/demo-1.0-py3-none-any.whl"), 2);
  EXPECT_EQ(service_->Stats().artifacts, 0u);
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir_ + "/cache"))
    files += e.is_regular_file();
  EXPECT_EQ(files, 0u) << "no partial or unverified file in the cache";
  auto audit = Audit();
  ASSERT_FALSE(audit.empty());
  EXPECT_EQ(audit.back()["result"], "hash_mismatch");
  ASSERT_FALSE(Refusals().empty());
  EXPECT_NE(Refusals().back().find("s1: package failed: demo-1.0-py3-none-any.whl: hash mismatch"),
            std::string::npos)
      << Refusals().back();
}

TEST_F(PackageServiceTest, DeniedProjectIs403WithTheRuleBeforeAnyDownload) {
  upstream_.AddFile("evil-pkg", "evil_pkg-1.0-py3-none-any.whl", "evil");
  policy_.deny = {"pypi:evil-*"};
  Start();
  auto r = Get("/pypi/simple/Evil_Pkg/");
  ASSERT_EQ(r->status, 403);
  EXPECT_EQ(r->body, "\"evil-pkg\" is denied by packages.deny rule \"pypi:evil-*\"\n");
  EXPECT_EQ(upstream_.TotalHits(), 0);
  ASSERT_EQ(Refusals().size(), 1u);
  EXPECT_EQ(Refusals()[0],
            "s1: package refused: \"evil-pkg\" is denied by packages.deny rule \"pypi:evil-*\"");
  auto audit = Audit();
  ASSERT_EQ(audit.size(), 1u);
  EXPECT_EQ(audit[0]["result"], "refused");
  EXPECT_EQ(audit[0]["package"], "evil-pkg");
}

TEST_F(PackageServiceTest, EmptyAllowRefusesEverything) {
  policy_.allow = {};
  Start();
  auto r = Get("/pypi/simple/requests/");
  ASSERT_EQ(r->status, 403);
  EXPECT_EQ(r->body, "\"requests\" is not in packages.allow\n");
  EXPECT_EQ(upstream_.TotalHits(), 0);
}

TEST_F(PackageServiceTest, SdistOnlyIsRefusedByDefaultAndServedWhenAllowed) {
  upstream_.AddFile("srconly", "srconly-1.0.tar.gz", "sdist bytes");
  Start();
  auto r = Get("/pypi/simple/srconly/");
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->body.find("srconly-1.0.tar.gz"), std::string::npos);
  ASSERT_EQ(Refusals().size(), 1u);
  EXPECT_EQ(Refusals()[0],
            "s1: package refused: \"srconly\": only an sdist exists and packages.allow_sdist is "
            "false");
  // A request for the file by its hash is refused too (the page of another policy listed it).
  policy_.allow_sdist = true;
  r = Get("/pypi/simple/srconly/");
  std::string href = HrefOf(r->body, "srconly-1.0.tar.gz");
  ASSERT_FALSE(href.empty()) << r->body;
  policy_.allow_sdist = false;
  EXPECT_EQ(Get(href)->status, 403);
  policy_.allow_sdist = true;
  auto f = Get(href);
  ASSERT_EQ(f->status, 200);
  EXPECT_EQ(f->body, "sdist bytes");
}

TEST_F(PackageServiceTest, OfflineServesTheWheelhouseWithoutNetwork) {
  std::string wheelhouse = dir_ + "/wheelhouse";
  fs::create_directories(wheelhouse);
  std::ofstream(wheelhouse + "/local_pkg-0.3-py3-none-any.whl") << "local wheel";
  std::ofstream(wheelhouse + "/local_pkg-0.4.tar.gz") << "local sdist";
  std::ofstream(wheelhouse + "/other-1.0-py3-none-any.whl") << "other";
  upstream_.AddFile("local-pkg", "local_pkg-9.0-py3-none-any.whl", "upstream wheel");
  policy_.mode = PackagesMode::kOffline;
  policy_.wheelhouse = wheelhouse;
  Start();
  auto r = Get("/pypi/simple/local-pkg/");
  ASSERT_EQ(r->status, 200);
  std::string href = HrefOf(r->body, "local_pkg-0.3-py3-none-any.whl");
  ASSERT_EQ(href, "/pypi/files/" + Sha256Hex("local wheel") + "/local_pkg-0.3-py3-none-any.whl");
  EXPECT_EQ(r->body.find("local_pkg-0.4.tar.gz"), std::string::npos);
  EXPECT_EQ(r->body.find("9.0"), std::string::npos);
  EXPECT_EQ(r->body.find("other"), std::string::npos);
  auto f = Get(href);
  ASSERT_EQ(f->status, 200);
  EXPECT_EQ(f->body, "local wheel");
  EXPECT_EQ(upstream_.TotalHits(), 0);
  EXPECT_EQ(Audit().back()["source"], "wheelhouse");
  // A wheel changed after listing is not served under the old hash.
  std::ofstream(wheelhouse + "/local_pkg-0.3-py3-none-any.whl") << "changed!!";
  EXPECT_EQ(Get(href)->status, 404);
}

TEST_F(PackageServiceTest, DisabledModeAndUnlistedRegistryAre403) {
  policy_.mode = PackagesMode::kDisabled;
  Start();
  auto r = Get("/pypi/simple/requests/");
  ASSERT_EQ(r->status, 403);
  EXPECT_NE(r->body.find("packages.mode = \"disabled\""), std::string::npos) << r->body;
  policy_.mode = PackagesMode::kOnline;
  policy_.registries = {"pypi"};
  r = Get("/npm/left-pad");
  ASSERT_EQ(r->status, 403);
  EXPECT_NE(r->body.find("\"npm\" is not in packages.registries"), std::string::npos) << r->body;
  EXPECT_EQ(upstream_.TotalHits(), 0);
}

TEST_F(PackageServiceTest, UnknownTenantMissingHeadersAndBadPathsAreRefused) {
  Start();
  auto r = Get("/pypi/simple/requests/", "s1", "nobody");
  ASSERT_EQ(r->status, 403);
  EXPECT_EQ(r->body, "unknown tenant \"nobody\"\n");
  r = Get("/pypi/simple/requests/", "", "", false);
  ASSERT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("X-Mcpcell-Session"), std::string::npos);
  struct Bad {
    const char* path;
    int status;
    const char* says;
  };
  const Bad bad[] = {
      {"/pypi/simple/bad$name/", 400, "bad project name"},
      {"/pypi/simple/-x/", 400, "letter or digit"},
      {"/pypi/files/nothex/demo-1.0-py3-none-any.whl", 400, "bad file path"},
      {"/pypi/files/0000000000000000000000000000000000000000000000000000000000000000/..", 400,
       "bad file path"},
      {"/pypi/files/0000000000000000000000000000000000000000000000000000000000000000/x.whl", 404,
       "fetch its project page first"},
      {"/npm/Bad%20Name", 400, "bad npm package name"},
      {"/npm/-/v1/search", 404, "not served"},
      {"/etc/passwd", 404, "unknown path"},
  };
  for (const auto& b : bad) {
    auto res = Get(b.path);
    ASSERT_TRUE(res) << b.path;
    EXPECT_EQ(res->status, b.status) << b.path << ": " << res->body;
    EXPECT_NE(res->body.find(b.says), std::string::npos) << b.path << ": " << res->body;
  }
  // A huge header is refused by the server and it keeps serving.
  httplib::Client c("127.0.0.1", service_->port());
  auto huge = c.Get("/pypi/simple/requests/",
                    {{kSessionHeader, std::string(100000, 'a')}, {kTenantHeader, ""}});
  ASSERT_TRUE(huge);
  EXPECT_EQ(huge->status, 400);
  EXPECT_NE(huge->body.find("oversized request line or headers"), std::string::npos) << huge->body;
  auto post = c.Post("/pypi/simple/requests/", "x", "text/plain");
  ASSERT_TRUE(post);
  EXPECT_NE(post->status, 200);
  EXPECT_EQ(post->body, "method POST is not served (GET only)\n");
  EXPECT_EQ(Get("/pypi/simple/bad$name/")->status, 400);
  EXPECT_EQ(upstream_.TotalHits(), 0);
}

TEST_F(PackageServiceTest, LeastRecentlyUsedArtifactsAreEvictedBeyondTheCap) {
  for (const char* v : {"1", "2", "3"})
    upstream_.AddFile("demo", std::string("demo-") + v + ".0-py3-none-any.whl",
                      std::string(1500, v[0]));
  Start(3200);
  auto page = Get("/pypi/simple/demo/");
  auto fetch = [&](const char* v) {
    auto r = Get(HrefOf(page->body, std::string("demo-") + v + ".0-py3-none-any.whl"));
    return r ? r->status : 0;
  };
  ASSERT_EQ(fetch("1"), 200);
  ASSERT_EQ(fetch("2"), 200);
  ASSERT_EQ(fetch("1"), 200);  // 1 is now more recent than 2
  ASSERT_EQ(fetch("3"), 200);  // over the cap: 2 goes
  auto stats = service_->Stats();
  EXPECT_EQ(stats.artifacts, 2u);
  EXPECT_LE(stats.bytes, 3200u);
  std::string sha2 = Sha256Hex(std::string(1500, '2'));
  EXPECT_FALSE(fs::exists(dir_ + "/cache/sha256/" + sha2.substr(0, 2) + "/" + sha2));
  ASSERT_EQ(fetch("1"), 200);
  EXPECT_EQ(upstream_.Hits("/files/demo-1.0-py3-none-any.whl"), 1);
  ASSERT_EQ(fetch("2"), 200);
  EXPECT_EQ(upstream_.Hits("/files/demo-2.0-py3-none-any.whl"), 2);
}

TEST_F(PackageServiceTest, TheCacheSurvivesARestart) {
  upstream_.AddFile("demo", "demo-1.0-py3-none-any.whl", "kept wheel");
  Start();
  auto page = Get("/pypi/simple/demo/");
  std::string href = HrefOf(page->body, "demo-1.0-py3-none-any.whl");
  ASSERT_EQ(Get(href)->status, 200);
  service_.reset();
  // A leftover of an interrupted download is cleaned up, never served.
  std::ofstream(dir_ + "/cache/tmp/partial.1.1") << "partial";
  Start();
  EXPECT_EQ(service_->Stats().artifacts, 1u);
  EXPECT_FALSE(fs::exists(dir_ + "/cache/tmp/partial.1.1"));
  page = Get("/pypi/simple/demo/");
  auto f = Get(href);
  ASSERT_EQ(f->status, 200);
  EXPECT_EQ(f->body, "kept wheel");
  EXPECT_EQ(upstream_.Hits("/files/demo-1.0-py3-none-any.whl"), 1);
}

TEST_F(PackageServiceTest, NpmPackumentIsFilteredAndTarballsVerified) {
  upstream_.AddNpmVersion("left-pad", "1.0.0", "tgz 1.0.0");
  upstream_.AddNpmVersion("left-pad", "1.1.0", "tgz 1.1.0");
  upstream_.AddNpmVersion("left-pad", "1.2.0", "tgz 1.2.0", /*tamper=*/true);
  upstream_.AddNpmVersion("left-pad", "2.0.0", "tgz 2.0.0", false, "2.0.0");
  policy_.allow = {"npm:left-pad<2"};
  Start();
  auto r = Get("/npm/left-pad");
  ASSERT_EQ(r->status, 200) << r->body;
  auto doc = nlohmann::json::parse(r->body);
  EXPECT_FALSE(doc["versions"].contains("2.0.0"));
  ASSERT_TRUE(doc["versions"].contains("1.1.0"));
  EXPECT_EQ(doc["dist-tags"]["latest"], "1.2.0") << "re-pointed to the highest allowed";
  EXPECT_FALSE(doc["time"].contains("2.0.0"));
  std::string tarball = doc["versions"]["1.1.0"]["dist"]["tarball"];
  std::string prefix = std::string(kNpmRegistryUrl) + "-/files/sha512-";
  ASSERT_EQ(tarball.rfind(prefix, 0), 0u) << tarball;
  EXPECT_TRUE(tarball.ends_with("/left-pad-1.1.0.tgz")) << tarball;
  std::string path = tarball.substr(std::string("http://packages.mcpcell.internal").size());
  auto f = Get(path);
  ASSERT_EQ(f->status, 200) << f->body;
  EXPECT_EQ(f->body, "tgz 1.1.0");
  ASSERT_EQ(Get(path, "s2")->status, 200);
  EXPECT_EQ(upstream_.Hits("/tarballs/left-pad-1.1.0.tgz"), 1);
  std::string bad = doc["versions"]["1.2.0"]["dist"]["tarball"];
  auto t = Get(bad.substr(std::string("http://packages.mcpcell.internal").size()));
  EXPECT_EQ(t->status, 502);
  EXPECT_EQ(Audit().back()["result"], "hash_mismatch");
  // A scoped name arrives as @scope%2fname.
  upstream_.AddNpmVersion("@scope/pkg", "3.1.4", "scoped tgz");
  policy_.allow = {"npm:@scope/*"};
  r = Get("/npm/@scope%2fpkg");
  ASSERT_EQ(r->status, 200) << r->body;
  doc = nlohmann::json::parse(r->body);
  EXPECT_EQ(doc["name"], "@scope/pkg");
  std::string scoped = doc["versions"]["3.1.4"]["dist"]["tarball"];
  EXPECT_TRUE(scoped.ends_with("/pkg-3.1.4.tgz")) << scoped;
  f = Get(scoped.substr(std::string("http://packages.mcpcell.internal").size()));
  ASSERT_EQ(f->status, 200) << f->body;
  EXPECT_EQ(f->body, "scoped tgz");
  // Denied entirely: 403 before the upstream is asked.
  policy_.allow = {"npm:*"};
  policy_.deny = {"npm:left-*"};
  int before = upstream_.TotalHits();
  EXPECT_EQ(Get("/npm/left-pad")->status, 403);
  EXPECT_EQ(upstream_.TotalHits(), before);
}

// `npm pack`-style tarball made with tar(1): <dir>/<file> holding package/package.json.
bool MakeNpmTarball(const std::string& work, const std::string& file, const std::string& json) {
  std::string stage = work + "/stage-" + file;
  fs::create_directories(stage + "/package");
  std::ofstream(stage + "/package/package.json") << json;
  std::ofstream(stage + "/package/index.js") << "module.exports = 1;\n";
  std::string cmd = "tar -C " + stage + " -czf " + work + "/npm/" + file +
                    " package/index.js package/package.json";
  return std::system(cmd.c_str()) == 0;
}

TEST_F(PackageServiceTest, OfflineNpmServesTheDirectoryWithoutNetwork) {
  std::string npm_dir = dir_ + "/npm";
  fs::create_directories(npm_dir);
  ASSERT_TRUE(MakeNpmTarball(dir_, "tiny-1.0.0.tgz",
                             R"({"name":"tiny","version":"1.0.0","dependencies":{"dep":"^2"}})"));
  ASSERT_TRUE(MakeNpmTarball(dir_, "tiny-2.0.0.tgz", R"({"name":"tiny","version":"2.0.0"})"));
  ASSERT_TRUE(MakeNpmTarball(dir_, "other-1.0.0.tgz", R"({"name":"other","version":"1.0.0"})"));
  std::ofstream(npm_dir + "/broken-1.0.0.tgz") << "not gzip";
  upstream_.AddNpmVersion("tiny", "9.0.0", "upstream tgz");
  policy_.mode = PackagesMode::kOffline;
  policy_.registries = {"npm"};
  policy_.npm_offline_dir = npm_dir;
  policy_.allow = {"npm:tiny<2"};
  Start();
  auto r = Get("/npm/tiny");
  ASSERT_EQ(r->status, 200) << r->body;
  auto doc = nlohmann::json::parse(r->body);
  ASSERT_TRUE(doc["versions"].contains("1.0.0")) << r->body;
  EXPECT_FALSE(doc["versions"].contains("2.0.0"));
  EXPECT_FALSE(doc["versions"].contains("9.0.0"));
  EXPECT_EQ(doc["versions"]["1.0.0"]["dependencies"]["dep"], "^2");
  EXPECT_EQ(doc["dist-tags"]["latest"], "1.0.0");
  std::string tarball = doc["versions"]["1.0.0"]["dist"]["tarball"];
  std::string bytes = ReadFile(npm_dir + "/tiny-1.0.0.tgz");
  EXPECT_EQ(doc["versions"]["1.0.0"]["dist"]["integrity"],
            "sha512-" + testing::Sha512Base64(bytes));
  EXPECT_EQ(tarball.find("file:"), std::string::npos) << "no host path leaks: " << tarball;
  auto f = Get(tarball.substr(std::string("http://packages.mcpcell.internal").size()));
  ASSERT_EQ(f->status, 200) << f->body;
  EXPECT_EQ(f->body, bytes);
  EXPECT_EQ(Audit().back()["source"], "npm_offline_dir");
  EXPECT_EQ(Get("/npm/absent")->status, 403);  // not allowed at all
  policy_.allow = {"npm:*"};
  r = Get("/npm/absent");
  EXPECT_EQ(r->status, 404);
  EXPECT_NE(r->body.find("has no tarball of \"absent\""), std::string::npos) << r->body;
  EXPECT_EQ(upstream_.TotalHits(), 0);
}

TEST(NpmTarballTest, ReadsPackageJsonAndRefusesJunk) {
  std::string dir = MakeTempDir();
  fs::create_directories(dir + "/npm");
  ASSERT_TRUE(MakeNpmTarball(dir, "a.tgz", R"({"name":"a","version":"1.2.3"})"));
  auto manifest = ReadTarballPackageJson(dir + "/npm/a.tgz");
  ASSERT_TRUE(manifest.ok()) << manifest.error().message;
  EXPECT_EQ((*manifest)["version"], "1.2.3");
  std::ofstream(dir + "/npm/plain.tgz") << "plain text";
  EXPECT_FALSE(ReadTarballPackageJson(dir + "/npm/plain.tgz").ok());
  ASSERT_EQ(std::system(("head -c 100 " + dir + "/npm/a.tgz > " + dir + "/npm/cut.tgz").c_str()),
            0);
  EXPECT_FALSE(ReadTarballPackageJson(dir + "/npm/cut.tgz").ok());
  ASSERT_TRUE(MakeNpmTarball(dir, "bad.tgz", "{not json"));
  auto bad = ReadTarballPackageJson(dir + "/npm/bad.tgz");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("not JSON"), std::string::npos) << bad.error().message;
  EXPECT_FALSE(ReadTarballPackageJson(dir + "/npm/missing.tgz").ok());
  fs::remove_all(dir);
}

TEST_F(PackageServiceTest, RedirectsAreFollowedOnlyToHttp) {
  upstream_.AddFile("moved", "moved-1.0-py3-none-any.whl", "moved wheel", "", "", "moved");
  upstream_.AddFile("gone", "gone-1.0-py3-none-any.whl", "gone wheel", "", "", "moved-away");
  Start();
  auto page = Get("/pypi/simple/moved/");
  auto f = Get(HrefOf(page->body, "moved-1.0-py3-none-any.whl"));
  ASSERT_EQ(f->status, 200) << f->body;
  EXPECT_EQ(f->body, "moved wheel");
  EXPECT_EQ(upstream_.Hits("/moved/moved-1.0-py3-none-any.whl"), 1);
  page = Get("/pypi/simple/gone/");
  f = Get(HrefOf(page->body, "gone-1.0-py3-none-any.whl"));
  EXPECT_EQ(f->status, 502);
  EXPECT_NE(f->body.find("redirect to a non-http(s) URL"), std::string::npos) << f->body;
  EXPECT_EQ(upstream_.Hits("/files/gone-1.0-py3-none-any.whl"), 0);
}

TEST_F(PackageServiceTest, AnArtifactOverTheSizeCapIsRefusedAndNotStored) {
  upstream_.AddFile("huge", "huge-1.0-py3-none-any.whl", std::string(5000, 'h'));
  policy_.max_artifact_bytes = 1000;
  Start();
  auto page = Get("/pypi/simple/huge/");
  auto f = Get(HrefOf(page->body, "huge-1.0-py3-none-any.whl"));
  ASSERT_EQ(f->status, 502);
  EXPECT_NE(f->body.find("larger than 1000 bytes (packages.max_artifact_size)"), std::string::npos)
      << f->body;
  EXPECT_EQ(service_->Stats().artifacts, 0u);
  EXPECT_EQ(Audit().back()["result"], "upstream_error");
}

TEST_F(PackageServiceTest, UpstreamFailuresAre502And404) {
  Start();
  auto r = Get("/pypi/simple/missing/");
  EXPECT_EQ(r->status, 404);
  EXPECT_NE(r->body.find("no project \"missing\""), std::string::npos) << r->body;
  policy_.pypi_index = "http://127.0.0.1:1/simple/";
  r = Get("/pypi/simple/demo/");
  EXPECT_EQ(r->status, 502);
  EXPECT_EQ(Audit().back()["result"], "upstream_error");
}

// HTTPS upstream with a CA made by the openssl CLI: verified with the CA given, refused
// without it (the system CAs do not know it).
class HttpsUpstreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    std::string cmd =
        "cd " + dir_ +
        " && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1"
        " -subj /CN=mcpcell-test-ca -keyout ca.key -out ca.pem"
        " && openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
        " -subj /CN=127.0.0.1 -keyout server.key -out server.csr"
        " && printf 'subjectAltName=IP:127.0.0.1\\n' > ext.cnf"
        " && openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial"
        " -days 1 -extfile ext.cnf -out server.pem";
    have_openssl_ = std::system((cmd + " >/dev/null 2>&1").c_str()) == 0;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string dir_;
  bool have_openssl_ = false;
};

TEST_F(HttpsUpstreamTest, VerifiesTheChainWithTheExtraBundle) {
  if (!have_openssl_) GTEST_SKIP() << "the openssl CLI could not make a test CA";
  auto server = std::make_unique<httplib::SSLServer>((dir_ + "/server.pem").c_str(),
                                                     (dir_ + "/server.key").c_str());
  ASSERT_TRUE(server->is_valid());
  FakeRegistry upstream(std::move(server));
  upstream.set_tls(true);
  upstream.AddFile("demo", "demo-1.0-py3-none-any.whl", "tls wheel");
  PackagesConfig policy;
  policy.mode = PackagesMode::kOnline;
  policy.registries = {"pypi"};
  policy.pypi_index = upstream.origin(true) + "/simple/";
  policy.allow = {"pypi:*"};
  std::vector<std::string> refusals;
  std::mutex mu;
  auto start = [&](const std::string& ca, const std::string& sub) {
    ServiceOptions o;
    o.cache_dir = dir_ + "/" + sub + "/cache";
    o.ca_file = ca;
    o.policy_for_tenant = [&](const std::string&) { return &policy; };
    o.on_refusal = [&](const std::string&, const std::string& line) {
      std::lock_guard lock(mu);
      refusals.push_back(line);
    };
    auto s = PackageService::Start(std::move(o));
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
    return std::move(s.value());
  };
  auto get = [](PackageService& s, const std::string& path) {
    httplib::Client c("127.0.0.1", s.port());
    return c.Get(path, {{kSessionHeader, "s1"}, {kTenantHeader, ""}});
  };
  {
    auto untrusting = start("", "a");
    auto r = get(*untrusting, "/pypi/simple/demo/");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 502) << r->body;
    EXPECT_NE(r->body.find("certificate"), std::string::npos) << r->body;
  }
  auto trusting = start(dir_ + "/ca.pem", "b");
  auto page = get(*trusting, "/pypi/simple/demo/");
  ASSERT_TRUE(page);
  ASSERT_EQ(page->status, 200) << page->body;
  std::string sha = Sha256Hex("tls wheel");
  auto f = get(*trusting, "/pypi/files/" + sha + "/demo-1.0-py3-none-any.whl");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status, 200) << f->body;
  EXPECT_EQ(f->body, "tls wheel");
}

}  // namespace
}  // namespace mcpcell::packages
