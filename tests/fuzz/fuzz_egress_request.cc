// fuzz_egress_request: the egress proxy's parsers, which read what a sandboxed program (or
// the policy author) wrote: the proxy request head, the TLS ClientHello's SNI, allowlist
// entries, hosts(5) tables, authorities and IP literals.
//
// Every parser sees every input (they are cheap and pure), so one corpus of request heads,
// ClientHellos, allowlists and hosts files serves all of them. Besides "no crash", the
// properties the proxy relies on are checked:
//   - the head forwarded upstream ends exactly at its blank line, has only CRLF line ends
//     and no Transfer-Encoding (nothing the client sent can become a second request);
//   - a parsed request always has a port;
//   - an IP literal prints back to text that parses to the same address;
//   - an allowlist entry that parses is found again by the list made from it.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "egress/address.h"
#include "egress/allowlist.h"
#include "egress/host.h"
#include "egress/hosts_file.h"
#include "egress/http_request.h"
#include "egress/tls_sni.h"

namespace {

using namespace mcpcell::egress;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_egress_request: %s\n", what.c_str());
  std::abort();
}

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty() && lines.size() < 64) {
    size_t end = text.find('\n');
    lines.push_back(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
  }
  return lines;
}

void CheckForwardedHead(const ProxyRequest& request) {
  const std::string head = ForwardedHead(request);
  if (FindHeadEnd(head) != head.size()) Fail("forwarded head does not end at its blank line");
  for (size_t i = 0; i < head.size(); ++i) {
    if (head[i] == '\r' && (i + 1 == head.size() || head[i + 1] != '\n'))
      Fail("forwarded head has a bare CR");
    if (head[i] == '\n' && (i == 0 || head[i - 1] != '\r')) Fail("forwarded head has a bare LF");
  }
  for (const HttpHeader& h : request.headers) {
    if (EqualsIgnoreCase(h.name, "transfer-encoding")) Fail("accepted Transfer-Encoding");
  }
}

void FuzzRequestHead(std::string_view data) {
  size_t end = FindHeadEnd(data);
  if (end > data.size()) Fail("FindHeadEnd beyond the data");
  auto request = ParseProxyRequest(end ? data.substr(0, end) : data);
  if (!request) return;
  if (!request->target.port) Fail("parsed request without a port");
  if (!request->is_connect) CheckForwardedHead(*request);
}

void FuzzSni(std::string_view data) {
  SniResult sni = ExtractSni(data);
  if (sni.kind == SniResult::Kind::kName) (void)ParseHost(sni.value);
}

void FuzzAddressesAndAuthorities(const std::vector<std::string_view>& lines) {
  const std::vector<IpAddress> host_addresses = {IpAddress::V4(192, 0, 2, 1)};
  for (std::string_view line : lines) {
    if (auto ip = IpAddress::Parse(line)) {
      auto again = IpAddress::Parse(ip->ToString());
      if (!again || !(*again == *ip))
        Fail("IP literal does not survive ToString: " + ip->ToString());
      (void)ClassifyAddress(*ip, host_addresses);
    }
    if (auto authority = ParseAuthority(line)) (void)authority->host.Display();
    (void)ParsePort(line);
  }
}

void FuzzAllowlist(const std::vector<std::string_view>& lines) {
  std::vector<std::string> entries(lines.begin(), lines.end());
  auto list = Allowlist::Parse(entries);
  if (!list) return;
  for (const AllowEntry& e : list->entries()) {
    uint16_t port = e.port.value_or(443);
    if (e.kind == AllowEntry::Kind::kHost && !list->Match(e.name, port))
      Fail("allowlist does not match its own entry " + e.text);
    if (e.kind == AllowEntry::Kind::kAddress && !list->NamesAddress(e.address, port))
      Fail("allowlist does not name its own address " + e.text);
    (void)list->Match("www." + e.name, port);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  FuzzRequestHead(text);
  FuzzSni(text);
  const std::vector<std::string_view> lines = Lines(text);
  FuzzAddressesAndAuthorities(lines);
  FuzzAllowlist(lines);
  (void)ParseHostsFile(text, "fuzz");
  return 0;
}
