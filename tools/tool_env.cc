#include "tools/tool_env.h"

#include <array>
#include <cerrno>

#include "sandbox/cell_channel.h"
#include "tools/client_log.h"

namespace mcpcell::tools {

const CellToolsConfig* ToolEnv::ConfigFor(const std::string& tenant) const {
  if (tenant.empty()) return &config;
  auto it = tenants.find(tenant);
  return it == tenants.end() ? nullptr : &it->second;
}

bool ToolEnv::ToolEnabled(const std::string& tenant, const std::string& name) const {
  const CellToolsConfig* c = ConfigFor(tenant);
  return c && c->Enables(name);
}

std::string ToolEnv::CellProfile(const std::string& tenant) const { return tenant; }

std::vector<const CellToolsConfig*> ToolEnv::AllConfigs() const {
  std::vector<const CellToolsConfig*> all = {&config};
  for (const auto& [name, c] : tenants) all.push_back(&c);
  return all;
}

const CellToolsConfig* SessionConfig(const ToolEnv& env, const mcp::Context& ctx) {
  return env.ConfigFor(ctx.session().tenant());
}

Result<std::shared_ptr<sandbox::CellSession>> SessionCells(const ToolEnv& env,
                                                                    const mcp::Context& ctx) {
  const std::string& tenant = ctx.session().tenant();
  if (!env.ConfigFor(tenant)) {
    return Error::Msg("no policy is configured for tenant \"" + tenant + "\"");
  }
  return env.cells->Get(ctx.session().id(), env.CellProfile(tenant));
}

LeaseOrError AcquireCell(const ToolEnv& env, mcp::Context& ctx) {
  LeaseOrError out;
  out.config = SessionConfig(env, ctx);
  auto session = SessionCells(env, ctx);
  if (!session) {
    out.error = mcp::ToolResult::Error(session.error().message +
                                       ". Start a new MCP session to get a new cell.");
    return out;
  }
  auto lease = (*session)->Acquire();
  if (!lease) {
    const std::string& why = lease.error().message;
    const bool ended = why.rfind("the session has ended", 0) == 0;
    out.error = mcp::ToolResult::Error(
        why + (ended ? ". Start a new MCP session to get a new cell."
                     : ". The sandbox could not be prepared; retry once, and if it fails again "
                       "report this message to the operator (`mcpcell doctor` checks the "
                       "host)."));
    return out;
  }
  out.lease.emplace(std::move(lease).value());
  // The client hears it too (the tools put the replacement in their result for the model).
  if (!out.lease->replaced_reason().empty())
    LogCallWarning(ctx, kEventCellReplaced, out.lease->replaced_reason());
  if (!out.lease->lifetime_notice().empty())
    LogCallWarning(ctx, kEventSessionEnding, out.lease->lifetime_notice());
  return out;
}

std::string NulByteError(const std::string& field, std::string_view value, const std::string& why) {
  const size_t at = value.find('\0');
  if (at == std::string_view::npos) return "";
  return "arguments." + field + ": contains a NUL byte at offset " + std::to_string(at) + "; " +
         why;
}

namespace {
std::string HintFor(const Error& error) {
  switch (error.err) {
    case ENOENT:
      return "Check the path with list_files (relative paths start at /workspace).";
    case ENOTDIR:
      return "A component of the path is a file, not a directory; check it with list_files.";
    case EISDIR:
      return "The path is a directory; use list_files to see what is in it.";
    case EACCES:
    case EPERM:
      return "The sandbox's user may not do that there; work under /workspace or /tmp.";
    case ELOOP:
      return "The path goes through too many symbolic links (or a loop of them).";
    case ENAMETOOLONG:
      return "Use a shorter path.";
    default:
      return "";
  }
}
}  // namespace

mcp::ToolResult SandboxError(const std::string& what, const Error& error,
                             const std::string& hint) {
  std::string text = what + " failed: " + error.message + ".";
  if (!hint.empty()) text += " " + hint;
  return mcp::ToolResult::Error(std::move(text));
}

mcp::ToolResult PathError(const std::string& what, const Error& error,
                          const std::string& hint) {
  return SandboxError(what, error, hint.empty() ? HintFor(error) : hint);
}

namespace {
// Length of the valid UTF-8 sequence at s[i], or 0 when invalid (overlongs, surrogates
// and code points above U+10FFFF are invalid, as nlohmann/json's dump requires).
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if ((c & 0xE0) == 0xC0)
    n = 2, cp = c & 0x1F;
  else if ((c & 0xF0) == 0xE0)
    n = 3, cp = c & 0x0F;
  else if ((c & 0xF8) == 0xF0)
    n = 4, cp = c & 0x07;
  else
    return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}
}  // namespace

std::string ToValidUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    size_t n = Utf8SequenceLength(bytes, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(bytes.substr(i, n));
      i += n;
    }
  }
  return out;
}

bool LooksBinary(std::string_view bytes) {
  std::string_view sample = bytes.substr(0, 64 * 1024);
  if (sample.find('\0') != std::string_view::npos) return true;
  for (size_t i = 0; i < sample.size();) {
    size_t n = Utf8SequenceLength(sample, i);
    if (n == 0) {
      // A multi-byte character cut by the end of the sample is not evidence of binary.
      bool cut_by_sample = sample.size() < bytes.size() && i + 4 > sample.size();
      return !cut_by_sample;
    }
    i += n;
  }
  return false;
}

namespace {
constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
}

std::string Base64Encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int k = 3; k >= 0; --k) out += kAlphabet[(v >> (6 * k)) & 63];
  }
  if (size_t rest = in.size() - i; rest > 0) {
    uint32_t v = uint8_t(in[i]) << 16;
    if (rest == 2) v |= uint8_t(in[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

Result<std::string> Base64Decode(std::string_view text) {
  std::array<int, 256> value;
  value.fill(-1);
  for (int k = 0; k < 64; ++k) value[static_cast<unsigned char>(kAlphabet[k])] = k;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  size_t padding = 0, symbols = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = text[i];
    if (c == '\n' || c == '\r' || c == ' ' || c == '\t') continue;
    if (c == '=') {
      ++padding;
      continue;
    }
    if (padding > 0 || value[c] < 0) {
      return Error::Msg("invalid base64 at character " + std::to_string(i) +
                                 (padding > 0 ? " (data after '=' padding)" : ""));
    }
    ++symbols;
    acc = (acc << 6) | value[c];
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  if ((symbols + padding) % 4 != 0 || padding > 2 || symbols % 4 == 1)
    return Error::Msg("invalid base64: length is not a multiple of 4 with padding");
  return out;
}

Result<std::string> ReadCellFile(const sandbox::CellLease& channel, const std::string& path,
                                 uint64_t max_bytes, uint64_t* size) {
  auto st = channel.Stat(path, /*follow_symlinks=*/true);
  if (!st) return st.error();
  if (st->type == sandbox::control::FileType::kDirectory)
    return Error::Msg(path + " is a directory (use list_files)");
  if (st->type != sandbox::control::FileType::kRegular)
    return Error::Msg(path + " is not a regular file");
  if (size) *size = st->size;
  return channel.ReadFile(path, max_bytes);
}

}  // namespace mcpcell::tools
