// The strict policy loader: a profile's TOML text -> a checked Policy.
//
// Nothing is silently ignored: unknown keys, wrong types, bad units and impossible values
// are refused with "<file>:<line>:<column>: <key path>: <what>", e.g.
//   my.toml:4:10: limits.memory: expected a size like "512MiB", got "lots"
// Dangerous mounts are refused with the reason (policies/mount_check.h). The shipped
// profiles (policies/*.toml) are compiled into the binary and found by name.
// Threading: stateless functions; safe from any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "policies/policy.h"

namespace mcpcell::policies {

struct LoadOptions {
  // The server's state dir: mounting it, or anything around it, is refused. May be empty.
  std::string state_dir;
  // A tenant's policy (HTTP config): its [audit] may set only `commands`, the rest being
  // server-wide.
  bool tenant = false;
};

// Parses and checks `text`; `source_name` names it in errors (usually the file path).
Result<Policy> ParsePolicy(std::string_view text, const std::string& source_name,
                           const LoadOptions& options = {});
// Reads `path` and parses it.
Result<Policy> LoadPolicyFile(const std::string& path, const LoadOptions& options = {});

// The shipped profiles, by name ("default", "offline-strict", "dev").
std::vector<std::string> ShippedPolicyNames();
// The text of a shipped profile, or empty when there is none by that name.
std::string_view ShippedPolicyText(const std::string& name);

// A shipped profile's name, or a file path (anything with a '/' or ending in ".toml").
Result<Policy> ResolvePolicy(const std::string& name_or_file, const LoadOptions& options = {});

}  // namespace mcpcell::policies
