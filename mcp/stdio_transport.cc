#include "mcp/stdio_transport.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <mutex>

#include "mcp/jsonrpc.h"
#include "mcp/log.h"
#include "mcp/server.h"
#include "mcp/session.h"

namespace mcp {
namespace {
constexpr size_t kDefaultLimit = 16 * 1024 * 1024;
constexpr size_t kChunk = 64 * 1024;

bool IsBlank(const std::string& s) { return s.find_first_not_of(" \t\r") == std::string::npos; }
}  // namespace

// Shared by the transport object and its reader threads, so a thread may outlive the
// object when the object is destroyed from inside a callback or an adopted task.
//
// Input that epoll can watch (a pipe, a socket, a terminal): two threads wait in
// epoll_wait on one epoll set where the input is armed one-shot. The kernel wakes one of
// them; it reads a chunk and delivers its lines while the input is disarmed (so lines
// stay in order), re-arms it, then runs the task it adopted, if any, while the other
// thread waits for the next input. Nobody is woken just to take over reading. Other input
// (a regular file): one thread reads it, and no task is adopted.
struct StdioState {
  StdioOptions options;
  TransportCallbacks callbacks;
  std::mutex write_mu;
  std::atomic<bool> closed{false};
  int wake[2] = {-1, -1};  // Close() and the end of reading write to wake[1]
  int epoll = -1;          // -1: the input cannot be watched with epoll (one reader)

  std::atomic<bool> finished{false};  // reading is over; every reader thread returns
  std::atomic<int> waiting{0};        // reader threads in epoll_wait, free to read
  // Read state: owned by the thread that took the input's one-shot event, until it re-arms.
  std::mutex read_mu;
  std::string line;  // the incomplete line so far
  // A line over the limit: skipped to its end, keeping only its first and last
  // kIdScanBytes (to find the request's id for the error) and its length.
  bool discarding = false;
  std::string dropped_head, dropped_tail;
  size_t dropped_bytes = 0;
  std::string chunk = std::string(kChunk, '\0');
  std::function<void()> adopted;  // the task AdoptTask took during this chunk's delivery

  ~StdioState() {
    for (int fd : {wake[0], wake[1], epoll}) {
      if (fd >= 0) ::close(fd);
    }
  }

  enum class Read { kMore, kEof, kEnd };
  // Watches the input with epoll if it can (sets `epoll`); false: it cannot.
  bool SetUpEpoll();
  void EpollReader();  // one of the two threads for epoll-able input
  void PollReader();   // the one thread for other input
  // Reads once and delivers the lines completed. kEof: the input ended (its last line
  // was delivered); kEnd: a read error.
  Read ReadChunk();
  // Ends reading for every thread, then tells the owner (on_eof or on_close, once).
  void EndReading(bool at_eof);
  // Splits a chunk into lines, bounded by the limit.
  void Consume(const char* data, size_t n);
  // Keeps what PeekMessage needs of a part of a line being discarded.
  void KeepDropped(std::string_view part);
  // The end of a discarded line (its newline, or EOF: then it was cut off and its last
  // bytes prove nothing): reported once, with what could be read of it.
  void ReportDropped(bool at_eof);
  void Deliver();
};

namespace {
// The state whose input this thread is delivering, for AdoptTask.
thread_local StdioState* t_delivering = nullptr;

struct DeliveringScope {
  explicit DeliveringScope(StdioState* s) { t_delivering = s; }
  ~DeliveringScope() { t_delivering = nullptr; }
  DeliveringScope(const DeliveringScope&) = delete;
  DeliveringScope& operator=(const DeliveringScope&) = delete;
};

constexpr uint64_t kInputTag = 1, kStopTag = 2;
}  // namespace

void StdioState::Deliver() {
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (!IsBlank(line) && callbacks.on_message) callbacks.on_message(std::move(line));
  line.clear();
}

void StdioState::KeepDropped(std::string_view part) {
  dropped_bytes += part.size();
  if (dropped_head.size() < jsonrpc::kIdScanBytes) {
    dropped_head.append(part.substr(0, jsonrpc::kIdScanBytes - dropped_head.size()));
  }
  if (part.size() >= jsonrpc::kIdScanBytes) {
    dropped_tail.assign(part.substr(part.size() - jsonrpc::kIdScanBytes));
  } else {
    dropped_tail.append(part);
    if (dropped_tail.size() > jsonrpc::kIdScanBytes) {
      dropped_tail.erase(0, dropped_tail.size() - jsonrpc::kIdScanBytes);
    }
  }
}

void StdioState::ReportDropped(bool at_eof) {
  const size_t limit = options.max_message_bytes;
  log::Warn("stdio: dropped an incoming message of " + std::to_string(dropped_bytes) +
            " bytes, over the limit of " + std::to_string(limit));
  jsonrpc::Peek peek =
      jsonrpc::PeekMessage(dropped_head, at_eof ? std::string_view() : dropped_tail);
  discarding = false;
  dropped_head.clear();
  dropped_tail.clear();
  const size_t size = dropped_bytes;
  dropped_bytes = 0;
  if (!callbacks.on_error) return;
  callbacks.on_error(
      RpcError{kInvalidRequest,
               "Invalid Request: message of " + std::to_string(size) +
                   " bytes exceeds the maximum message size of " + std::to_string(limit) +
                   " bytes; it was discarded (send large data in smaller parts)",
               nullptr},
      std::move(peek));
}

void StdioState::Consume(const char* data, size_t n) {
  size_t limit = options.max_message_bytes;
  size_t pos = 0;
  while (pos < n && !closed.load()) {
    const char* nl = static_cast<const char*>(std::memchr(data + pos, '\n', n - pos));
    size_t end = nl ? static_cast<size_t>(nl - data) : n;
    const std::string_view part(data + pos, end - pos);
    if (discarding) {
      KeepDropped(part);
    } else if (line.size() + part.size() > limit) {
      // Too big: stop accumulating now and skip to the end of the line, keeping only its
      // ends; it is answered once, when its end is seen.
      discarding = true;
      KeepDropped(line);
      KeepDropped(part);
      line.clear();
      line.shrink_to_fit();
    } else {
      line.append(part);
    }
    if (!nl) break;
    if (discarding) {
      ReportDropped(/*at_eof=*/false);
    } else {
      Deliver();
    }
    pos = end + 1;
  }
}

StdioState::Read StdioState::ReadChunk() {
  ssize_t n;
  do {
    n = ::read(options.in_fd, chunk.data(), chunk.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (errno == EAGAIN) return Read::kMore;
    log::Error(std::string("stdio: read: ") + std::strerror(errno));
    return Read::kEnd;
  }
  DeliveringScope scope(epoll >= 0 ? this : nullptr);
  if (n == 0) {  // EOF: a final line without newline still counts
    if (!closed.load()) {
      if (discarding) {
        ReportDropped(/*at_eof=*/true);
      } else {
        Deliver();
      }
    }
    return Read::kEof;
  }
  Consume(chunk.data(), static_cast<size_t>(n));
  return Read::kMore;
}

void StdioState::EndReading(bool at_eof) {
  {
    // Waits for a delivery in progress on the other thread: callbacks stay one at a time.
    std::lock_guard lock(read_mu);
    if (finished.exchange(true)) return;
  }
  char byte = 1;  // the other reader leaves its epoll_wait
  [[maybe_unused]] ssize_t ignored = ::write(wake[1], &byte, 1);
  if (at_eof && callbacks.on_eof && !closed.load()) {
    callbacks.on_eof();  // half-close: writing goes on until Close()
    return;
  }
  closed.store(true);
  if (callbacks.on_close) callbacks.on_close();
}

bool StdioState::SetUpEpoll() {
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return false;
  epoll_event input{EPOLLIN | EPOLLONESHOT, {.u64 = kInputTag}};
  if (::epoll_ctl(ep, EPOLL_CTL_ADD, options.in_fd, &input) != 0) {  // EPERM: a regular file
    ::close(ep);
    return false;
  }
  for (int fd : {wake[0], options.stop_fd}) {
    epoll_event stop{EPOLLIN, {.u64 = kStopTag}};
    if (fd >= 0 && ::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &stop) != 0) {
      ::close(ep);
      return false;
    }
  }
  epoll = ep;
  return true;
}

void StdioState::EpollReader() {
  for (;;) {
    epoll_event events[3];
    waiting.fetch_add(1);
    int n = ::epoll_wait(epoll, events, 3, -1);
    waiting.fetch_sub(1);
    if (finished.load()) return;
    if (n < 0) {
      if (errno == EINTR) continue;
      log::Error(std::string("stdio: epoll_wait: ") + std::strerror(errno));
      return EndReading(false);
    }
    bool input = false, stop = false;
    for (int i = 0; i < n; ++i) (events[i].data.u64 == kInputTag ? input : stop) = true;
    if (stop || closed.load()) return EndReading(false);
    if (!input) continue;
    std::function<void()> task;
    Read read;
    {
      std::lock_guard lock(read_mu);
      if (finished.load()) return;  // the other thread ended reading meanwhile
      read = ReadChunk();
      task = std::move(adopted);
      adopted = nullptr;
    }
    if (read != Read::kMore) {
      // A task adopted from the last lines still runs: the owner counts it as in flight
      // (on_eof drains, on_close cancels).
      EndReading(read == Read::kEof);
      if (task) task();
      return;
    }
    epoll_event input_again{EPOLLIN | EPOLLONESHOT, {.u64 = kInputTag}};
    if (::epoll_ctl(epoll, EPOLL_CTL_MOD, options.in_fd, &input_again) != 0) {
      log::Error(std::string("stdio: epoll_ctl: ") + std::strerror(errno));
      EndReading(false);
      if (task) task();
      return;
    }
    if (task) task();  // the other thread reads meanwhile
  }
}

void StdioState::PollReader() {
  for (;;) {
    pollfd fds[3] = {
        {options.in_fd, POLLIN, 0}, {wake[0], POLLIN, 0}, {options.stop_fd, POLLIN, 0}};
    if (closed.load()) return EndReading(false);
    int rc = ::poll(fds, options.stop_fd >= 0 ? 3 : 2, -1);
    if (rc < 0) {
      if (errno == EINTR) continue;
      log::Error(std::string("stdio: poll: ") + std::strerror(errno));
      return EndReading(false);
    }
    if (fds[1].revents || (options.stop_fd >= 0 && fds[2].revents)) return EndReading(false);
    if (!fds[0].revents) continue;
    if (Read read = ReadChunk(); read != Read::kMore) return EndReading(read == Read::kEof);
  }
}

struct StdioTransport::Impl {
  std::shared_ptr<StdioState> state = std::make_shared<StdioState>();
  std::thread readers[2];
};

StdioTransport::StdioTransport(StdioOptions options) : impl_(std::make_unique<Impl>()) {
  if (options.max_message_bytes == 0) options.max_message_bytes = kDefaultLimit;
  impl_->state->options = options;
  if (::pipe2(impl_->state->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw std::runtime_error(std::string("stdio transport: pipe2: ") + std::strerror(errno));
  }
}

StdioTransport::~StdioTransport() {
  Close();
  // Destroyed from a callback or a task on one of our own threads: that thread cannot be
  // joined, and the other may be waiting for it (EndReading), so both are let go; they
  // own the state and leave once they see the close.
  bool on_reader = false;
  for (std::thread& reader : impl_->readers) {
    on_reader = on_reader || reader.get_id() == std::this_thread::get_id();
  }
  for (std::thread& reader : impl_->readers) {
    if (!reader.joinable()) continue;
    if (on_reader) {
      reader.detach();
    } else {
      reader.join();
    }
  }
}

void StdioTransport::Start(TransportCallbacks callbacks) {
  if (impl_->readers[0].joinable()) return;
  StdioState& s = *impl_->state;
  s.callbacks = std::move(callbacks);
  if (!s.SetUpEpoll()) {
    impl_->readers[0] = std::thread([state = impl_->state] { state->PollReader(); });
    return;
  }
  for (std::thread& reader : impl_->readers) {
    reader = std::thread([state = impl_->state] { state->EpollReader(); });
  }
}

int StdioTransport::IdleReaders() const { return impl_->state->waiting.load(); }

bool StdioTransport::AdoptTask(std::function<void()>& task) {
  StdioState& s = *impl_->state;
  // Only from inside delivery on a reader thread, one task per chunk, and only while
  // another reader waits for input: it reads while this one runs the task.
  if (t_delivering != &s || s.adopted || s.waiting.load() == 0 || s.finished.load()) return false;
  s.adopted = std::move(task);
  return true;
}

bool StdioTransport::Send(const Json& message) {
  StdioState& s = *impl_->state;
  std::string text = message.dump(-1, ' ', false, Json::error_handler_t::replace);
  text.push_back('\n');
  std::lock_guard lock(s.write_mu);
  if (s.closed.load()) return false;
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(s.options.out_fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        pollfd p{s.options.out_fd, POLLOUT, 0};
        ::poll(&p, 1, 1000);
        continue;
      }
      log::Error(std::string("stdio: write: ") + std::strerror(errno));
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

void StdioTransport::Close() {
  StdioState& s = *impl_->state;
  if (s.closed.exchange(true)) return;
  char byte = 1;  // wakes the readers: the pipe stays readable, so every one of them sees it
  [[maybe_unused]] ssize_t ignored = ::write(s.wake[1], &byte, 1);
}

// ---- ServeStdio ----

int ServeStdio(Server& server, StdioOptions options) {
  if (options.max_message_bytes == 0)
    options.max_message_bytes = server.options().max_message_bytes;
  auto session = server.Connect(std::make_unique<StdioTransport>(options));
  session->Wait();
  session->Close();
  log::Info("stdio: session ended");
  return 0;
}

}  // namespace mcp
