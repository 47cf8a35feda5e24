// HttpOptions::on_request_done: called once per answered request, with its method, route
// kind (mcp, legacy, route, other), status and the bearer token's tenant. The callback runs
// after the response is written, so the test waits for the count it expects.
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "mcp/http_server.h"
#include "mcp/server.h"
#include "tests/unit/mcp/test_util.h"

namespace mcp::testing {
namespace {

class RequestDoneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpOptions o;
    o.authenticate = [](const std::string& token) -> std::optional<HttpTenant> {
      if (token != "good") return std::nullopt;
      HttpTenant tenant;
      tenant.name = "acme";
      return tenant;
    };
    o.routes.push_back({"/admin", [](const HttpRouteRequest&) {
                          HttpRouteResponse out;
                          out.body = "{}";
                          return out;
                        }});
    o.on_request_done = [this](const HttpRequestDone& done) {
      std::lock_guard lock(mu_);
      done_.push_back(done);
      cv_.notify_all();
    };
    server_ = std::make_unique<Server>(TestOptions());
    http_ = std::make_unique<HttpServer>(*server_, o);
    Status st = http_->Bind();
    ASSERT_TRUE(st) << st.message();
    thread_ = std::thread([this] { http_->Run(); });
    client_ = std::make_unique<httplib::Client>("127.0.0.1", http_->port());
  }
  void TearDown() override {
    http_->Stop();
    thread_.join();
  }
  // The calls so far once there are `n` of them (or what came within 10 s).
  std::vector<HttpRequestDone> WaitFor(size_t n) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return done_.size() >= n; });
    return done_;
  }

  std::unique_ptr<Server> server_;
  std::unique_ptr<HttpServer> http_;
  std::thread thread_;
  std::unique_ptr<httplib::Client> client_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<HttpRequestDone> done_;
};

TEST_F(RequestDoneTest, EveryAnsweredRequestIsReportedOnceWithItsKindStatusAndTenant) {
  const std::string init =
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":)"
      R"("2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})";
  httplib::Headers good = {{"Authorization", "Bearer good"},
                           {"Accept", "application/json, text/event-stream"}};
  EXPECT_EQ(client_->Post("/mcp", good, init, "application/json")->status, 200);
  EXPECT_EQ(client_->Post("/mcp", init, "application/json")->status, 401);
  EXPECT_EQ(client_->Get("/admin/x", {{"Authorization", "Bearer good"}})->status, 200);
  EXPECT_EQ(client_->Get("/nowhere")->status, 404);
  EXPECT_EQ(client_->Post("/messages?sessionId=none", good, "{}", "application/json")->status, 404);
  std::vector<HttpRequestDone> done = WaitFor(5);
  ASSERT_EQ(done.size(), 5u);
  // Reported after each response is written, so not necessarily in request order.
  auto count = [&](const char* method, const char* kind, int status, const char* tenant) {
    return std::count_if(done.begin(), done.end(), [&](const HttpRequestDone& d) {
      return d.method == method && d.route_kind == kind && d.status == status && d.tenant == tenant;
    });
  };
  EXPECT_EQ(count("POST", "mcp", 200, "acme"), 1);
  EXPECT_EQ(count("POST", "mcp", 401, ""), 1);
  EXPECT_EQ(count("GET", "route", 200, "acme"), 1);
  EXPECT_EQ(count("GET", "other", 404, ""), 1);
  EXPECT_EQ(count("POST", "legacy", 404, "acme"), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(WaitFor(5).size(), 5u) << "each request is reported once";
}

}  // namespace
}  // namespace mcp::testing
