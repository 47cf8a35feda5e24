// The run pool's wire protocol (see protocol.h).
#include "run_pool/protocol.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "base/fd_passing.h"
#include "sandbox/control/protocol.h"

namespace mcpcell::run_pool {
using json = nlohmann::json;

namespace {

constexpr size_t kMaxArgs = 4096;
constexpr size_t kMaxEnv = 1024;
constexpr size_t kMaxStringBytes = 64 * 1024;
constexpr int64_t kMaxTimeoutMs = 7LL * 24 * 3600 * 1000;

}  // namespace

std::string DefaultPoolSocket(const std::string& state_dir) { return state_dir + "/pool.sock"; }

Result<sockaddr_un> SocketAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path)
    return Error{"the pool socket path \"" + path + "\" is empty or longer than " +
                     std::to_string(sizeof addr.sun_path - 1) + " bytes",
                 ENAMETOOLONG};
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

Status SendFrame(int fd, const json& body, std::span<const int> fds) {
  std::string text;
  try {
    text = body.dump();
  } catch (const json::exception& e) {
    return Error{std::string("not UTF-8 text (the pool protocol is JSON): ") + e.what(), EILSEQ};
  }
  if (text.size() > kMaxPoolFrameBytes)
    return Error{"a frame of " + std::to_string(text.size()) + " bytes is above the limit of " +
                     std::to_string(kMaxPoolFrameBytes),
                 EMSGSIZE};
  return sandbox::control::SendDatagram(
      fd, std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()), fds,
      "to the pool socket");
}

Result<Frame> ReceiveFrame(int fd, size_t max_fds, int flags) {
  // The datagram's size first (MSG_PEEK | MSG_TRUNC returns it whole), so the buffer is
  // what the frame needs, not the cap: the frames of a run are a few hundred bytes.
  char probe;
  ssize_t size;
  do {
    size = ::recv(fd, &probe, 1, MSG_PEEK | MSG_TRUNC | flags);
  } while (size < 0 && errno == EINTR);
  if (size < 0) return Error::Sys("recv from the pool socket");
  std::string buf(std::min<size_t>(static_cast<size_t>(size), kMaxPoolFrameBytes) + 1, '\0');
  // Room for one fd more than allowed, so that too many is told apart from a lost one.
  auto got = ReceiveWithFds(fd, std::span(reinterpret_cast<uint8_t*>(buf.data()), buf.size()),
                            std::min(max_fds + 1, kMaxPassedFds), flags, "the pool socket");
  if (!got) return got.error();
  Frame frame;
  frame.fds = std::move(got->fds);
  if (got->size == 0 && frame.fds.empty()) return Error{"the connection was closed", 0};
  if (got->fds_truncated) return Error{"a frame carried more fds than allowed", EBADMSG};
  if (got->truncated || got->size > kMaxPoolFrameBytes)
    return Error{"a frame above " + std::to_string(kMaxPoolFrameBytes) + " bytes", EMSGSIZE};
  if (frame.fds.size() > max_fds)
    return Error{"a frame carried " + std::to_string(frame.fds.size()) + " fds, at most " +
                     std::to_string(max_fds) + " allowed here",
                 EBADMSG};
  buf.resize(got->size);
  frame.body = json::parse(buf, nullptr, /*allow_exceptions=*/false);
  if (frame.body.is_discarded()) return Error{"a frame that is not valid JSON", EBADMSG};
  if (!frame.body.is_object()) return Error{"a frame that is not a JSON object", EBADMSG};
  return frame;
}

Result<std::string> StringField(const json& obj, const char* name, bool required) {
  auto it = obj.find(name);
  if (it == obj.end()) {
    if (required) return Error{std::string("\"") + name + "\" is missing", EINVAL};
    return std::string();
  }
  if (!it->is_string()) return Error{std::string("\"") + name + "\" must be a string", EINVAL};
  const std::string& s = it->get_ref<const std::string&>();
  if (s.size() > kMaxStringBytes)
    return Error{std::string("\"") + name + "\" is longer than 64 KiB", EINVAL};
  if (s.find('\0') != std::string::npos)
    return Error{std::string("\"") + name + "\" contains a NUL byte", EINVAL};
  return s;
}

Result<std::vector<std::string>> StringList(const json& obj, const char* name, size_t max) {
  auto it = obj.find(name);
  if (it == obj.end()) return std::vector<std::string>();
  if (!it->is_array()) return Error{std::string("\"") + name + "\" must be an array", EINVAL};
  if (it->size() > max)
    return Error{std::string("\"") + name + "\" has more than " + std::to_string(max) + " entries",
                 EINVAL};
  std::vector<std::string> out;
  for (const json& item : *it) {
    if (!item.is_string())
      return Error{std::string("\"") + name + "\" must hold strings only", EINVAL};
    const std::string& s = item.get_ref<const std::string&>();
    if (s.size() > kMaxStringBytes || s.find('\0') != std::string::npos)
      return Error{std::string("an entry of \"") + name + "\" is longer than 64 KiB or has a NUL",
                   EINVAL};
    out.push_back(s);
  }
  return out;
}

Result<int64_t> IntField(const json& obj, const char* name, int64_t min, int64_t max) {
  auto it = obj.find(name);
  if (it == obj.end()) return min;
  if (!it->is_number_integer())
    return Error{std::string("\"") + name + "\" must be an integer", EINVAL};
  const int64_t v = it->get<int64_t>();
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(max))
    return Error{std::string("\"") + name + "\" is out of range", EINVAL};
  if (v < min || v > max)
    return Error{std::string("\"") + name + "\" must be in " + std::to_string(min) + ".." +
                     std::to_string(max),
                 EINVAL};
  return v;
}

bool BoolOr(const json& obj, const char* name, bool fallback) {
  auto it = obj.find(name);
  return it != obj.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

json ErrorEvent(const std::string& message, int err, bool fallback) {
  return json{{"event", "error"}, {"message", message}, {"errno", err}, {"fallback", fallback}};
}

// An exec request, checked: every field known, typed and within its cap; the stdio flags
Result<ParsedExec> ParseExec(const json& req, std::vector<UniqueFd>& fds) {
  static const char* const kKnown[] = {"op", "cell", "argv", "env", "cwd", "timeout_ms", "stdio"};
  for (auto it = req.begin(); it != req.end(); ++it) {
    bool known = false;
    for (const char* k : kKnown) known = known || it.key() == k;
    if (!known) return Error{"unknown field \"" + it.key() + "\"", EINVAL};
  }
  ParsedExec p;
  auto key = StringField(req, "cell", true);
  if (!key) return key.error();
  p.key = *key;
  auto argv = StringList(req, "argv", kMaxArgs);
  if (!argv) return argv.error();
  if (argv->empty() || (*argv)[0].empty()) return Error{"\"argv\" must name a command", EINVAL};
  p.exec.argv = std::move(*argv);
  auto env = StringList(req, "env", kMaxEnv);
  if (!env) return env.error();
  for (const std::string& e : *env) {
    if (e.find('=') == std::string::npos || e[0] == '=')
      return Error{"an \"env\" entry is not KEY=VALUE: \"" + e.substr(0, 64) + "\"", EINVAL};
  }
  p.exec.env = std::move(*env);
  auto cwd = StringField(req, "cwd", false);
  if (!cwd) return cwd.error();
  p.exec.cwd = *cwd;
  auto timeout = IntField(req, "timeout_ms", 0, kMaxTimeoutMs);
  if (!timeout) return timeout.error();
  p.exec.timeout = std::chrono::milliseconds(*timeout);
  auto stdio = req.find("stdio");
  if (stdio == req.end() || !stdio->is_array() || stdio->size() != 3)
    return Error{"\"stdio\" must be an array of three booleans (stdin, stdout, stderr)", EINVAL};
  size_t next = 0;
  int* targets[3] = {&p.exec.stdin_fd, &p.exec.stdout_fd, &p.exec.stderr_fd};
  for (size_t i = 0; i < 3; ++i) {
    if (!(*stdio)[i].is_boolean())
      return Error{"\"stdio\" must be an array of three booleans (stdin, stdout, stderr)", EINVAL};
    if (!(*stdio)[i].get<bool>()) continue;
    if (next >= fds.size()) break;
    *targets[i] = fds[next++].get();
  }
  size_t flagged = 0;
  for (size_t i = 0; i < 3; ++i) flagged += (*stdio)[i].get<bool>() ? 1 : 0;
  if (flagged != fds.size())
    return Error{"\"stdio\" flags " + std::to_string(flagged) + " fds but " +
                     std::to_string(fds.size()) + " came with the request",
                 EINVAL};
  p.exec.keep_bytes = 0;
  return p;
}

}  // namespace mcpcell::run_pool
