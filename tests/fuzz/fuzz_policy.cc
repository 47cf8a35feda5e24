// fuzz_policy: the strict policy loader (TOML text -> Policy) and what the server does next
// with a policy it accepted: compile it to a CellSpec, describe it, summarise its network.
//
// Properties checked beyond "no crash": a policy the loader accepts compiles (or is refused
// with an error, never a crash), and its description (DescribePolicy: "the effective policy
// as a profile file, every key") loads again to the same description, so `mcpcell policy`
// never prints a profile that would not load or would mean something else.
//
// The mount checks resolve host paths (realpath), which only reads the file system.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "policies/compiler.h"
#include "policies/loader.h"

namespace {

using namespace mcpcell::policies;

constexpr const char* kStateDir = "/var/lib/mcpcell-fuzz";

[[noreturn]] void Fail(const std::string& what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_policy: %s\n%s\n", what.c_str(), detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  const LoadOptions options{.state_dir = kStateDir};
  auto policy = ParsePolicy(text, "fuzz.toml", options);
  if (!policy) return 0;

  (void)CompileCellSpec(*policy, "fuzz-cell", kStateDir, std::string(kStateDir) + "/template");
  (void)NetworkSummary(*policy);

  const std::string described = DescribePolicy(*policy);
  // Same source name: the description names it in its first line.
  auto again = ParsePolicy(described, "fuzz.toml", options);
  if (!again)
    Fail("DescribePolicy printed a profile that does not load: " + again.error().message,
         described);
  if (DescribePolicy(*again) != described) Fail("DescribePolicy does not round-trip", described);
  return 0;
}
