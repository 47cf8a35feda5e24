// upload_archive's `url`: the archive fetched from the network instead of sent base64.
//
// The fetch runs in the session's own cell, as the sandbox user, through the cell's
// egress proxy (HTTP_PROXY/HTTPS_PROXY of the cell's environment), so it is the cell's
// traffic in every respect: the policy's allowlist and address rules decide (a refused
// host gets the proxy's one-line reason, which the error quotes), the proxy audits the
// connection with the session and tenant, placeholder secrets are handled as for any
// program of the cell, and the cell's limits and the call's timeout and cancellation
// apply. The fetcher is a short python3 program (python3 -I, standard library only);
// it refuses a declared Content-Length over the cap before reading the body and stops
// reading as soon as the body passes it, so an oversized archive costs at most the cap
// plus one read. The bytes come back on its stdout and are extracted exactly as `data`
// is (archive_tools.cc). Redirects are followed (urllib, at most 10), each hop through
// the proxy again.
// Pure functions, any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "sandbox/backend.h"

namespace mcpcell::tools {

// The URL as upload_archive accepts it: http:// or https://, a host, no user:password@
// (credentials would travel to the proxy and into audit records; use a placeholder secret
// in a header-free URL instead), no spaces or control characters, at most 4096 bytes.
// The error names arguments.url and what is wrong.
Status CheckArchiveUrl(const std::string& url);

// The most a URL may deliver: the policy's limits.archive_bytes, and never more than the
// server holds in memory for one call between the fetch and the extraction.
uint64_t ArchiveUrlCap(uint64_t policy_archive_bytes);

// The argv that fetches `url` in the cell, writing at most `cap` bytes to stdout.
std::vector<std::string> ArchiveFetchArgv(const std::string& url, uint64_t cap);

// The archive from the fetcher's exec (exited; not killed, cancelled or timed out: the
// caller said so already), or an error saying why not in words the model can act on:
// a refusal by the egress policy (with the proxy's line, and `refusals`, the proxy's
// lines for the session during the fetch), an HTTP status, a body over `cap`, no python3
// in the cell, or a network failure.
Result<std::string> ArchiveFetchOutcome(const sandbox::ExecResult& exec, const std::string& url,
                                        uint64_t cap, const std::vector<std::string>& refusals);

}  // namespace mcpcell::tools
