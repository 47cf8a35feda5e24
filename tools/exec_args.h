// The arguments run_code and run_command share: stdin and timeout_s (both tools), cwd and
// env (run_command). One reader and one set of checks for both, so the two tools refuse
// the same things in the same words (`arguments.env.A: contains a NUL byte at offset 1`).
// Threading: plain values, read on the handler's thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "tools/tool_args.h"

namespace mcpcell::tools {

struct ExecOptionArgs {
  std::string cwd;  // "" = /workspace; CheckExecOptionArgs makes a relative one absolute
  std::vector<std::pair<std::string, std::string>> env;  // NAME, value
  std::string stdin_data;
  std::optional<int64_t> timeout_s;  // nullopt: the session's default
};

// Reads stdin and timeout_s, and cwd and env when the tool offers them; a field of the
// wrong type is a violation in `reader`.
ExecOptionArgs ReadExecOptionArgs(ArgReader& reader, bool cwd_and_env);

// What the schema cannot say: no NUL byte in cwd or an env value, env names that are
// names, the environment's total size. The first failure, named; `args.cwd` is made
// absolute (under /workspace) when it passes.
Status CheckExecOptionArgs(ExecOptionArgs& args);

// NAME=VALUE, as execve takes them.
std::vector<std::string> EnvStrings(const ExecOptionArgs& args);

}  // namespace mcpcell::tools
