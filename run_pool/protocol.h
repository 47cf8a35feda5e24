// The run pool's wire protocol (docs: run_pool/server.h): one JSON object per
// SOCK_SEQPACKET datagram, the run's stdio fds attached with SCM_RIGHTS (base/fd_passing.h),
// and the checked readers both ends use, whose errors name the field and the problem.
// Shared by the client (mcpcell run, client.h) and the server (mcpcell pool, server.h).
// Threading: stateless functions.
#pragma once

#include <sys/un.h>

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"
#include "sandbox/cell_channel.h"

namespace mcpcell::run_pool {

inline constexpr size_t kMaxPoolFrameBytes = 128 * 1024;
// A run hands over at most its stdin, stdout and stderr.
inline constexpr size_t kMaxStdioFds = 3;

// <state_dir>/pool.sock: where `mcpcell pool` listens and `mcpcell run` looks by default.
std::string DefaultPoolSocket(const std::string& state_dir);
// The sockaddr of `path`; an error when it does not fit.
Result<sockaddr_un> SocketAddress(const std::string& path);

// One JSON object per datagram, `fds` attached. A peer gone is EPIPE (no SIGPIPE).
Status SendFrame(int fd, const nlohmann::json& body, std::span<const int> fds = {});

struct Frame {
  nlohmann::json body;        // an object
  std::vector<UniqueFd> fds;  // closed with the frame unless moved out
};
// Receives one frame with at most `max_fds` fds. End of stream: an error with err 0.
// `flags`: MSG_DONTWAIT for a poll-driven caller (then EAGAIN when none waits).
Result<Frame> ReceiveFrame(int fd, size_t max_fds, int flags = 0);

// Field readers that name what is wrong. A string is at most 64 KiB and has no NUL.
Result<std::string> StringField(const nlohmann::json& obj, const char* name, bool required);
Result<std::vector<std::string>> StringList(const nlohmann::json& obj, const char* name,
                                            size_t max);
// Missing: `min`.
Result<int64_t> IntField(const nlohmann::json& obj, const char* name, int64_t min, int64_t max);
bool BoolOr(const nlohmann::json& obj, const char* name, bool fallback);

// {"event":"error",...}; `fallback`: the command was not started, the run may make its own
// cell.
nlohmann::json ErrorEvent(const std::string& message, int err, bool fallback);

// An exec request, checked: every field known, typed and within its cap; the stdio flags
// match the fds that came with it (exec's stdio fds point into `fds`, which stay owned
// there).
struct ParsedExec {
  std::string key;
  sandbox::ExecOptions exec;
};
Result<ParsedExec> ParseExec(const nlohmann::json& request, std::vector<UniqueFd>& fds);

}  // namespace mcpcell::run_pool
