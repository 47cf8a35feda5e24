#include "sandbox/init/output_pump.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>

namespace mcpcell::sandbox {
namespace {
constexpr size_t kReadChunk = 64 * 1024;
constexpr int kRoundsPerDrain = 16;
// Room kept below the cap for the marker line.
constexpr uint64_t kMarkerRoom = 256;
}  // namespace

OutputPump::OutputPump(UniqueFd pipe, UniqueFd file, uint64_t cap)
    : pipe_(std::move(pipe)), file_(std::move(file)), cap_(std::max(cap, 2 * kMarkerRoom)) {}

bool OutputPump::Drain() {
  char buffer[kReadChunk];
  for (int round = 0; round < kRoundsPerDrain; ++round) {
    ssize_t n = ::read(pipe_.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    if (n <= 0) {
      pipe_.Reset();
      file_.Reset();
      return false;
    }
    if (storing_) Store(buffer, static_cast<size_t>(n));
  }
  return true;
}

void OutputPump::Store(const char* data, size_t size) {
  const uint64_t room = cap_ - kMarkerRoom - written_;
  const size_t take = static_cast<size_t>(std::min<uint64_t>(size, room));
  size_t done = 0;
  while (done < take) {
    ssize_t n = ::write(file_.get(), data + done, take - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      StopStoring(std::string("writing it failed: ") + strerrorname_np(errno));
      return;
    }
    done += static_cast<size_t>(n);
  }
  written_ += done;
  if (take < size) {
    StopStoring("the cap of " + std::to_string(cap_) +
                " bytes is reached; later output is discarded");
  }
}

void OutputPump::StopStoring(const std::string& why) {
  storing_ = false;
  std::string line = std::string(kOutputStoppedMarker) + ": " + why + "]\n";
  line.resize(std::min<size_t>(line.size(), kMarkerRoom));
  ssize_t ignored = ::write(file_.get(), line.data(), line.size());
  (void)ignored;
  file_.Reset();
}

}  // namespace mcpcell::sandbox
