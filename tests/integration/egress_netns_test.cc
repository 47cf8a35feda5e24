// Network egress end to end (issue 7): `mcpcell serve` runs in a network namespace of the
// test's own, joined by a veth pair to a second namespace where HTTP and HTTPS upstreams
// (a test CA made here with the openssl CLI) answer on 203.0.113.2 (TEST-NET-3). Over
// stdio JSON-RPC, run_command and run_code inside a real cell use the cell's egress proxy:
// allowed names work (curl, Python urllib, HTTP and HTTPS), everything else is refused with
// a reason the agent can read (allowlist, wildcard and port rules, names that resolve to
// link-local, private or loopback addresses, an SNI that differs from the CONNECT host),
// and nothing bypasses the proxy (direct connect, UDP, raw sockets, DNS). The audit file
// and session_info show what happened.
//
// Nothing on the host changes: the namespaces, veth pair and addresses exist only for the
// test (removed on every path; leftovers of a killed run are removed by the next), and the
// names map to addresses through `serve --egress-hosts`, not /etc/hosts or DNS.
// Needs root (ip netns, veth); skipped otherwise. CI runs it as root.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#ifndef MCPCELL_BIN
#error "MCPCELL_BIN must name the mcpcell executable"
#endif

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Json = nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kServerAddr = "203.0.113.1";
constexpr const char* kUpstreamAddr = "203.0.113.2";
constexpr const char* kNetnsPrefix = "mcpcell-t-";

// Runs `sh -c cmd`; returns its exit status and fills *out with stdout+stderr.
int Sh(const std::string& cmd, std::string* out = nullptr) {
  std::string full = cmd + " 2>&1";
  FILE* f = ::popen(full.c_str(), "r");
  if (!f) return -1;
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  int status = ::pclose(f);
  if (out) *out = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Removes namespaces of earlier runs whose test process no longer exists
// (mcpcell-t-<pid>-<tag>); deleting a namespace deletes its end of the veth pair.
void RemoveStaleNamespaces() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/run/netns", ec)) {
    std::string name = e.path().filename();
    if (name.rfind(kNetnsPrefix, 0) != 0) continue;
    std::string rest = name.substr(std::strlen(kNetnsPrefix));
    pid_t pid = static_cast<pid_t>(std::atoi(rest.c_str()));
    if (pid > 0 && ::kill(pid, 0) == 0) continue;
    Sh("ip netns del " + name);
  }
}

// Two network namespaces joined by a veth pair: the server's (203.0.113.1/24) and the
// upstreams' (203.0.113.2/24). No default route in either: nothing leaves them.
class TestNetwork {
 public:
  // Returns "" on success, else what failed (with ip's output).
  std::string Create() {
    std::mt19937 rng(std::random_device{}());
    std::string tag = std::to_string(::getpid()) + "-" + std::to_string(rng() % 100000);
    server_ns_ = kNetnsPrefix + tag + "-s";
    upstream_ns_ = kNetnsPrefix + tag + "-u";
    std::string veth_s = "mct" + std::to_string(rng() % 1000000) + "s";
    std::string veth_u = veth_s.substr(0, veth_s.size() - 1) + "u";
    const std::vector<std::string> steps = {
        "ip netns add " + server_ns_,
        "ip netns add " + upstream_ns_,
        "ip link add " + veth_s + " netns " + server_ns_ + " type veth peer name " + veth_u +
            " netns " + upstream_ns_,
        "ip -n " + server_ns_ + " addr add " + kServerAddr + "/24 dev " + veth_s,
        "ip -n " + upstream_ns_ + " addr add " + kUpstreamAddr + "/24 dev " + veth_u,
        "ip -n " + server_ns_ + " link set lo up",
        "ip -n " + upstream_ns_ + " link set lo up",
        "ip -n " + server_ns_ + " link set " + veth_s + " up",
        "ip -n " + upstream_ns_ + " link set " + veth_u + " up",
    };
    for (const std::string& step : steps) {
      std::string out;
      if (Sh(step, &out) != 0) return step + ": " + out;
      if (step.rfind("ip netns add", 0) == 0) created_.push_back(step.substr(13));
    }
    return "";  // IPv4 on a veth pair needs no address validation: usable at once
  }
  ~TestNetwork() {
    for (const std::string& ns : created_) Sh("ip netns del " + ns);
  }
  const std::string& server_ns() const { return server_ns_; }
  const std::string& upstream_ns() const { return upstream_ns_; }

 private:
  std::string server_ns_, upstream_ns_;
  std::vector<std::string> created_;
};

// A child process started inside a named network namespace (setns before exec: nothing
// else about its environment changes), stdin/stdout piped, stderr to a file.
class NetnsChild {
 public:
  bool Start(const std::string& netns, std::vector<std::string> argv, const std::string& log) {
    int ns = ::open(("/run/netns/" + netns).c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0) return false;
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) return false;
    int err = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      if (::setns(ns, CLONE_NEWNET) != 0) ::_exit(97);
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::dup2(err, 2);
      ::execvp(args[0], args.data());
      ::_exit(98);
    }
    ::close(ns);
    ::close(err);
    ::close(in[0]);
    ::close(out[1]);
    in_ = in[1];
    out_ = out[0];
    return pid_ > 0;
  }
  ~NetnsChild() { Stop(); }

  // Closes stdin (a stdio server exits on EOF), waits up to `grace`, then kills.
  void Stop(std::chrono::milliseconds grace = 20s) {
    if (pid_ <= 0) return;
    if (in_ >= 0) ::close(in_);
    in_ = -1;
    auto deadline = std::chrono::steady_clock::now() + grace;
    int status;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(50ms);
    }
    pid_ = -1;
    if (out_ >= 0) ::close(out_);
    out_ = -1;
  }

  bool WriteLine(const std::string& line) {
    std::string s = line + "\n";
    return ::write(in_, s.data(), s.size()) == static_cast<ssize_t>(s.size());
  }
  // One line of stdout, or nullopt on EOF or timeout.
  std::optional<std::string> ReadLine(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      if (size_t nl = buffer_.find('\n'); nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left <= 0ms) return std::nullopt;
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[65536];
      ssize_t n = ::read(out_, buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      buffer_.append(buf, static_cast<size_t>(n));
    }
  }

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
  std::string buffer_;
};

// The upstreams: plain HTTP on :80 and :8080, TLS on :443 and :8443 (one certificate for
// allowed.test, *.wild.test and other.test, from the test CA). Each answers
// "upstream <port> host=<Host> path=<path>", or N bytes for /bytes/N.
constexpr const char* kUpstreamPy = R"PY(
import http.server, socketserver, ssl, sys, threading
cert, key = sys.argv[1], sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def do_GET(self):
        port = self.server.server_address[1]
        if self.path.startswith('/bytes/'):
            body = b'x' * int(self.path[7:])
        else:
            body = ('upstream %d host=%s path=%s\n' % (port, self.headers.get('Host'), self.path)).encode()
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.send_header('Connection', 'close')
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    def get_request(self):
        sock, addr = super().get_request()
        if getattr(self, 'tls', None):
            sock.settimeout(10)
            sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr
    def finish_request(self, request, client_address):
        try:
            if getattr(self, 'tls', None):
                request.do_handshake()
            super().finish_request(request, client_address)
        except (ssl.SSLError, OSError):
            pass
servers = []
for port, tls in ((80, False), (8080, False), (443, True), (8443, True)):
    s = S(('203.0.113.2', port), H)
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        s.tls = ctx
    servers.append(s)
    threading.Thread(target=s.serve_forever, daemon=True).start()
print('ready', flush=True)
sys.stdin.read()
)PY";

// Makes ca.pem, server.pem and server.key in dir. "" on success.
std::string MakeCertificates(const std::string& dir) {
  const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  std::ofstream(dir + "/ext.cnf") << "subjectAltName=DNS:allowed.test,DNS:*.wild.test,"
                                     "DNS:other.test\nbasicConstraints=CA:FALSE\n";
  const std::vector<std::string> steps = {
      "openssl req -x509 " + ec + " -keyout " + dir + "/ca.key -out " + dir +
          "/ca.pem -days 2 -subj /CN=mcpcell-egress-test-ca",
      "openssl req " + ec + " -keyout " + dir + "/server.key -out " + dir +
          "/server.csr -subj /CN=allowed.test",
      "openssl x509 -req -in " + dir + "/server.csr -CA " + dir + "/ca.pem -CAkey " + dir +
          "/ca.key -CAcreateserial -out " + dir + "/server.pem -days 2 -extfile " + dir +
          "/ext.cnf",
  };
  for (const std::string& step : steps) {
    std::string out;
    if (Sh(step, &out) != 0) return step + ": " + out;
  }
  return "";
}

// Minimal MCP client over the server's stdio: one request at a time, notifications skipped.
class McpClient {
 public:
  explicit McpClient(NetnsChild* child) : child_(child) {}

  std::optional<Json> Request(const std::string& method, Json params,
                              std::chrono::milliseconds timeout = 120s) {
    int id = ++next_id_;
    Json req = {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}};
    if (!child_->WriteLine(req.dump())) return std::nullopt;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      auto line = child_->ReadLine(std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now()));
      if (!line) return std::nullopt;
      Json msg = Json::parse(*line, nullptr, false);
      if (msg.is_discarded() || !msg.contains("id") || msg["id"] != id) continue;
      return msg;
    }
    return std::nullopt;
  }
  bool Initialize() {
    auto r = Request("initialize", {{"protocolVersion", "2025-06-18"},
                                    {"capabilities", Json::object()},
                                    {"clientInfo", {{"name", "egress-test"}, {"version", "1"}}}});
    if (!r || !r->contains("result")) return false;
    return child_->WriteLine(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  }
  // The tool's result object (content, structuredContent, isError), or a JSON-RPC error.
  Json Call(const std::string& tool, Json args) {
    auto r = Request("tools/call", {{"name", tool}, {"arguments", args}});
    if (!r) return {{"transport_error", "no response"}};
    if (r->contains("error")) return {{"rpc_error", (*r)["error"]}};
    return (*r)["result"];
  }

 private:
  NetnsChild* child_;
  int next_id_ = 0;
};

// The model-visible text of a tool result.
std::string Text(const Json& result) {
  std::string out;
  if (!result.contains("content")) return result.dump();
  for (const auto& c : result["content"])
    if (c.value("type", "") == "text") out += c.value("text", "") + "\n";
  return out;
}

class EgressNetns : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) return;
    RemoveStaleNamespaces();
    char tmpl[] = "/tmp/mcpcell-egress-XXXXXX";
    if (!::mkdtemp(tmpl)) {
      setup_error_ = "mkdtemp";
      return;
    }
    dir_ = tmpl;
    // Cells of a root server run as other host uids and must traverse to the state dir.
    ::chmod(dir_.c_str(), 0755);
    net_ = std::make_unique<TestNetwork>();
    if (setup_error_ = net_->Create(); !setup_error_.empty()) return;
    if (setup_error_ = MakeCertificates(dir_); !setup_error_.empty()) return;
    std::ofstream(dir_ + "/upstream.py") << kUpstreamPy;
    upstream_ = std::make_unique<NetnsChild>();
    if (!upstream_->Start(
            net_->upstream_ns(),
            {"python3", dir_ + "/upstream.py", dir_ + "/server.pem", dir_ + "/server.key"},
            dir_ + "/upstream.log")) {
      setup_error_ = "could not start the upstreams";
      return;
    }
    auto ready = upstream_->ReadLine(30s);
    if (!ready || *ready != "ready") {
      setup_error_ = "upstreams did not start: " + ReadAll(dir_ + "/upstream.log");
      return;
    }
    std::ofstream(dir_ + "/policy.toml") << R"(name = "egress-test"
[network]
egress = "allowlist"
allow = ["allowed.test", "*.wild.test:8443", "ports.test:8080", "meta.test", "private.test",
         "self.test", "own.test"]
)";
    std::ofstream(dir_ + "/hosts") << "# the test's names (hosts(5) format)\n"
                                   << kUpstreamAddr
                                   << " allowed.test denied.test a.wild.test wild.test "
                                      "ports.test other.test\n"
                                   << "169.254.169.254 meta.test\n"
                                   << "10.0.0.1 private.test  # a comment\n"
                                   << "127.0.0.1 self.test\n"
                                   << kServerAddr << " own.test\n";
    std::filesystem::create_directories(dir_ + "/state");
    server_ = std::make_unique<NetnsChild>();
    if (!server_->Start(
            net_->server_ns(),
            {MCPCELL_BIN, "serve", "--state-dir", dir_ + "/state", "--policy",
             dir_ + "/policy.toml", "--egress-hosts", dir_ + "/hosts", "--log-level", "info"},
            dir_ + "/server.log")) {
      setup_error_ = "could not start mcpcell serve";
      return;
    }
    client_ = std::make_unique<McpClient>(server_.get());
    if (!client_->Initialize()) {
      setup_error_ = "initialize failed; server log:\n" + ReadAll(dir_ + "/server.log");
      return;
    }
    Json wrote = client_->Call(
        "write_file", {{"path", "/workspace/ca.pem"}, {"content", ReadAll(dir_ + "/ca.pem")}});
    if (wrote.value("isError", false) || !wrote.contains("content")) {
      setup_error_ = "write_file ca.pem: " + wrote.dump();
      return;
    }
  }

  static void TearDownTestSuite() {
    client_.reset();
    if (server_) server_->Stop();
    server_.reset();
    if (upstream_) upstream_->Stop(2s);
    upstream_.reset();
    net_.reset();  // deletes both namespaces (and with them the veth pair)
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
    dir_.clear();
  }

  void SetUp() override {
    if (::geteuid() != 0)
      GTEST_SKIP() << "needs root (creates network namespaces and a veth pair); CI runs it as "
                      "root";
    ASSERT_EQ(setup_error_, "");
  }
  void TearDown() override {
    if (HasFailure() && !dir_.empty())
      std::fprintf(stderr, "--- server log ---\n%s\n", ReadAll(dir_ + "/server.log").c_str());
  }

  struct Run {
    int exit_code = -1;
    std::string stdout_text, stderr_text, model_text;
    Json raw;
  };
  static Run RunCommand(const std::string& command) {
    return FromExec(client_->Call("run_command", {{"command", command}, {"timeout_s", 60}}));
  }
  static Run RunPython(const std::string& code) {
    return FromExec(client_->Call("run_code", {{"language", "python"}, {"code", code}}));
  }
  static Run FromExec(const Json& result) {
    Run r;
    r.raw = result;
    r.model_text = Text(result);
    if (result.contains("structuredContent")) {
      const Json& s = result["structuredContent"];
      r.exit_code = s.value("exit_code", -1);
      r.stdout_text = s.value("stdout", "");
      r.stderr_text = s.value("stderr", "");
    }
    return r;
  }
  // The proxy's audit records so far (egress.connection in the audit trail), waiting up to
  // 5 s for one that `want` accepts (they are written when the proxied connection ends).
  template <typename Pred>
  static std::vector<Json> AuditUntil(Pred want) {
    std::vector<Json> events;
    for (int i = 0; i < 100; ++i) {
      events.clear();
      std::istringstream lines(ReadAll(dir_ + "/state/audit/audit.jsonl"));
      bool found = false;
      for (std::string line; std::getline(lines, line);) {
        Json e = Json::parse(line, nullptr, false);
        if (e.is_discarded() || e.value("type", "") != "egress.connection") continue;
        events.push_back(e);
        found = found || want(e);
      }
      if (found) break;
      std::this_thread::sleep_for(50ms);
    }
    return events;
  }

  static inline std::string dir_;
  static inline std::string setup_error_;
  static inline std::unique_ptr<TestNetwork> net_;
  static inline std::unique_ptr<NetnsChild> upstream_;
  static inline std::unique_ptr<NetnsChild> server_;
  static inline std::unique_ptr<McpClient> client_;
};

const char* kCurl = "curl -sS --max-time 20 --cacert /workspace/ca.pem ";

TEST_F(EgressNetns, CurlReachesAnAllowedHostOverHttpAndHttps) {
  Run http = RunCommand(std::string(kCurl) + "--fail-with-body http://allowed.test/hello");
  EXPECT_EQ(http.exit_code, 0) << http.model_text;
  EXPECT_EQ(http.stdout_text, "upstream 80 host=allowed.test path=/hello\n");
  Run https = RunCommand(std::string(kCurl) + "--fail-with-body https://allowed.test/tls");
  EXPECT_EQ(https.exit_code, 0) << https.model_text;
  EXPECT_EQ(https.stdout_text, "upstream 443 host=allowed.test path=/tls\n");
}

TEST_F(EgressNetns, PythonUrllibReachesAnAllowedHost) {
  Run r = RunPython(R"(
import ssl, urllib.request
print(urllib.request.urlopen('http://allowed.test/py', timeout=20).read().decode(), end='')
ctx = ssl.create_default_context(cafile='/workspace/ca.pem')
print(urllib.request.urlopen('https://allowed.test/pys', context=ctx, timeout=20).read().decode(),
      end='')
)");
  EXPECT_EQ(r.exit_code, 0) << r.model_text;
  EXPECT_EQ(r.stdout_text,
            "upstream 80 host=allowed.test path=/py\nupstream 443 host=allowed.test path=/pys\n");
}

TEST_F(EgressNetns, ADeniedHostGets403WithTheReason) {
  const std::string http_line =
      "mcpcell: egress to denied.test:80 denied: not in the policy's allowlist";
  const std::string https_line =
      "mcpcell: egress to denied.test:443 denied: not in the policy's allowlist";
  Run http = RunCommand(std::string(kCurl) + "-i http://denied.test/x");
  EXPECT_EQ(http.exit_code, 0) << http.model_text;
  EXPECT_THAT(http.stdout_text, HasSubstr("HTTP/1.1 403"));
  EXPECT_THAT(http.stdout_text, HasSubstr("X-Mcpcell-Reason: " + http_line));
  EXPECT_THAT(http.stdout_text, HasSubstr("\r\n\r\n" + http_line + "\n"));
  // curl -f and a refused CONNECT do not print the body: the tool result names the refusal.
  Run https = RunCommand(std::string(kCurl) + "-f https://denied.test/x");
  EXPECT_NE(https.exit_code, 0);
  EXPECT_THAT(https.stderr_text, HasSubstr("403"));
  EXPECT_THAT(https.model_text, HasSubstr(https_line));
  // Python's errors carry the status line's reason.
  Run py = RunPython(R"(
import urllib.request, urllib.error
for url in ('http://denied.test/p', 'https://denied.test/p'):
    try:
        urllib.request.urlopen(url, timeout=20)
        print('fetched', url)
    except urllib.error.HTTPError as e:
        print('HTTPError', e.code, e.read().decode().strip())
    except urllib.error.URLError as e:
        print('URLError', e.reason)
)");
  EXPECT_THAT(py.stdout_text, HasSubstr("HTTPError 403 " + http_line));
  EXPECT_THAT(py.stdout_text, HasSubstr("URLError Tunnel connection failed: 403"));
  EXPECT_THAT(py.stdout_text, HasSubstr(https_line));
}

TEST_F(EgressNetns, AllowlistedNamesThatResolveInsideAreRefused) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"meta.test", "resolves to 169.254.169.254 (link-local)"},
      {"private.test", "resolves to 10.0.0.1 (private (RFC 1918))"},
      {"self.test", "resolves to 127.0.0.1 (loopback)"},
      // The server's own address in its namespace.
      {"own.test", "resolves to 203.0.113.1 (the host's own address)"},
  };
  for (const auto& [host, why] : cases) {
    Run r = RunCommand(std::string(kCurl) + "http://" + host + "/latest/meta-data/");
    EXPECT_EQ(r.stdout_text, "mcpcell: egress to " + host + ":80 denied: " + why + "\n")
        << r.model_text;
    Run tls = RunCommand(std::string(kCurl) + "https://" + host + "/");
    EXPECT_NE(tls.exit_code, 0);
    EXPECT_THAT(tls.model_text, HasSubstr("mcpcell: egress to " + host + ":443 denied: " + why));
  }
}

TEST_F(EgressNetns, TlsWhoseSniDiffersFromTheConnectHostIsCut) {
  Run r = RunPython(R"(
import socket, ssl
ctx = ssl.create_default_context(cafile='/workspace/ca.pem')
for sni in ('allowed.test', 'other.test'):
    s = socket.create_connection(('127.0.0.1', 3128), timeout=20)
    s.sendall(b'CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n')
    head = b''
    while b'\r\n\r\n' not in head:
        head += s.recv(1)
    try:
        t = ctx.wrap_socket(s, server_hostname=sni)
        t.sendall(b'GET /sni HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n')
        print(sni, 'ok', t.recv(4096).split(b'\r\n')[0].decode())
    except (ssl.SSLError, OSError) as e:
        print(sni, 'refused', type(e).__name__)
)");
  EXPECT_THAT(r.stdout_text, HasSubstr("allowed.test ok HTTP/1.1 200"));
  EXPECT_THAT(r.stdout_text, HasSubstr("other.test refused"));
  auto events = AuditUntil([](const Json& e) {
    return e.value("host", "") == "allowed.test" && e.value("decision", "") == "deny" &&
           e.value("reason", "").find("SNI") != std::string::npos;
  });
  bool sni_event = false;
  for (const Json& e : events)
    sni_event = sni_event || (e.value("decision", "") == "deny" &&
                              e.value("reason", "").find("SNI") != std::string::npos);
  EXPECT_TRUE(sni_event) << "no SNI refusal in the audit file";
}

TEST_F(EgressNetns, NothingBypassesTheProxy) {
  // A direct connection ignoring the proxy: the cell has only loopback.
  Run direct = RunCommand("curl -sS --noproxy '*' --max-time 5 http://203.0.113.2/");
  EXPECT_EQ(direct.exit_code, 7) << direct.model_text;  // curl: couldn't connect
  EXPECT_THAT(direct.stderr_text, HasSubstr("Couldn't connect to server"));
  Run py = RunPython(R"(
import errno, socket
def attempt(name, fn):
    try:
        fn()
        print(name, 'worked')
    except socket.gaierror as e:
        print(name, 'gaierror')
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
def tcp():
    socket.create_connection(('203.0.113.2', 80), timeout=5)
def udp():
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('203.0.113.2', 53))
def dns():
    socket.getaddrinfo('allowed.test', 80)
def packet():
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
def raw():
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
for name, fn in (('tcp', tcp), ('udp', udp), ('dns', dns), ('packet', packet), ('raw', raw)):
    attempt(name, fn)
)");
  EXPECT_EQ(py.exit_code, 0) << py.model_text;
  EXPECT_THAT(py.stdout_text, HasSubstr("tcp ENETUNREACH"));
  EXPECT_THAT(py.stdout_text, HasSubstr("udp ENETUNREACH"));
  EXPECT_THAT(py.stdout_text, HasSubstr("dns gaierror"));
  EXPECT_THAT(py.stdout_text, Not(HasSubstr("worked")));
  EXPECT_THAT(py.stdout_text, testing::ContainsRegex("packet (EPERM|EAFNOSUPPORT|EACCES)"));
  EXPECT_THAT(py.stdout_text, testing::ContainsRegex("raw (EPERM|EAFNOSUPPORT|EACCES)"));
}

TEST_F(EgressNetns, WildcardAndPortRules) {
  Run sub = RunCommand(std::string(kCurl) + "--fail-with-body https://a.wild.test:8443/w");
  EXPECT_EQ(sub.stdout_text, "upstream 8443 host=a.wild.test:8443 path=/w\n") << sub.model_text;
  Run ported = RunCommand(std::string(kCurl) + "--fail-with-body http://ports.test:8080/p");
  EXPECT_EQ(ported.stdout_text, "upstream 8080 host=ports.test:8080 path=/p\n")
      << ported.model_text;
  const std::vector<std::pair<std::string, std::string>> denied = {
      {"https://wild.test:8443/", "wild.test:8443"},      // *.x is subdomains only
      {"https://a.wild.test/", "a.wild.test:443"},        // the entry names :8443 only
      {"http://ports.test/", "ports.test:80"},            // the entry names :8080 only
      {"http://allowed.test:8080/", "allowed.test:8080"}  // no port: 80 and 443 only
  };
  for (const auto& [url, target] : denied) {
    Run r = RunCommand(std::string(kCurl) + url);
    EXPECT_THAT(r.model_text, HasSubstr("mcpcell: egress to " + target +
                                        " denied: not in the policy's allowlist"))
        << url;
  }
}

TEST_F(EgressNetns, AuditFileAndSessionInfoAccountForTraffic) {
  Run big = RunCommand(std::string(kCurl) +
                       "--fail-with-body -o /dev/null -w '%{size_download}' "
                       "https://allowed.test/bytes/200000");
  EXPECT_EQ(big.stdout_text, "200000") << big.model_text;
  Run refused = RunCommand(std::string(kCurl) + "http://denied.test/audit");
  auto events = AuditUntil([](const Json& e) {
    return e.value("host", "") == "denied.test" && e.value("decision", "") == "deny";
  });
  bool allow_big = false, deny = false;
  for (const Json& e : events) {
    if (e.value("host", "") == "allowed.test" && e.value("decision", "") == "allow" &&
        e.value("method", "") == "CONNECT" && e.value("bytes_down", 0) > 200000 &&
        e.value("address", "") == kUpstreamAddr)
      allow_big = true;
    if (e.value("host", "") == "denied.test" && e.value("decision", "") == "deny" &&
        e.value("reason", "") == "not in the policy's allowlist" && e.value("port", 0) == 80)
      deny = true;
    EXPECT_FALSE(e.value("session", "").empty()) << e.dump();
  }
  EXPECT_TRUE(allow_big) << "no allow event with the transfer's bytes";
  EXPECT_TRUE(deny) << "no deny event for denied.test";

  Json info = client_->Call("session_info", Json::object());
  ASSERT_TRUE(info.contains("structuredContent")) << info.dump();
  const Json& egress = info["structuredContent"]["egress"];
  EXPECT_GT(egress.value("bytes_down", 0), 200000) << egress.dump();
  EXPECT_GT(egress.value("bytes_up", 0), 0) << egress.dump();
  EXPECT_GE(egress.value("connections_total", 0), 2) << egress.dump();
  EXPECT_GT(egress.value("connections_refused", 0), 0) << egress.dump();
  EXPECT_EQ(egress.value("connections_active", -1), 0) << egress.dump();
  EXPECT_THAT(Text(info), HasSubstr("bytes down"));
  EXPECT_THAT(Text(info), HasSubstr("allowed.test"));
}

}  // namespace
