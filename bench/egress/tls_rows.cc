#include "bench/egress/tls_rows.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "bench/egress/bench_net.h"
#include "egress/proxy.h"
#include "egress/tls_ca.h"

namespace egress_bench {
namespace {

using mcpcell::egress::CertificateAuthority;
constexpr size_t kChunk = 256 * 1024;
const char kHost[] = "bench.test";
const char kPlaceholder[] = "mcpcell-secret-b3b3b3b3b3b3b3b3";
const char kValue[] = "bench-real-token-value-0123456789";

using SslCtx = std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)>;

std::string SslError(const char* what) {
  char buf[256];
  ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
  return std::string(what) + ": " + buf;
}

// Reads an HTTP head over TLS, byte by byte (requests are small).
std::string SslReadHead(SSL* ssl) {
  std::string head;
  char c;
  while (head.find("\r\n\r\n") == std::string::npos) {
    if (SSL_read(ssl, &c, 1) != 1) throw std::runtime_error("TLS: connection ended in a head");
    head.push_back(c);
  }
  return head;
}

// HTTPS on 127.0.0.1 with a leaf of the test CA for kHost: GET /bulk answers `bulk` bytes,
// anything else 1 byte; Connection: close. Counts the requests that carried the real value.
class TlsUpstream {
 public:
  TlsUpstream(CertificateAuthority& ca, uint64_t bulk)
      : bulk_(bulk), ctx_(SSL_CTX_new(TLS_server_method()), SSL_CTX_free) {
    auto leaf = ca.LeafFor(kHost);
    if (!leaf) throw std::runtime_error("leaf: " + leaf.error().message);
    if (SSL_CTX_use_certificate(ctx_.get(), (*leaf)->cert.get()) != 1 ||
        SSL_CTX_use_PrivateKey(ctx_.get(), (*leaf)->key.get()) != 1)
      throw std::runtime_error(SslError("upstream certificate"));
    fd_ = Listen(&port_);
    thread_ = std::thread([this] {
      for (;;) {
        int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) return;
        std::thread(&TlsUpstream::Serve, this, c).detach();
      }
    });
  }
  ~TlsUpstream() {
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(fd_);
  }
  uint16_t port() const { return port_; }
  uint64_t real_values() const { return real_values_; }

 private:
  void Serve(int c) {
    int one = 1;
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    SSL* ssl = SSL_new(ctx_.get());
    SSL_set_fd(ssl, c);
    try {
      if (SSL_accept(ssl) != 1) throw std::runtime_error("accept");
      std::string head = SslReadHead(ssl);
      if (head.find(std::string("Bearer ") + kValue) != std::string::npos) real_values_++;
      uint64_t size = head.compare(0, 10, "GET /bulk ") == 0 ? bulk_ : 1;
      std::string reply = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(size) +
                          "\r\nConnection: close\r\n\r\n";
      SSL_write(ssl, reply.data(), static_cast<int>(reply.size()));
      static const std::string chunk(kChunk, 'x');
      for (uint64_t left = size; left > 0;) {
        int n = static_cast<int>(std::min<uint64_t>(left, chunk.size()));
        if (SSL_write(ssl, chunk.data(), n) != n) throw std::runtime_error("write");
        left -= static_cast<uint64_t>(n);
      }
      SSL_shutdown(ssl);
    } catch (const std::exception&) {
    }
    SSL_free(ssl);
    close(c);
  }

  uint64_t bulk_;
  SslCtx ctx_;
  int fd_;
  uint16_t port_;
  std::atomic<uint64_t> real_values_{0};
  std::thread thread_;
};

// Buffered reads from a TLS connection, for a response's framing.
class SslIn {
 public:
  explicit SslIn(SSL* ssl) : ssl_(ssl), buf_(kChunk) {}
  std::string Line() {
    std::string line;
    while (line.size() < 2 || line.compare(line.size() - 2, 2, "\r\n") != 0) line.push_back(Byte());
    return line;
  }
  // Reads and drops n bytes.
  void Skip(uint64_t n) {
    while (n > 0) {
      if (pos_ == end_) Fill();
      size_t take = static_cast<size_t>(std::min<uint64_t>(n, end_ - pos_));
      pos_ += take;
      n -= take;
    }
  }

 private:
  char Byte() {
    if (pos_ == end_) Fill();
    return buf_[pos_++];
  }
  void Fill() {
    int n = SSL_read(ssl_, buf_.data(), static_cast<int>(buf_.size()));
    if (n <= 0) throw std::runtime_error("TLS: response ended early");
    pos_ = 0;
    end_ = static_cast<size_t>(n);
  }
  SSL* ssl_;
  std::vector<char> buf_;
  size_t pos_ = 0, end_ = 0;
};

// A client context trusting only `ca_pem`.
SslCtx ClientContext(const std::string& ca_pem) {
  SslCtx ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  BIO* bio = BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size()));
  X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (!ca) throw std::runtime_error("CA PEM unreadable");
  X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx.get()), ca);
  X509_free(ca);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  return ctx;
}

// CONNECT through the proxy, TLS checking kHost, GET `path` with the placeholder in an
// Authorization header, the body read to its end (Content-Length or chunked). Returns {ms
// to the first body byte, ms for all}.
std::pair<double, double> Fetch(SSL_CTX* ctx, uint16_t proxy, uint16_t upstream, const char* path,
                                uint64_t size) {
  std::string authority = std::string(kHost) + ":" + std::to_string(upstream);
  auto t0 = Clock::now();
  int fd = Connect(proxy);
  std::string connect = "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n";
  SendAll(fd, connect.data(), connect.size());
  if (std::string h = RecvHead(fd); h.compare(0, 12, "HTTP/1.1 200") != 0)
    throw std::runtime_error("CONNECT: " + h);
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  SSL_set_tlsext_host_name(ssl, kHost);
  SSL_set1_host(ssl, kHost);
  if (SSL_connect(ssl) != 1) throw std::runtime_error(SslError("TLS to the proxy"));
  std::string req = std::string("GET ") + path + " HTTP/1.1\r\nHost: " + authority +
                    "\r\nAuthorization: Bearer " + kPlaceholder + "\r\nConnection: close\r\n\r\n";
  SSL_write(ssl, req.data(), static_cast<int>(req.size()));
  SslIn in(ssl);
  std::string head;
  for (std::string line = in.Line(); line != "\r\n"; line = in.Line()) head += line;
  if (head.compare(0, 12, "HTTP/1.1 200") != 0) throw std::runtime_error("GET: " + head);
  bool chunked = head.find("chunked") != std::string::npos;
  Clock::time_point t1{};
  uint64_t got = 0;
  while (got < size) {
    uint64_t n = chunked ? std::stoull(in.Line(), nullptr, 16) : size;
    if (n == 0) break;
    in.Skip(1);
    if (got == 0) t1 = Clock::now();
    in.Skip(n - 1 + (chunked ? 2 : 0));
    got += n;
  }
  auto t2 = Clock::now();
  if (got != size) throw std::runtime_error("body: " + std::to_string(got) + " bytes");
  SSL_free(ssl);
  close(fd);
  return {Ms(t1 - t0), Ms(t2 - t0)};
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

bool RunTlsRows(uint64_t mib, int rounds, int setup) {
  using namespace mcpcell::egress;
  signal(SIGPIPE, SIG_IGN);
  auto test_ca = CertificateAuthority::Create("egress_bench upstream CA");
  if (!test_ca) throw std::runtime_error(test_ca.error().message);
  struct TempDir {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("egress-bench-" + std::to_string(getpid()));
    TempDir() { std::filesystem::create_directories(path); }
    ~TempDir() { std::filesystem::remove_all(path); }
  } dir;
  std::string ca_file = (dir.path / "upstream-ca.pem").string();
  std::ofstream(ca_file) << (*test_ca)->certificate_pem();
  const uint64_t bulk_size = mib << 20;
  TlsUpstream upstream(**test_ca, bulk_size);
  std::atomic<uint64_t> substituted{0};
  EgressProxyOptions options;
  options.resolver = [](const std::string& host, ResolveDone done) {
    if (host == kHost) return done(std::vector<IpAddress>{*IpAddress::Parse("127.0.0.1")});
    done(mcpcell::Error::Msg("Host not found"));
  };
  options.host_addresses = std::vector<IpAddress>{};
  options.upstream_ca_file = ca_file;
  options.on_secret = [&substituted](const SecretEvent& e) {
    if (e.decision == "substituted") substituted++;
  };
  EgressProxy proxy(std::move(options));
  if (mcpcell::Status ready = proxy.InterceptionReady(); !ready)
    throw std::runtime_error("interception: " + ready.error().message);
  std::string authority = std::string(kHost) + ":" + std::to_string(upstream.port());
  auto add_cell = [&](const char* session, std::vector<SecretGrant> grants) {
    CellEgress cell;
    cell.session_id = session;
    cell.allowlist =
        Allowlist::Parse({authority, "127.0.0.1:" + std::to_string(upstream.port())}).value();
    cell.secrets = std::move(grants);
    uint16_t port;
    if (auto id = proxy.AddCell(Listen(&port), std::move(cell)); !id)
      throw std::runtime_error(id.error().message);
    return port;
  };
  SecretGrant grant;
  grant.name = "BENCH_TOKEN";
  grant.placeholder = kPlaceholder;
  grant.value = []() -> mcpcell::Result<std::string> { return std::string(kValue); };
  grant.hosts = Allowlist::Parse({authority}).value();
  const uint16_t tunnel_port = add_cell("tunnel", {});
  const uint16_t intercept_port = add_cell("intercept", {grant});

  SslCtx to_upstream = ClientContext((*test_ca)->certificate_pem());
  SslCtx to_proxy = ClientContext(proxy.InterceptionCaPem());
  struct Row {
    const char* name;
    SSL_CTX* ctx;
    uint16_t port;
    std::vector<double> bulk_ms, ttfb_ms, bulk_cpu, setup_cpu;
  } rows[] = {{"CONNECT tunnel (TLS e2e)", to_upstream.get(), tunnel_port, {}, {}, {}, {}},
              {"interception (TLS x2)", to_proxy.get(), intercept_port, {}, {}, {}, {}}};
  for (Row& row : rows) Fetch(row.ctx, row.port, upstream.port(), "/bulk", bulk_size);  // warm-up
  // Process CPU beside wall time: on a shared machine it shows what a row costs whatever
  // else runs.
  for (int r = 0; r < rounds; ++r)
    for (Row& row : rows) {
      double cpu0 = ProcessCpuMs();
      row.bulk_ms.push_back(Fetch(row.ctx, row.port, upstream.port(), "/bulk", bulk_size).second);
      row.bulk_cpu.push_back(ProcessCpuMs() - cpu0);
    }
  for (int r = 0; r < setup; ++r)
    for (Row& row : rows) {
      double cpu0 = ProcessCpuMs();
      row.ttfb_ms.push_back(Fetch(row.ctx, row.port, upstream.port(), "/tiny", 1).first);
      row.setup_cpu.push_back(ProcessCpuMs() - cpu0);
    }

  std::printf("\nTLS: %llu MiB x %d rounds, %d set-ups, HTTPS upstream with a test CA\n",
              static_cast<unsigned long long>(mib), rounds, setup);
  std::printf("%-26s %10s %8s %12s %12s %16s\n", "", "median ms", "MiB/s", "CPU ms/GiB",
              "TTFB p50 ms", "CPU ms/set-up");
  double mibps[2], ttfb[2];
  for (int k = 0; k < 2; ++k) {
    double ms = Median(rows[k].bulk_ms);
    mibps[k] = static_cast<double>(mib) / (ms / 1000.0);
    ttfb[k] = Median(rows[k].ttfb_ms);
    std::printf("%-26s %10.1f %8.0f %12.0f %12.3f %16.3f\n", rows[k].name, ms, mibps[k],
                Median(rows[k].bulk_cpu) * 1024.0 / static_cast<double>(mib), ttfb[k],
                Median(rows[k].setup_cpu));
  }
  double ratio = mibps[1] / mibps[0], added = ttfb[1] - ttfb[0];
  bool ok = ratio >= 0.5 && added <= 2.0;
  std::printf("throughput ratio, interception / tunnel (target >= 0.5): %.2f\n", ratio);
  std::printf("added time to first byte, p50 (target <= 2 ms): %+.3f ms\n", added);
  std::printf("placeholder substituted %llu times; upstream saw the real value %llu times\n",
              static_cast<unsigned long long>(substituted.load()),
              static_cast<unsigned long long>(upstream.real_values()));
  if (upstream.real_values() != static_cast<uint64_t>(1 + rounds + setup))
    throw std::runtime_error("interception did not substitute every request");
  return ok;
}

}  // namespace egress_bench
