// egress_bench: what going through the egress proxy costs, next to the same transfer
// without it, in the same run.
//
// An upstream on 127.0.0.1 serves a bulk body (default 256 MiB) and a 1-byte body, both
// as plain HTTP and after a TLS-looking ClientHello (what a CONNECT tunnel carries; no
// crypto on either side, so the proxy's copying is all that differs). Interleaved round
// by round, so machine noise hits every row alike:
//   bulk     direct HTTP   vs  via proxy (GET http://127.0.0.1:port/)
//   bulk     direct raw    vs  via proxy (CONNECT 127.0.0.1:port, then the ClientHello)
//   upload   direct POST   vs  via proxy (POST http://127.0.0.1:port/, the body going up)
//   set-up   connect -> first body byte of the 1-byte body, direct vs via proxy (both forms)
// and prints medians, the throughput ratios (target >= 0.8) and the set-up overhead in ms.
// The proxy runs in this process on its own thread(s), the upstream on its own threads.
// Then the TLS rows (tls_rows.h): the CONNECT tunnel and TLS interception for a placeholder
// secret, real TLS on both sides, --tls-mib MiB per download (exit status 3 when one of
// their targets is missed).
//
// Usage: egress_bench [--mib N] [--rounds N] [--setup N] [--buffer-kib N] [--threads N]
//                     [--rate-mib N] [--rows plain|tls|all] [--tls-mib N]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/egress/bench_net.h"
#include "bench/egress/tls_rows.h"
#include "egress/proxy.h"

namespace {

using namespace egress_bench;
constexpr size_t kIoBuffer = 256 * 1024;

// Reads exactly n bytes into buf (or throws).
void RecvExactly(int fd, char* buf, size_t n) {
  while (n > 0) {
    ssize_t r = recv(fd, buf, n, 0);
    if (r <= 0) throw std::runtime_error("recv: connection ended early");
    buf += r;
    n -= static_cast<size_t>(r);
  }
}

// A minimal but well-formed TLS 1.2-style ClientHello record carrying SNI `name`.
std::string ClientHello(const std::string& name) {
  auto u16 = [](std::string& s, size_t v) {
    s.push_back(static_cast<char>(v >> 8));
    s.push_back(static_cast<char>(v & 0xff));
  };
  std::string sni;
  u16(sni, name.size() + 3);
  sni.push_back(0);
  u16(sni, name.size());
  sni += name;
  std::string ext;
  u16(ext, 0);
  u16(ext, sni.size());
  ext += sni;
  std::string body("\x03\x03", 2);
  body += std::string(32, '\x01');
  body.push_back(0);                           // session id
  body += std::string("\x00\x02\x13\x01", 4);  // one cipher suite
  body += std::string("\x01\x00", 2);          // null compression
  u16(body, ext.size());
  body += ext;
  std::string hs("\x01", 1);
  hs.push_back(0);
  u16(hs, body.size());
  hs += body;
  std::string record("\x16\x03\x01", 3);
  u16(record, hs.size());
  return record + hs;
}

// Serves `size` bytes per connection: after an HTTP head (with a response head) or after a
// ClientHello record (raw bytes).
class Upstream {
 public:
  // rate_mib: pace the body at this many MiB/s (0: as fast as loopback goes), to model a
  // real link.
  Upstream(uint64_t size, uint64_t rate_mib) : size_(size), rate_mib_(rate_mib) {
    fd_ = Listen(&port_);
    thread_ = std::thread([this] {
      for (;;) {
        int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) return;
        std::thread(&Upstream::Serve, this, c).detach();
      }
    });
  }
  ~Upstream() {
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(fd_);
  }
  uint16_t port() const { return port_; }

 private:
  void Serve(int c) {
    try {
      int one = 1;
      setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      char first;
      if (recv(c, &first, 1, MSG_PEEK) != 1) throw std::runtime_error("peek");
      if (first == 0x16) {
        char hdr[5];
        RecvExactly(c, hdr, 5);
        std::string rest((static_cast<uint8_t>(hdr[3]) << 8) | static_cast<uint8_t>(hdr[4]), '\0');
        RecvExactly(c, rest.data(), rest.size());
      } else {
        std::string request = RecvHead(c);
        if (request.compare(0, 5, "POST ") == 0) return Absorb(c, request);
        std::string head = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(size_) +
                           "\r\nConnection: close\r\n\r\n";
        SendAll(c, head.data(), head.size());
      }
      static const std::vector<char> chunk(kIoBuffer, 'x');
      auto start = Clock::now();
      for (uint64_t left = size_, sent = 0; left > 0;) {
        size_t n = static_cast<size_t>(std::min<uint64_t>(left, chunk.size()));
        SendAll(c, chunk.data(), n);
        left -= n;
        sent += n;
        if (rate_mib_ > 0)
          std::this_thread::sleep_until(
              start + std::chrono::microseconds(sent * 1000000 / (rate_mib_ << 20)));
      }
    } catch (const std::exception&) {
    }
    close(c);
  }
  // An upload: reads the body (Content-Length bytes), answers one byte.
  void Absorb(int c, const std::string& head) {
    try {
      size_t at = head.find("Content-Length: ");
      uint64_t left = at == std::string::npos ? 0 : std::stoull(head.substr(at + 16));
      std::vector<char> buf(kIoBuffer);
      while (left > 0) {
        ssize_t r =
            recv(c, buf.data(), static_cast<size_t>(std::min<uint64_t>(left, buf.size())), 0);
        if (r <= 0) throw std::runtime_error("upload ended early");
        left -= static_cast<uint64_t>(r);
      }
      static const std::string kAnswer =
          "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx";
      SendAll(c, kAnswer.data(), kAnswer.size());
    } catch (const std::exception&) {
    }
    close(c);
  }
  uint64_t size_, rate_mib_;
  int fd_;
  uint16_t port_;
  std::thread thread_;
};

enum class Path { kDirectHttp, kProxyHttp, kDirectRaw, kProxyConnect, kDirectPost, kProxyPost };

// An upload of `size` bytes; returns the ms from connect to the answer's byte.
double Upload(Path path, uint16_t upstream, uint16_t proxy, uint64_t size) {
  static const std::vector<char> chunk(kIoBuffer, 'u');
  std::string up = "127.0.0.1:" + std::to_string(upstream);
  auto t0 = Clock::now();
  int fd = Connect(path == Path::kDirectPost ? upstream : proxy);
  std::string req = "POST " + (path == Path::kProxyPost ? "http://" + up : std::string()) +
                    "/ HTTP/1.1\r\nHost: " + up + "\r\nContent-Length: " + std::to_string(size) +
                    "\r\n\r\n";
  SendAll(fd, req.data(), req.size());
  for (uint64_t left = size; left > 0;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(left, chunk.size()));
    SendAll(fd, chunk.data(), n);
    left -= n;
  }
  std::string head = RecvHead(fd);
  if (head.compare(0, 12, "HTTP/1.1 200") != 0) throw std::runtime_error("POST: " + head);
  char x;
  RecvExactly(fd, &x, 1);
  close(fd);
  return Ms(Clock::now() - t0);
}

// One transfer; returns {ms to the first body byte, ms for the whole body}.
std::pair<double, double> Transfer(Path path, uint16_t upstream, uint16_t proxy, uint64_t size,
                                   std::vector<char>& buf) {
  static const std::string kHello = ClientHello("bench.test");
  std::string up = "127.0.0.1:" + std::to_string(upstream);
  auto t0 = Clock::now();
  int fd = Connect(path == Path::kDirectHttp || path == Path::kDirectRaw ? upstream : proxy);
  std::string req;
  switch (path) {
    case Path::kDirectHttp:
      req = "GET / HTTP/1.1\r\nHost: " + up + "\r\n\r\n";
      break;
    case Path::kProxyHttp:
      req = "GET http://" + up + "/ HTTP/1.1\r\nHost: " + up + "\r\n\r\n";
      break;
    case Path::kDirectRaw:
      req = kHello;
      break;
    case Path::kProxyConnect:
      req = "CONNECT " + up + " HTTP/1.1\r\nHost: " + up + "\r\n\r\n";
      break;
    case Path::kDirectPost:
    case Path::kProxyPost:
      throw std::logic_error("uploads go through Upload()");
  }
  SendAll(fd, req.data(), req.size());
  if (path == Path::kProxyConnect) {
    std::string head = RecvHead(fd);
    if (head.compare(0, 12, "HTTP/1.1 200") != 0) throw std::runtime_error("CONNECT: " + head);
    SendAll(fd, kHello.data(), kHello.size());
  }
  if (path == Path::kDirectHttp || path == Path::kProxyHttp) {
    std::string head = RecvHead(fd);
    if (head.compare(0, 12, "HTTP/1.1 200") != 0) throw std::runtime_error("GET: " + head);
  }
  RecvExactly(fd, buf.data(), 1);
  auto t1 = Clock::now();
  for (uint64_t left = size - 1; left > 0;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
    ssize_t r = recv(fd, buf.data(), n, 0);
    if (r <= 0) throw std::runtime_error("recv body");
    left -= static_cast<uint64_t>(r);
  }
  auto t2 = Clock::now();
  close(fd);
  return {Ms(t1 - t0), Ms(t2 - t0)};
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t mib = 256, rate_mib = 0;
  uint64_t tls_mib = 64;
  int rounds = 5, setup = 300, buffer_kib = 64, threads = 1;
  std::string rows = "all";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    int v = std::atoi(argv[i + 1]);
    if (flag == "--rows")
      rows = argv[i + 1];
    else if (flag == "--tls-mib")
      tls_mib = static_cast<uint64_t>(v);
    else if (flag == "--mib")
      mib = static_cast<uint64_t>(v);
    else if (flag == "--rounds")
      rounds = v;
    else if (flag == "--setup")
      setup = v;
    else if (flag == "--buffer-kib")
      buffer_kib = v;
    else if (flag == "--threads")
      threads = v;
    else if (flag == "--rate-mib")
      rate_mib = static_cast<uint64_t>(v);
    else {
      std::fprintf(stderr,
                   "usage: %s [--mib N] [--rounds N] [--setup N] [--buffer-kib N] [--threads N] "
                   "[--rate-mib N] [--rows plain|tls|all] [--tls-mib N]\n",
                   argv[0]);
      return 2;
    }
  }
  if (rows != "plain" && rows != "tls" && rows != "all") {
    std::fprintf(stderr, "egress_bench: --rows must be plain, tls or all, not %s\n", rows.c_str());
    return 2;
  }
  try {
    if (rows == "tls") return RunTlsRows(tls_mib, rounds, setup) ? 0 : 3;
    using mcpcell::egress::Allowlist;
    const uint64_t bulk_size = mib << 20;
    Upstream bulk(bulk_size, rate_mib), tiny(1, 0);
    mcpcell::egress::EgressProxyOptions options;
    options.threads = threads;
    options.buffer_size = static_cast<size_t>(buffer_kib) * 1024;
    std::atomic<uint64_t> events{0};
    options.audit = [&events](const nlohmann::json&) { events++; };
    mcpcell::egress::EgressProxy proxy(std::move(options));
    mcpcell::egress::CellEgress cell;
    cell.session_id = "bench";
    // Loopback is refused unless named: the bench names its two upstream ports.
    auto allow = Allowlist::Parse(
        {"127.0.0.1:" + std::to_string(bulk.port()), "127.0.0.1:" + std::to_string(tiny.port())});
    if (!allow) throw std::runtime_error(allow.error().message);
    cell.allowlist = allow.value();
    uint16_t proxy_port;
    int listen_fd = Listen(&proxy_port);
    auto id = proxy.AddCell(listen_fd, cell);
    if (!id) throw std::runtime_error(id.error().message);

    std::vector<char> buf(kIoBuffer);
    constexpr int kRows = 6;
    const Path kPaths[kRows] = {Path::kDirectHttp,   Path::kProxyHttp,  Path::kDirectRaw,
                                Path::kProxyConnect, Path::kDirectPost, Path::kProxyPost};
    const char* kNames[kRows] = {
        "direct HTTP",   "proxy GET http://",    "direct raw (ClientHello)",
        "proxy CONNECT", "direct POST (upload)", "proxy POST http://"};
    std::vector<double> bulk_ms[kRows], setup_ms[4], cpu_ms[kRows];
    auto bulk_transfer = [&](Path p) {
      if (p == Path::kDirectPost || p == Path::kProxyPost) {
        return Upload(p, bulk.port(), proxy_port, bulk_size);
      }
      return Transfer(p, bulk.port(), proxy_port, bulk_size, buf).second;
    };
    for (Path p : kPaths) bulk_transfer(p);  // warm-up
    for (int r = 0; r < rounds; ++r)
      for (int k = 0; k < kRows; ++k) {
        double cpu0 = ProcessCpuMs();
        bulk_ms[k].push_back(bulk_transfer(kPaths[k]));
        cpu_ms[k].push_back(ProcessCpuMs() - cpu0);
      }
    for (int r = 0; r < setup; ++r)
      for (int k = 0; k < 4; ++k)
        setup_ms[k].push_back(Transfer(kPaths[k], tiny.port(), proxy_port, 1, buf).first);

    std::printf(
        "bulk: %llu MiB x %d rounds, upstream %s, proxy buffer %d KiB, %d proxy thread(s)\n",
        static_cast<unsigned long long>(mib), rounds,
        rate_mib ? (std::to_string(rate_mib) + " MiB/s").c_str() : "unpaced", buffer_kib, threads);
    std::printf("%-26s %10s %8s %12s %14s\n", "", "median ms", "MiB/s", "CPU ms/GiB",
                "set-up p50 ms");
    double mibps[kRows], setup_p50[4], cpu_per_gib[kRows];
    for (int k = 0; k < kRows; ++k) {
      double ms = Median(bulk_ms[k]);
      mibps[k] = static_cast<double>(mib) / (ms / 1000.0);
      cpu_per_gib[k] = Median(cpu_ms[k]) * 1024.0 / static_cast<double>(mib);
      if (k < 4) {
        setup_p50[k] = Median(setup_ms[k]);
        std::printf("%-26s %10.1f %8.0f %12.0f %14.3f\n", kNames[k], ms, mibps[k], cpu_per_gib[k],
                    setup_p50[k]);
      } else {
        std::printf("%-26s %10.1f %8.0f %12.0f %14s\n", kNames[k], ms, mibps[k], cpu_per_gib[k],
                    "-");
      }
    }
    std::printf("\nthroughput ratio, proxy / direct (target >= 0.8):\n");
    std::printf("  plain HTTP   %.2f\n", mibps[1] / mibps[0]);
    std::printf("  CONNECT      %.2f\n", mibps[3] / mibps[2]);
    std::printf("  POST upload  %.2f\n", mibps[5] / mibps[4]);
    std::printf("proxy CPU per GiB relayed (process CPU, proxy row minus direct row):\n");
    std::printf("  plain HTTP   %.0f ms\n", cpu_per_gib[1] - cpu_per_gib[0]);
    std::printf("  CONNECT      %.0f ms\n", cpu_per_gib[3] - cpu_per_gib[2]);
    std::printf("  POST upload  %.0f ms\n", cpu_per_gib[5] - cpu_per_gib[4]);
    std::printf("connection set-up overhead (connect -> first body byte, p50):\n");
    std::printf("  plain HTTP   %+.3f ms\n", setup_p50[1] - setup_p50[0]);
    std::printf("  CONNECT      %+.3f ms\n", setup_p50[3] - setup_p50[2]);
    auto stats = proxy.RemoveCell(id.value());
    std::printf(
        "proxy counters: %llu connections, %llu refused, %llu MiB up, %llu MiB down, %llu audit "
        "events\n",
        static_cast<unsigned long long>(stats->connections_total),
        static_cast<unsigned long long>(stats->connections_refused),
        static_cast<unsigned long long>(stats->bytes_up >> 20),
        static_cast<unsigned long long>(stats->bytes_down >> 20),
        static_cast<unsigned long long>(events.load()));
    if (rows == "all" && !RunTlsRows(tls_mib, rounds, setup)) return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "egress_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
