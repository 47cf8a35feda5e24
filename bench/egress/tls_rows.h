// The TLS rows of egress_bench (issue 26, Proof): one HTTPS upstream on 127.0.0.1 with a
// certificate from a test CA made here with OpenSSL, reached two ways through the proxy:
//   CONNECT tunnel   a cell without secrets: the proxy copies TLS bytes it cannot read; the
//                    client does TLS with the upstream (trusting the test CA)
//   interception     a cell with a placeholder secret granted for that host: the proxy ends
//                    the client's TLS with its own leaf (the client trusts the proxy's CA),
//                    substitutes the placeholder in an Authorization header, does TLS to the
//                    upstream (trusting the test CA through upstream_ca_file) and masks the
//                    response as it streams it back re-framed as chunked
// Throughput (a large download, median MiB/s) and connect -> first body byte (p50, TLS
// handshakes included), interleaved round by round; the targets are interception >= 0.5x
// the tunnel's throughput and <= 2 ms added time to first byte at p50.
#pragma once

#include <cstdint>

namespace egress_bench {

// Prints the table and the two figures against their targets; returns false when one of
// them misses its target. Throws std::runtime_error on a setup or transfer failure.
bool RunTlsRows(uint64_t mib, int rounds, int setup);

}  // namespace egress_bench
