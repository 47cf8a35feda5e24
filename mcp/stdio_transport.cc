#include "mcp/stdio_transport.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "mcp/log.h"
#include "mcp/server.h"
#include "mcp/session.h"

namespace mcp {
namespace {
constexpr size_t kDefaultLimit = 16 * 1024 * 1024;
constexpr size_t kChunk = 64 * 1024;

bool IsBlank(const std::string& s) { return s.find_first_not_of(" \t\r") == std::string::npos; }
}  // namespace

// Shared by the transport object and its reader thread, so the thread may outlive the
// object when the object is destroyed from inside a callback.
struct StdioState {
  StdioOptions options;
  TransportCallbacks callbacks;
  std::mutex write_mu;
  std::atomic<bool> closed{false};
  int wake[2] = {-1, -1};  // Close() writes to wake[1]; the reader polls wake[0]

  ~StdioState() {
    for (int fd : wake) {
      if (fd >= 0) ::close(fd);
    }
  }

  void ReadLoop();
  // Splits a chunk into lines, bounded by the limit; false to stop reading.
  void Consume(const char* data, size_t n, std::string& line, bool& discarding);
  void Deliver(std::string& line);
};

void StdioState::Deliver(std::string& line) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (!IsBlank(line) && callbacks.on_message) callbacks.on_message(std::move(line));
  line.clear();
}

void StdioState::Consume(const char* data, size_t n, std::string& line, bool& discarding) {
  size_t limit = options.max_message_bytes;
  size_t pos = 0;
  while (pos < n && !closed.load()) {
    const char* nl = static_cast<const char*>(std::memchr(data + pos, '\n', n - pos));
    size_t end = nl ? static_cast<size_t>(nl - data) : n;
    if (!discarding) {
      if (line.size() + (end - pos) > limit) {
        // Too big: stop accumulating now, drop the rest of the line, answer once.
        log::Warn("stdio: dropped an incoming message larger than " + std::to_string(limit) +
                  " bytes");
        line.clear();
        line.shrink_to_fit();
        discarding = true;
        if (callbacks.on_error) {
          callbacks.on_error(RpcError{kInvalidRequest,
                                      "Invalid Request: message exceeds the maximum message size "
                                      "of " +
                                          std::to_string(limit) + " bytes; it was discarded",
                                      nullptr});
        }
      } else {
        line.append(data + pos, end - pos);
      }
    }
    if (!nl) break;
    if (!discarding) Deliver(line);
    discarding = false;
    pos = end + 1;
  }
}

void StdioState::ReadLoop() {
  std::string line;
  bool discarding = false;
  std::string chunk(kChunk, '\0');
  while (!closed.load()) {
    pollfd fds[3] = {
        {options.in_fd, POLLIN, 0}, {wake[0], POLLIN, 0}, {options.stop_fd, POLLIN, 0}};
    int rc = ::poll(fds, options.stop_fd >= 0 ? 3 : 2, -1);
    if (rc < 0) {
      if (errno == EINTR) continue;
      log::Error(std::string("stdio: poll: ") + std::strerror(errno));
      break;
    }
    if (fds[1].revents || (options.stop_fd >= 0 && fds[2].revents)) break;
    if (!fds[0].revents) continue;
    ssize_t n = ::read(options.in_fd, chunk.data(), chunk.size());
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      log::Error(std::string("stdio: read: ") + std::strerror(errno));
      break;
    }
    if (n == 0) {  // EOF: a final line without newline still counts
      if (!discarding && !closed.load()) Deliver(line);
      if (callbacks.on_eof && !closed.load()) {
        callbacks.on_eof();  // half-close: writing goes on until Close()
        return;
      }
      break;
    }
    Consume(chunk.data(), static_cast<size_t>(n), line, discarding);
  }
  closed.store(true);
  if (callbacks.on_close) callbacks.on_close();
}

struct StdioTransport::Impl {
  std::shared_ptr<StdioState> state = std::make_shared<StdioState>();
  std::thread reader;
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
  if (!impl_->reader.joinable()) return;
  if (impl_->reader.get_id() == std::this_thread::get_id()) {
    impl_->reader.detach();  // destroyed from our own callback; the state outlives us
  } else {
    impl_->reader.join();
  }
}

void StdioTransport::Start(TransportCallbacks callbacks) {
  if (impl_->reader.joinable()) return;
  impl_->state->callbacks = std::move(callbacks);
  impl_->reader = std::thread([state = impl_->state] { state->ReadLoop(); });
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
  char byte = 1;
  [[maybe_unused]] ssize_t ignored = ::write(s.wake[1], &byte, 1);
}

// ---- ServeStdio ----

namespace {
int g_signal_pipe = -1;
extern "C" void OnStopSignal(int) {
  char byte = 1;
  int saved = errno;
  [[maybe_unused]] ssize_t ignored = ::write(g_signal_pipe, &byte, 1);
  errno = saved;
}
}  // namespace

int ServeStdio(Server& server, StdioOptions options) {
  int stop[2];
  if (::pipe2(stop, O_CLOEXEC | O_NONBLOCK) != 0) {
    log::Error(std::string("stdio: pipe2: ") + std::strerror(errno));
    return 1;
  }
  g_signal_pipe = stop[1];
  struct sigaction sa {
  }, old_term{}, old_int{}, old_pipe{};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, &old_term);
  ::sigaction(SIGINT, &sa, &old_int);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &old_pipe);

  if (options.max_message_bytes == 0)
    options.max_message_bytes = server.options().max_message_bytes;
  options.stop_fd = stop[0];
  auto session = server.Connect(std::make_unique<StdioTransport>(options));
  session->Wait();
  session->Close();
  log::Info("stdio: session ended");

  ::sigaction(SIGTERM, &old_term, nullptr);
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGPIPE, &old_pipe, nullptr);
  g_signal_pipe = -1;
  ::close(stop[0]);
  ::close(stop[1]);
  return 0;
}

}  // namespace mcp
