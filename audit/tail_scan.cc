#include "audit/tail_scan.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "audit/record.h"
#include "base/unique_fd.h"

namespace mcpcell::audit {
namespace {

constexpr uint64_t kTailWindow = 1 << 20;

struct Line {
  uint64_t offset;
  std::string_view text;  // without the newline
};

Result<std::string> ReadRange(int fd, uint64_t offset, uint64_t size, const std::string& path) {
  std::string data(size, '\0');
  uint64_t got = 0;
  while (got < size) {
    ssize_t n = ::pread(fd, data.data() + got, size - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::Sys("pread(\"" + path + "\")");
    if (n == 0) break;
    got += static_cast<uint64_t>(n);
  }
  data.resize(got);
  return data;
}

// The good record at line i, if it is one.
std::optional<nlohmann::json> GoodRecord(const Line& line) {
  auto record = ParseRecordLine(line.text);
  if (!record || RecordHash(*record) != (*record)["hash"].get<std::string>()) return std::nullopt;
  return std::move(*record);
}

// Looks for the damage after, or at, the last good record lines[good].
void CheckTail(const std::vector<Line>& lines, size_t good, TailState* state) {
  const nlohmann::json& last = *state->last;
  uint64_t good_end = lines[good].offset + lines[good].text.size() + 1;
  if (good + 1 < lines.size() || state->unterminated) {
    state->damaged = true;
    state->torn = good + 1 == lines.size() && state->unterminated;
    state->cut_offset = good_end;
    state->reason = std::to_string(state->size - good_end) + " byte(s) after seq " +
                    std::to_string(last["seq"].get<uint64_t>()) + " are not a whole record";
    return;
  }
  if (good == 0) return;
  auto before = GoodRecord(lines[good - 1]);
  if (!before) return;  // older damage: verify reports it; the tail itself chains
  if (last["prev"] != (*before)["hash"] ||
      last["seq"].get<uint64_t>() != (*before)["seq"].get<uint64_t>() + 1) {
    state->damaged = true;
    state->cut_offset = lines[good].offset;
    state->reason = "the last record (seq " + std::to_string(last["seq"].get<uint64_t>()) +
                    ") does not chain onto seq " + std::to_string((*before)["seq"].get<uint64_t>());
  }
}

}  // namespace

Result<TailState> ScanTail(const std::string& path) {
  TailState state;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) {
    if (errno == ENOENT) return state;
    return Error::Sys("open(\"" + path + "\")");
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Error::Sys("fstat(\"" + path + "\")");
  state.size = static_cast<uint64_t>(st.st_size);
  if (state.size == 0) return state;
  uint64_t start = state.size > kTailWindow ? state.size - kTailWindow : 0;
  auto data = ReadRange(fd.get(), start, state.size - start, path);
  if (!data) return data.error();
  std::string_view view(*data);
  size_t pos = 0;
  if (start > 0)
    pos = view.find('\n') == std::string_view::npos ? view.size() : view.find('\n') + 1;
  std::vector<Line> lines;
  while (pos < view.size()) {
    size_t nl = view.find('\n', pos);
    if (nl == std::string_view::npos) break;
    lines.push_back({start + pos, view.substr(pos, nl - pos)});
    pos = nl + 1;
  }
  state.unterminated = view.back() != '\n';
  for (size_t i = lines.size(); i-- > 0;) {
    if (auto record = GoodRecord(lines[i])) {
      state.last = std::move(*record);
      CheckTail(lines, i, &state);
      return state;
    }
  }
  state.damaged = true;
  state.cut_offset = start;
  state.reason = "no whole record in the last " + std::to_string(state.size - start) + " byte(s)";
  return state;
}

Result<std::optional<nlohmann::json>> LastGoodRecord(int fd, uint64_t size,
                                                     const std::string& path) {
  // Windows from 4 KiB up, until the last line's start is inside one.
  for (uint64_t window = 4096;; window *= 4) {
    const uint64_t start = size > window ? size - window : 0;
    auto data = ReadRange(fd, start, size - start, path);
    if (!data) return data.error();
    if (data->size() != size - start || data->empty() || data->back() != '\n')
      return std::optional<nlohmann::json>();
    const size_t nl = data->rfind('\n', data->size() - 2);
    if (nl == std::string::npos && start > 0 && window < kTailWindow) continue;
    const size_t begin = nl == std::string::npos ? 0 : nl + 1;
    if (nl == std::string::npos && start > 0) return std::optional<nlohmann::json>();
    return GoodRecord(
        {start + begin, std::string_view(*data).substr(begin, data->size() - 1 - begin)});
  }
}

std::optional<nlohmann::json> FirstRecord(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return std::nullopt;
  auto data = ReadRange(fd.get(), 0, 64 * 1024, path);
  if (!data) return std::nullopt;
  size_t nl = data->find('\n');
  if (nl == std::string::npos) return std::nullopt;
  auto record = ParseRecordLine(std::string_view(*data).substr(0, nl));
  if (!record) return std::nullopt;
  return std::move(*record);
}

}  // namespace mcpcell::audit
