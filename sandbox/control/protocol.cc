// Control protocol codec and socket I/O. One field list per message (Fields below) drives
// both the encoder and the strict decoder, so the two cannot disagree.
#include "sandbox/control/protocol.h"

#include <sys/socket.h>
#include <sys/stat.h>

#include <cstring>
#include <memory>
#include <optional>
#include <type_traits>

#include "base/fd_passing.h"

namespace mcpcell::sandbox::control {
namespace {

constexpr uint32_t kMagic = 0x3143434d;  // "MCC1" little-endian
constexpr size_t kHeaderBytes = 12;

// ---- Writer: appends little-endian fields ----
class Writer {
 public:
  explicit Writer(std::vector<uint8_t>* out) : out_(out) {}
  void Int(uint64_t v, size_t width) {
    for (size_t i = 0; i < width; ++i) out_->push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  template <typename T>
  void Num(const T& v, const char*) {
    if constexpr (std::is_enum_v<T>) {
      Int(static_cast<uint64_t>(v), sizeof(T));
    } else {
      Int(static_cast<uint64_t>(static_cast<std::make_unsigned_t<T>>(v)), sizeof(T));
    }
  }
  void Str(const std::string& s, uint32_t, const char*) {
    Int(s.size(), 4);
    out_->insert(out_->end(), s.begin(), s.end());
  }
  template <typename T, typename F>
  void List(const std::vector<T>& items, uint32_t, const char*, F&& each) {
    Int(items.size(), 4);
    for (const T& item : items) each(const_cast<T&>(item));
  }
  bool ok() const { return true; }

 private:
  std::vector<uint8_t>* out_;
};

// ---- Reader: consumes fields, first error wins, every size checked before use ----
class Reader {
 public:
  Reader(std::span<const uint8_t> in, const char* message) : in_(in), message_(message) {}
  bool Int(uint64_t* v, size_t width, const char* field) {
    if (!ok()) return false;
    if (in_.size() - pos_ < width) return Fail(field, "frame truncated");
    *v = 0;
    for (size_t i = 0; i < width; ++i) *v |= static_cast<uint64_t>(in_[pos_ + i]) << (8 * i);
    pos_ += width;
    return true;
  }
  template <typename T>
  void Num(T& v, const char* field) {
    uint64_t raw = 0;
    if (!Int(&raw, sizeof(T), field)) return;
    if constexpr (std::is_same_v<T, FileType>) {
      if (raw > static_cast<uint64_t>(FileType::kBlock)) {
        Fail(field, "unknown file type " + std::to_string(raw));
        return;
      }
    }
    v = static_cast<T>(raw);
  }
  void Str(std::string& s, uint32_t cap, const char* field) {
    uint64_t len = 0;
    if (!Int(&len, 4, field)) return;
    if (len > cap) {
      Fail(field, "length " + std::to_string(len) + " exceeds cap " + std::to_string(cap));
      return;
    }
    if (in_.size() - pos_ < len) {
      Fail(field, "length " + std::to_string(len) + " runs past the end of the frame");
      return;
    }
    s.assign(reinterpret_cast<const char*>(in_.data() + pos_), len);
    pos_ += len;
  }
  template <typename T, typename F>
  void List(std::vector<T>& items, uint32_t cap, const char* field, F&& each) {
    uint64_t count = 0;
    if (!Int(&count, 4, field)) return;
    if (count > cap) {
      Fail(field, "count " + std::to_string(count) + " exceeds cap " + std::to_string(cap));
      return;
    }
    // Every item takes at least one byte, so a count larger than what is left is a lie;
    // checking it first keeps a hostile count from reserving memory.
    if (count > in_.size() - pos_) {
      Fail(field, "count " + std::to_string(count) + " runs past the end of the frame");
      return;
    }
    items.clear();
    items.resize(count);
    for (T& item : items) {
      if (!ok()) return;
      each(item);
    }
  }
  bool Fail(const char* field, const std::string& why) {
    if (!error_) error_ = Error::Msg(std::string(message_) + "." + field + ": " + why);
    return false;
  }
  bool ok() const { return !error_.has_value(); }
  bool AtEnd() const { return pos_ == in_.size(); }
  size_t remaining() const { return in_.size() - pos_; }
  const Error& error() const { return *error_; }

 private:
  std::span<const uint8_t> in_;
  size_t pos_ = 0;
  const char* message_;
  std::optional<Error> error_;
};

// ---- Field lists, shared by Writer and Reader ----
template <typename V>
void StatFields(V& v, FileStat& s) {
  v.Num(s.type, "type");
  v.Num(s.mode, "mode");
  v.Num(s.size, "size");
  v.Num(s.mtime_ns, "mtime_ns");
  v.Num(s.uid, "uid");
  v.Num(s.gid, "gid");
  v.Num(s.nlink, "nlink");
}
template <typename V>
void StrList(V& v, std::vector<std::string>& list, uint32_t cap, const char* field) {
  v.List(list, cap, field, [&](std::string& s) { v.Str(s, kMaxStringBytes, field); });
}

template <typename V>
void Fields(V& v, Ready& m) {
  v.List(m.step_timings_us, kMaxTimings, "step_timings_us", [&](auto& t) {
    v.Str(t.first, kMaxNameBytes, "step_timings_us.name");
    v.Num(t.second, "step_timings_us.us");
  });
  v.Num(m.egress_listener, "egress_listener");
}
template <typename V>
void Fields(V& v, SetupFailed& m) {
  v.Str(m.message, kMaxStringBytes, "message");
}
template <typename V>
void Fields(V& v, ExecRequest& m) {
  v.Num(m.request_id, "request_id");
  StrList(v, m.argv, kMaxArgs, "argv");
  StrList(v, m.env, kMaxEnv, "env");
  v.Str(m.cwd, kMaxPathBytes, "cwd");
  v.Num(m.report_start, "report_start");
}
template <typename V>
void Fields(V& v, DetachedExecRequest& m) {
  v.Num(m.request_id, "request_id");
  StrList(v, m.argv, kMaxArgs, "argv");
  StrList(v, m.env, kMaxEnv, "env");
  v.Str(m.cwd, kMaxPathBytes, "cwd");
  v.Str(m.output_path, kMaxPathBytes, "output_path");
  v.Num(m.output_cap, "output_cap");
}
template <typename V>
void Fields(V& v, SignalRequest& m) {
  v.Num(m.request_id, "request_id");
  v.Num(m.exec_request_id, "exec_request_id");
  v.Num(m.signo, "signo");
}
template <typename V>
void Fields(V& v, ReadFileRequest& m) {
  v.Num(m.request_id, "request_id");
  v.Str(m.path, kMaxPathBytes, "path");
  v.Num(m.offset, "offset");
  v.Num(m.max_bytes, "max_bytes");
}
template <typename V>
void Fields(V& v, WriteFileRequest& m) {
  v.Num(m.request_id, "request_id");
  v.Str(m.path, kMaxPathBytes, "path");
  v.Num(m.offset, "offset");
  v.Num(m.flags, "flags");
  v.Num(m.mode, "mode");
  v.Str(m.data, kMaxFileChunkBytes, "data");
}
template <typename V>
void Fields(V& v, ListDirRequest& m) {
  v.Num(m.request_id, "request_id");
  v.Str(m.path, kMaxPathBytes, "path");
  v.Num(m.cookie, "cookie");
}
template <typename V>
void Fields(V& v, StatRequest& m) {
  v.Num(m.request_id, "request_id");
  v.Str(m.path, kMaxPathBytes, "path");
  v.Num(m.follow_symlinks, "follow_symlinks");
}
template <typename V>
void Fields(V& v, MkdirRequest& m) {
  v.Num(m.request_id, "request_id");
  v.Str(m.path, kMaxPathBytes, "path");
  v.Num(m.mode, "mode");
  v.Num(m.parents, "parents");
}
template <typename V>
void Fields(V& v, RemoveRequest& m) {
  v.Num(m.request_id, "request_id");
  v.Str(m.path, kMaxPathBytes, "path");
  v.Num(m.recursive, "recursive");
}
template <typename V>
void Fields(V& v, RenameRequest& m) {
  v.Num(m.request_id, "request_id");
  v.Str(m.from, kMaxPathBytes, "from");
  v.Str(m.to, kMaxPathBytes, "to");
  v.Num(m.no_replace, "no_replace");
}
template <typename V>
void Fields(V& v, StatsRequest& m) {
  v.Num(m.request_id, "request_id");
}
template <typename V>
void Fields(V& v, ErrorReply& m) {
  v.Num(m.request_id, "request_id");
  v.Num(m.err, "err");
  v.Str(m.message, kMaxStringBytes, "message");
}
template <typename V>
void Fields(V& v, OkReply& m) {
  v.Num(m.request_id, "request_id");
}
template <typename V>
void Fields(V& v, ExecStarted& m) {
  v.Num(m.request_id, "request_id");
  v.Num(m.pid, "pid");
}
template <typename V>
void Fields(V& v, ExecExited& m) {
  v.Num(m.request_id, "request_id");
  v.Num(m.signaled, "signaled");
  v.Num(m.exit_code, "exit_code");
  v.Num(m.signo, "signo");
  v.Num(m.user_cpu_us, "user_cpu_us");
  v.Num(m.system_cpu_us, "system_cpu_us");
  v.Num(m.max_rss_bytes, "max_rss_bytes");
}
template <typename V>
void Fields(V& v, ReadFileReply& m) {
  v.Num(m.request_id, "request_id");
  v.Num(m.file_size, "file_size");
  v.Num(m.eof, "eof");
  v.Str(m.data, kMaxFileChunkBytes, "data");
}
template <typename V>
void Fields(V& v, StatReply& m) {
  v.Num(m.request_id, "request_id");
  StatFields(v, m.stat);
}
template <typename V>
void Fields(V& v, ListDirReply& m) {
  v.Num(m.request_id, "request_id");
  v.List(m.entries, kMaxDirEntries, "entries", [&](DirEntry& e) {
    v.Str(e.name, kMaxNameBytes, "entries.name");
    StatFields(v, e.stat);
  });
  v.Num(m.next_cookie, "next_cookie");
}
template <typename V>
void Fields(V& v, StatsReply& m) {
  v.Num(m.request_id, "request_id");
  v.Num(m.running_execs, "running_execs");
  v.Num(m.children_reaped, "children_reaped");
  v.Num(m.init_max_rss_bytes, "init_max_rss_bytes");
}

constexpr const char* kNames[] = {"Ready",          "SetupFailed",     "ExecRequest",
                                  "SignalRequest",  "ReadFileRequest", "WriteFileRequest",
                                  "ListDirRequest", "StatRequest",     "MkdirRequest",
                                  "RemoveRequest",  "StatsRequest",    "ErrorReply",
                                  "OkReply",        "ExecStarted",     "ExecExited",
                                  "ReadFileReply",  "StatReply",       "ListDirReply",
                                  "StatsReply",     "RenameRequest",   "DetachedExecRequest"};
static_assert(std::size(kNames) == std::variant_size_v<Message>);

// Semantic checks that a cap alone does not express (flags are 0/1, names are sane).
Status ValidateDecoded(const Message& message) {
  auto boolean = [](uint8_t b, const char* what) -> Status {
    if (b > 1) return Error::Msg(std::string(what) + ": must be 0 or 1, got " + std::to_string(b));
    return Ok();
  };
  if (auto* m = std::get_if<Ready>(&message))
    return boolean(m->egress_listener, "Ready.egress_listener");
  if (auto* m = std::get_if<ExecExited>(&message))
    return boolean(m->signaled, "ExecExited.signaled");
  if (auto* m = std::get_if<ExecRequest>(&message))
    return boolean(m->report_start, "ExecRequest.report_start");
  if (auto* m = std::get_if<DetachedExecRequest>(&message)) {
    if (m->output_path.empty()) return Error::Msg("DetachedExecRequest.output_path: empty");
    if (m->output_cap == 0) return Error::Msg("DetachedExecRequest.output_cap: must be > 0");
    return Ok();
  }
  if (auto* m = std::get_if<ReadFileReply>(&message)) return boolean(m->eof, "ReadFileReply.eof");
  if (auto* m = std::get_if<StatRequest>(&message))
    return boolean(m->follow_symlinks, "StatRequest.follow_symlinks");
  if (auto* m = std::get_if<MkdirRequest>(&message))
    return boolean(m->parents, "MkdirRequest.parents");
  if (auto* m = std::get_if<RenameRequest>(&message))
    return boolean(m->no_replace, "RenameRequest.no_replace");
  if (auto* m = std::get_if<RemoveRequest>(&message))
    return boolean(m->recursive, "RemoveRequest.recursive");
  if (auto* m = std::get_if<ListDirReply>(&message)) {
    for (const DirEntry& e : m->entries) {
      if (e.name.empty() || e.name == "." || e.name == ".." ||
          e.name.find_first_of(std::string("/\0", 2)) != std::string::npos) {
        return Error::Msg("ListDirReply.entries.name: invalid file name");
      }
    }
  }
  return Ok();
}

template <size_t I = 0>
Result<Message> DecodeAs(size_t index, Reader& reader) {
  if constexpr (I < std::variant_size_v<Message>) {
    if (index != I) return DecodeAs<I + 1>(index, reader);
    std::variant_alternative_t<I, Message> m{};
    Fields(reader, m);
    if (!reader.ok()) return reader.error();
    if (!reader.AtEnd()) {
      return Error::Msg(std::string(kNames[I]) + ": " + std::to_string(reader.remaining()) +
                        " trailing bytes after the last field");
    }
    return Message(std::move(m));
  } else {
    return Error::Msg("unknown message type " + std::to_string(index + 1));
  }
}

void CloseAll(std::vector<UniqueFd>& fds) {
  for (UniqueFd& fd : fds) DiscardPeerFd(fd);
  fds.clear();
}

}  // namespace

void DiscardPeerFd(UniqueFd& fd) {
  if (!fd) return;
  struct stat st;
  if (::fstat(fd.get(), &st) == 0 && S_ISSOCK(st.st_mode)) {
    const struct linger at_once = {1, 0};
    (void)::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &at_once, sizeof at_once);
  }
  fd.Reset();
}

Received& Received::operator=(Received&& other) {
  if (this != &other) {
    CloseAll(fds);
    message = std::move(other.message);
    fds = std::move(other.fds);
  }
  return *this;
}

Received::~Received() { CloseAll(fds); }

const char* MessageName(const Message& message) { return kNames[message.index()]; }

uint64_t RequestIdOf(const Message& message) {
  return std::visit(
      [](const auto& m) -> uint64_t {
        if constexpr (requires { m.request_id; }) {
          return m.request_id;
        } else {
          return 0;
        }
      },
      message);
}

uint32_t RequiredFdCount(const Message& message) {
  if (std::holds_alternative<ExecRequest>(message)) return 4;
  if (std::holds_alternative<DetachedExecRequest>(message)) return 2;
  if (auto* ready = std::get_if<Ready>(&message)) return ready->egress_listener ? 1 : 0;
  return 0;
}

std::vector<uint8_t> EncodeFrame(const Message& message, uint32_t fd_count) {
  std::vector<uint8_t> out;
  out.reserve(256);
  Writer w(&out);
  w.Int(kMagic, 4);
  w.Int(message.index() + 1, 2);
  w.Int(fd_count, 2);
  w.Int(0, 4);  // payload length, patched below
  std::visit([&](const auto& m) { Fields(w, const_cast<std::decay_t<decltype(m)>&>(m)); }, message);
  const uint32_t payload = static_cast<uint32_t>(out.size() - kHeaderBytes);
  for (int i = 0; i < 4; ++i) out[8 + i] = static_cast<uint8_t>(payload >> (8 * i));
  return out;
}

Result<Message> DecodeFrame(std::span<const uint8_t> frame, uint32_t fd_count) {
  if (frame.size() > kMaxFrameBytes) {
    return Error::Msg("frame of " + std::to_string(frame.size()) + " bytes exceeds cap " +
                      std::to_string(kMaxFrameBytes));
  }
  Reader header(frame.first(std::min(frame.size(), kHeaderBytes)), "frame");
  uint64_t magic = 0, type = 0, declared_fds = 0, payload_len = 0;
  header.Int(&magic, 4, "magic");
  header.Int(&type, 2, "type");
  header.Int(&declared_fds, 2, "fd_count");
  header.Int(&payload_len, 4, "payload_len");
  if (!header.ok())
    return Error::Msg("frame header truncated: " + std::to_string(frame.size()) + " bytes");
  if (magic != kMagic) return Error::Msg("frame: bad magic (not a control protocol frame)");
  if (payload_len != frame.size() - kHeaderBytes) {
    return Error::Msg("frame: payload_len " + std::to_string(payload_len) + " but " +
                      std::to_string(frame.size() - kHeaderBytes) + " bytes arrived");
  }
  if (type == 0 || type > std::variant_size_v<Message>) {
    return Error::Msg("frame: unknown message type " + std::to_string(type));
  }
  if (declared_fds != fd_count) {
    return Error::Msg(std::string(kNames[type - 1]) + ": header says " +
                      std::to_string(declared_fds) + " fds, " + std::to_string(fd_count) +
                      " arrived");
  }
  Reader body(frame.subspan(kHeaderBytes), kNames[type - 1]);
  Result<Message> message = DecodeAs(type - 1, body);
  if (!message.ok()) return message;
  if (RequiredFdCount(*message) != fd_count) {
    return Error::Msg(std::string(kNames[type - 1]) + ": needs " +
                      std::to_string(RequiredFdCount(*message)) + " fds, got " +
                      std::to_string(fd_count));
  }
  if (Status s = ValidateDecoded(*message); !s.ok()) return s.error();
  return message;
}

Status SendMessage(int fd, const Message& message, std::span<const int> fds) {
  if (fds.size() > kMaxFdsPerFrame)
    return Error::Msg(std::string("send ") + MessageName(message) + ": too many fds");
  std::vector<uint8_t> frame = EncodeFrame(message, static_cast<uint32_t>(fds.size()));
  if (frame.size() > kMaxFrameBytes) {
    return Error::Sys(std::string("send ") + MessageName(message) + " (" +
                          std::to_string(frame.size()) + " bytes > kMaxFrameBytes)",
                      EMSGSIZE);
  }
  return SendDatagram(fd, frame, fds, MessageName(message));
}

Status SendDatagram(int fd, std::span<const uint8_t> bytes, std::span<const int> fds,
                    const char* what) {
  if (fds.size() > kMaxFdsPerFrame)
    return Error::Msg(std::string("sendmsg(") + what + "): too many fds");
  Result<size_t> sent = SendWithFds(fd, bytes, fds, what);
  if (!sent) return sent.error();
  if (*sent != bytes.size()) return Error::Msg(std::string("sendmsg(") + what + "): short write");
  return Ok();
}

Result<Received> ReceiveMessage(int fd) {
  // One byte more than the cap, so an oversized datagram shows as MSG_TRUNC or size. One
  // buffer per thread, reused and never zeroed: a fresh zero-filled vector per frame cost
  // an mmap, a 160 KiB memset and a munmap for every message (on the exec path, three per
  // exec on each side). Only the pages frames actually used are resident.
  constexpr size_t kBufferBytes = kMaxFrameBytes + 1;
  thread_local const std::unique_ptr<uint8_t[]> buffer(new uint8_t[kBufferBytes]);
  Result<ReceivedWithFds> got = ReceiveWithFds(fd, std::span<uint8_t>(buffer.get(), kBufferBytes),
                                               kMaxFdsPerFrame, 0, "control channel");
  if (!got) return got.error();
  std::vector<UniqueFd>& fds = got->fds;
  const size_t n = got->size;
  // Every early return below discards what came with the frame.
  struct DiscardUnlessKept {
    std::vector<UniqueFd>& fds;
    ~DiscardUnlessKept() { CloseAll(fds); }
  } guard{fds};
  if (n == 0) return Error{"control channel closed", 0};
  if (got->fds_truncated) {
    return Error::Msg("control frame carried more than " + std::to_string(kMaxFdsPerFrame) +
                      " fds");
  }
  if (got->truncated || n > kMaxFrameBytes) {
    return Error::Msg("control frame exceeds cap of " + std::to_string(kMaxFrameBytes) + " bytes");
  }
  if (got->foreign_control) return Error::Msg("control frame carried unexpected ancillary data");
  Result<Message> message =
      DecodeFrame(std::span<const uint8_t>(buffer.get(), n), static_cast<uint32_t>(fds.size()));
  if (!message.ok()) {
    CloseAll(fds);
    return message.error();
  }
  return Received{std::move(*message), std::move(fds)};
}

Result<std::pair<UniqueFd, UniqueFd>> CreateControlSocketPair() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return Error::Sys("socketpair(AF_UNIX, SOCK_SEQPACKET)");
  }
  std::pair<UniqueFd, UniqueFd> pair{UniqueFd(sv[0]), UniqueFd(sv[1])};
  // The default send buffer (net.core.wmem_default) may be smaller than a full frame;
  // a SEQPACKET datagram must fit in the sender's buffer whole.
  int size = 2 * kMaxFrameBytes;
  for (int s : sv) {
    if (::setsockopt(s, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)) != 0 ||
        ::setsockopt(s, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size)) != 0) {
      return Error::Sys("setsockopt(control socket, SO_SNDBUF/SO_RCVBUF)");
    }
  }
  return pair;
}

Result<std::pair<UniqueFd, UniqueFd>> CreateExecEventPair() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return Error::Sys("socketpair(AF_UNIX, SOCK_SEQPACKET) for the exec's events");
  }
  return std::pair<UniqueFd, UniqueFd>{UniqueFd(sv[0]), UniqueFd(sv[1])};
}

}  // namespace mcpcell::sandbox::control
