// Debian's own pip (/usr/bin/python3 -m pip) against the service: the page format, the
// hashes and the file answers are what a real installer accepts. pip cannot add the proxy's
// headers, so a forwarder on loopback plays the egress proxy's internal route and adds them.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <mutex>

#include "fake_registry.h"
#include "packages/service.h"

namespace mcpcell::packages {
namespace {

namespace fs = std::filesystem;

int RunShell(const std::string& cmd, std::string* output) {
  std::string full = cmd + " 2>&1";
  FILE* p = popen(full.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) output->append(buf, n);
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// Forwards GETs to the service with X-Mcpcell-Session/Tenant, like the egress proxy does.
class Forwarder {
 public:
  explicit Forwarder(uint16_t service_port) : service_port_(service_port) {
    server_.Get(R"(/.*)", [this](const httplib::Request& req, httplib::Response& res) {
      httplib::Client c("127.0.0.1", service_port_);
      auto r = c.Get(req.path, {{kSessionHeader, "pip-session"}, {kTenantHeader, ""}});
      if (!r) {
        res.status = 502;
        return;
      }
      res.status = r->status;
      res.set_content(r->body, r->get_header_value("Content-Type"));
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~Forwarder() {
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }

 private:
  uint16_t service_port_;
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
};

TEST(PipClientTest, DebianPipDownloadsThroughTheServiceAndSeesRefusals) {
  std::string out;
  if (RunShell(
          "/usr/bin/python3 -c 'import setuptools, wheel' && /usr/bin/python3 -m pip --version",
          &out) != 0)
    GTEST_SKIP() << "Debian's python3 with pip, setuptools and wheel is not installed: " << out;
  char tmpl[] = "/tmp/mcpcell-pip-test-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  fs::create_directories(dir + "/src/tinypkg");
  std::ofstream(dir + "/src/setup.py")
      << "from setuptools import setup\nsetup(name='tiny-pkg', version='1.2.0', "
         "packages=['tinypkg'])\n";
  std::ofstream(dir + "/src/tinypkg/__init__.py") << "VALUE = 42\n";
  out.clear();
  ASSERT_EQ(RunShell("cd " + dir +
                         " && /usr/bin/python3 -m pip wheel -q --no-build-isolation "
                         "--no-index --no-deps -w wheels ./src",
                     &out),
            0)
      << out;
  std::string wheel = "tiny_pkg-1.2.0-py3-none-any.whl";
  std::ifstream in(dir + "/wheels/" + wheel, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(bytes.empty());

  testing::FakeRegistry upstream;
  upstream.AddFile("tiny-pkg", wheel, bytes);
  upstream.AddFile("bad-pkg", "bad_pkg-1.0-py3-none-any.whl", "never served");
  PackagesConfig policy;
  policy.mode = PackagesMode::kOnline;
  policy.registries = {"pypi"};
  policy.pypi_index = upstream.origin() + "/simple/";
  policy.allow = {"pypi:*"};
  policy.deny = {"pypi:bad-pkg"};
  ServiceOptions o;
  o.cache_dir = dir + "/cache";
  o.policy_for_tenant = [&](const std::string&) { return &policy; };
  std::mutex audit_mu;
  std::string audited;  // the reasons of the service's audit events
  o.audit = [&](const nlohmann::json& event) {
    std::lock_guard lock(audit_mu);
    audited += event.value("reason", "") + "\n";
  };
  auto service = PackageService::Start(std::move(o));
  ASSERT_TRUE(service.ok()) << service.error().message;
  Forwarder forwarder((*service)->port());

  std::string pip = "cd " + dir +
                    " && /usr/bin/python3 -m pip --isolated download -vv "
                    "--disable-pip-version-check --no-cache-dir --no-deps --only-binary=:all: "
                    "--index-url http://127.0.0.1:" +
                    std::to_string(forwarder.port()) + "/pypi/simple/ -d got ";
  out.clear();
  EXPECT_EQ(RunShell(pip + "'Tiny_Pkg>=1'", &out), 0) << out;
  EXPECT_TRUE(fs::exists(dir + "/got/" + wheel)) << out;
  EXPECT_EQ(upstream.Hits("/files/" + wheel), 1);
  out.clear();
  EXPECT_NE(RunShell(pip + "bad-pkg", &out), 0) << out;
  EXPECT_NE(out.find("403"), std::string::npos) << out;
  {
    std::lock_guard lock(audit_mu);
    EXPECT_NE(audited.find("denied by packages.deny rule"), std::string::npos) << audited;
  }
  EXPECT_EQ(upstream.Hits("/files/bad_pkg-1.0-py3-none-any.whl"), 0);
  service.value().reset();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mcpcell::packages
