// The control protocol between the server and cell init (pid 1 inside a cell).
//
// Transport: a SOCK_SEQPACKET unix socketpair (CreateControlSocketPair). One frame per
// datagram; file descriptors ride along with SCM_RIGHTS. Frame layout, little-endian:
//
//   u32 magic 'MCC1' | u16 type | u16 fd_count | u32 payload_len | payload
//
// The payload is the message's fields in declaration order: integers fixed width,
// strings and byte blobs as u32 length + bytes, lists as u32 count + items. Decoding is
// strict because everything that comes from inside a cell is untrusted: the magic, the
// type, the fd count the type requires, every length and count against its cap
// (kMax*), and no trailing bytes. A frame that fails any check is rejected with an error
// naming the field, and the fds it carried are closed.
//
// Request/reply: every request carries a `request_id` chosen by the server; the reply
// (a *Reply message, or ErrorReply) echoes it. Ready/SetupFailed are the first frame init
// sends after its setup.
//
// Exec events: an ExecRequest brings its own event socket (one end of a SEQPACKET
// socketpair, CreateExecEventPair), and init answers that request there, never on the
// control socket: ErrorReply (it could not start), or ExecStarted (unless the request
// said report_start 0) and later ExecExited (the leader reaped), each with the
// ExecRequest's request_id; then it closes the socket.
// So the thread that runs the exec waits on its own socket and the program's pipes in one
// poll, and init's events wake it directly (no hand-off through the control socket's
// reader). End of stream before ExecExited means init is gone.
//
// Thread-safety: the functions are stateless; callers serialise sends on one fd
// themselves (SEQPACKET frames never interleave, so concurrent senders are safe too).
// Built without exceptions (cell init links it).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace mcpcell::sandbox::control {

// Caps. A frame must fit in one SEQPACKET datagram (the socket buffer is raised to fit).
inline constexpr uint32_t kMaxFrameBytes = 160 * 1024;
inline constexpr uint32_t kMaxFileChunkBytes = 128 * 1024;  // ReadFile/WriteFile data
inline constexpr uint32_t kMaxPathBytes = 4096;
inline constexpr uint32_t kMaxNameBytes = 255;
inline constexpr uint32_t kMaxArgs = 4096;              // argv entries
inline constexpr uint32_t kMaxEnv = 1024;               // env entries
inline constexpr uint32_t kMaxStringBytes = 64 * 1024;  // one argv/env entry, messages
inline constexpr uint32_t kMaxDirEntries = 1024;        // entries in one ListDirReply
inline constexpr uint32_t kMaxTimings = 64;             // Ready step timings
inline constexpr uint32_t kMaxFdsPerFrame = 4;

// ---- Init -> server, once, after setup ----
struct Ready {
  std::vector<std::pair<std::string, uint64_t>> step_timings_us;  // in order
  // 1: the frame carries one fd, the listening TCP socket on 127.0.0.1 that init opened
  // in the cell's network namespace for the egress proxy (CellSpec::egress_proxy_port).
  uint8_t egress_listener = 0;
};
struct SetupFailed {
  std::string message;
};

// ---- Server -> init requests ----
// Starts argv[0] (absolute, or searched in PATH of the merged env) in its own process
// group as the sandbox user. Carries exactly 4 fds: the child's stdin, stdout, stderr, and
// the exec's event socket (see "Exec events" above), which the child never gets.
struct ExecRequest {
  uint64_t request_id = 0;
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "KEY=VALUE", overlaid on the cell's defaults
  std::string cwd;               // empty: the workspace
  // 1: send ExecStarted once the program runs. 0: the server needs neither the pid nor the
  // moment (it has a timeout of its own), so the only events are ErrorReply or ExecExited:
  // one wake-up less for the server per exec.
  uint8_t report_start = 1;
};
// Starts a background program that init supervises (a detached exec, issue 32): like
// ExecRequest, but its stdout and stderr both go, through one pipe that init reads, into the
// regular file `output_path` (created or truncated as the sandbox user, resolved like a file
// operation) up to `output_cap` bytes; past the cap init writes one marker line and discards
// the rest, so the program never blocks on a full pipe and the file stays bounded. Carries
// exactly 2 fds: the child's stdin and the exec's event socket. Init answers on the event
// socket as for an ExecRequest with report_start 1: ErrorReply, or ExecStarted and later
// ExecExited, sent once the output read so far is in the file. SignalRequest reaches it by
// its request_id like any exec. New in this protocol as a message of its own (appended to
// Message), so an ExecRequest's layout and fd count are unchanged.
struct DetachedExecRequest {
  uint64_t request_id = 0;
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "KEY=VALUE", overlaid on the cell's defaults
  std::string cwd;               // empty: the workspace
  std::string output_path;       // not empty
  uint64_t output_cap = 0;       // > 0
};
// Sends `signo` to the process group of the exec started by `exec_request_id`.
struct SignalRequest {
  uint64_t request_id = 0;
  uint64_t exec_request_id = 0;
  int32_t signo = 0;
};
struct ReadFileRequest {
  uint64_t request_id = 0;
  std::string path;
  uint64_t offset = 0;
  uint32_t max_bytes = 0;  // <= kMaxFileChunkBytes
};
// kWriteAppend: O_APPEND, the offset is ignored; each request's data lands at the end as
// one write, so appends from concurrent calls never overwrite each other.
enum WriteFlags : uint32_t {
  kWriteCreate = 1,
  kWriteTruncate = 2,
  kWriteExclusive = 4,
  kWriteAppend = 8
};
struct WriteFileRequest {
  uint64_t request_id = 0;
  std::string path;
  uint64_t offset = 0;
  uint32_t flags = 0;    // WriteFlags
  uint32_t mode = 0644;  // for a created file, masked by 07777 (no setuid honoured: nosuid)
  std::string data;      // <= kMaxFileChunkBytes
};
struct ListDirRequest {
  uint64_t request_id = 0;
  std::string path;
  uint64_t cookie = 0;  // 0 first; then ListDirReply::next_cookie to continue
};
struct StatRequest {
  uint64_t request_id = 0;
  std::string path;
  uint8_t follow_symlinks = 0;
};
struct MkdirRequest {
  uint64_t request_id = 0;
  std::string path;
  uint32_t mode = 0755;
  uint8_t parents = 0;  // like mkdir -p
};
struct RemoveRequest {
  uint64_t request_id = 0;
  std::string path;
  uint8_t recursive = 0;
};
struct StatsRequest {
  uint64_t request_id = 0;
};
// renameat2 of `from` to `to` (both resolved inside the cell as the sandbox user; the last
// component of each is not followed). no_replace: fail with EEXIST instead of replacing.
struct RenameRequest {
  uint64_t request_id = 0;
  std::string from;
  std::string to;
  uint8_t no_replace = 0;
};

// ---- Init -> server replies and events ----
struct ErrorReply {
  uint64_t request_id = 0;
  int32_t err = 0;  // errno, 0 when not a syscall failure
  std::string message;
};
struct OkReply {
  uint64_t request_id = 0;
};
struct ExecStarted {
  uint64_t request_id = 0;
  int32_t pid = 0;  // in the cell's pid namespace
};
struct ExecExited {
  uint64_t request_id = 0;
  uint8_t signaled = 0;  // 1: killed by `signo`; 0: exited with `exit_code`
  int32_t exit_code = 0;
  int32_t signo = 0;
  uint64_t user_cpu_us = 0;
  uint64_t system_cpu_us = 0;
  uint64_t max_rss_bytes = 0;
};
enum class FileType : uint8_t {
  kUnknown,
  kRegular,
  kDirectory,
  kSymlink,
  kFifo,
  kSocket,
  kChar,
  kBlock
};
struct FileStat {
  FileType type = FileType::kUnknown;
  uint32_t mode = 0;  // permission bits (07777)
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  uint32_t uid = 0;  // as seen inside the cell
  uint32_t gid = 0;
  uint64_t nlink = 0;
};
struct ReadFileReply {
  uint64_t request_id = 0;
  uint64_t file_size = 0;
  uint8_t eof = 0;
  std::string data;
};
struct StatReply {
  uint64_t request_id = 0;
  FileStat stat;
};
struct DirEntry {
  std::string name;
  FileStat stat;  // lstat of the entry
};
struct ListDirReply {
  uint64_t request_id = 0;
  std::vector<DirEntry> entries;
  uint64_t next_cookie = 0;  // 0: listing complete
};
struct StatsReply {
  uint64_t request_id = 0;
  uint32_t running_execs = 0;
  uint64_t children_reaped = 0;
  uint64_t init_max_rss_bytes = 0;
};

using Message =
    std::variant<Ready, SetupFailed, ExecRequest, SignalRequest, ReadFileRequest, WriteFileRequest,
                 ListDirRequest, StatRequest, MkdirRequest, RemoveRequest, StatsRequest, ErrorReply,
                 OkReply, ExecStarted, ExecExited, ReadFileReply, StatReply, ListDirReply,
                 StatsReply, RenameRequest, DetachedExecRequest>;

// Wire type tag of a message ("ExecRequest"), for errors and logs.
const char* MessageName(const Message& message);
// The request_id a message carries (0 for Ready/SetupFailed).
uint64_t RequestIdOf(const Message& message);
// Exactly how many fds a message of this kind must carry.
uint32_t RequiredFdCount(const Message& message);

// Pure codec, exposed for tests and for other transports (a virtio channel later).
std::vector<uint8_t> EncodeFrame(const Message& message, uint32_t fd_count);
// Decodes one whole frame; `fd_count` is how many fds arrived with it.
Result<Message> DecodeFrame(std::span<const uint8_t> frame, uint32_t fd_count);

// Closes an fd that came from the peer and will not be used without waiting for anything:
// a socket is set to close at once (SO_LINGER 0) first. A peer (a hostile cell init) can
// set SO_LINGER on a TCP socket with unsent data before sending it, and close() of the
// last reference would then block the receiving thread until the data is acknowledged or
// the linger time (up to hours) is up. Never for a socket that is kept: a listening
// socket's setting passes to the connections it accepts.
void DiscardPeerFd(UniqueFd& fd);

// One frame as received. The fds a caller does not move out are discarded with the frame
// (DiscardPeerFd).
struct Received {
  Message message;
  std::vector<UniqueFd> fds;  // exactly RequiredFdCount(message) entries

  Received(Message m, std::vector<UniqueFd> f) : message(std::move(m)), fds(std::move(f)) {}
  Received(Received&&) = default;
  Received& operator=(Received&& other);
  Received(const Received&) = delete;
  Received& operator=(const Received&) = delete;
  ~Received();
};

// Sends one frame with `fds` attached (not closed). Retries EINTR; fails with EMSGSIZE
// naming the message if it exceeds kMaxFrameBytes. MSG_NOSIGNAL: a dead peer is EPIPE.
Status SendMessage(int fd, const Message& message, std::span<const int> fds = {});
// Sends `bytes` as one datagram with `fds` attached (SCM_RIGHTS, at most kMaxFdsPerFrame,
// not closed), retrying EINTR; MSG_NOSIGNAL. `what` names it in errors. The transport of
// SendMessage, for other protocols on SEQPACKET sockets too (run_pool/protocol.cc).
Status SendDatagram(int fd, std::span<const uint8_t> bytes, std::span<const int> fds,
                    const char* what);
// Receives one frame (blocking unless the fd is non-blocking: then EAGAIN is an error with
// err == EAGAIN). End of stream is an error with err == 0 and message "control channel
// closed". Truncated frames (MSG_TRUNC), too many fds (MSG_CTRUNC) and malformed frames
// are errors; the fds that came with a bad frame are closed.
Result<Received> ReceiveMessage(int fd);

// A SOCK_SEQPACKET|SOCK_CLOEXEC socketpair with buffers big enough for kMaxFrameBytes.
Result<std::pair<UniqueFd, UniqueFd>> CreateControlSocketPair();
// The event socket of one exec: a SOCK_SEQPACKET|SOCK_CLOEXEC socketpair with the default
// buffers (its three small frames fit). first: the server's end; second: init's.
Result<std::pair<UniqueFd, UniqueFd>> CreateExecEventPair();

}  // namespace mcpcell::sandbox::control
