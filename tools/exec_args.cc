#include "tools/exec_args.h"

#include "tools/tool_env.h"

namespace mcpcell::tools {
namespace {
// With the rest of the exec request, under the control protocol's frame cap (160 KiB).
constexpr size_t kMaxEnvBytes = 32 * 1024;
}  // namespace

ExecOptionArgs ReadExecOptionArgs(ArgReader& reader, bool cwd_and_env) {
  ExecOptionArgs args;
  if (cwd_and_env) {
    args.cwd = reader.OptionalString("cwd").value_or("");
    args.env = reader.OptionalStringMap("env");
  }
  args.stdin_data = reader.OptionalString("stdin").value_or("");
  args.timeout_s = reader.OptionalInteger("timeout_s");
  return args;
}

Status CheckExecOptionArgs(ExecOptionArgs& args) {
  if (auto e = NulByteError("cwd", args.cwd, "a path cannot hold one"); !e.empty())
    return Error::Msg(e);
  if (!args.cwd.empty() && args.cwd[0] != '/') args.cwd = "/workspace/" + args.cwd;
  size_t env_bytes = 0;
  for (const auto& [name, value] : args.env) {
    if (name.empty() || name.find('=') != std::string::npos || name.find('\0') != std::string::npos)
      return Error::Msg("arguments.env: invalid variable name \"" + name + "\"");
    if (auto e = NulByteError("env." + name, value, "an environment variable cannot hold one");
        !e.empty())
      return Error::Msg(e);
    env_bytes += name.size() + 1 + value.size() + 1;
  }
  if (env_bytes > kMaxEnvBytes)
    return Error::Msg("arguments.env: " + std::to_string(env_bytes) + " bytes in all, more than " +
                      std::to_string(kMaxEnvBytes));
  return Ok();
}

std::vector<std::string> EnvStrings(const ExecOptionArgs& args) {
  std::vector<std::string> out;
  out.reserve(args.env.size());
  for (const auto& [name, value] : args.env) out.push_back(name + "=" + value);
  return out;
}

}  // namespace mcpcell::tools
