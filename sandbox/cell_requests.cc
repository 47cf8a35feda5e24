// Cell's half of the backend seam (sandbox/backend.h): NamespaceBackend makes Cells, and a
// Cell's requests go to its cell init through its CellChannel.
#include <boost/asio/post.hpp>

#include "sandbox/cell.h"
#include "sandbox/cell_channel.h"
#include "sandbox/cell_reactor.h"

namespace mcpcell::sandbox {

Result<std::unique_ptr<CellInstance>> NamespaceBackend::Create(const CellSpec& spec) const {
  Result<std::unique_ptr<Cell>> cell = Cell::Create(spec, options_);
  if (!cell) return cell.error();
  return std::unique_ptr<CellInstance>(std::move(cell).value());
}

bool Cell::usable() const { return alive() && channel_ && channel_->alive(); }

// A parked cell (or one whose Unpark failed) has no channel: its requests fail, naming why.
template <typename F>
auto Cell::OnChannel(F&& request) -> decltype(request(std::declval<CellChannel&>())) {
  if (!channel_) {
    return Error::Msg("cell " + spec_.id +
                      (parked_ ? " is parked: it takes requests once unparked"
                               : " has no control channel (its set-up did not finish)"));
  }
  return request(*channel_);
}

Result<ExecResult> Cell::Exec(const ExecOptions& options) {
  return OnChannel([&](CellChannel& ch) { return ch.Exec(options); });
}
// Errors name the cell: a caller holding many execs over many cells learns which one ended.
CellChannel::ExecHandle Cell::ExecAsync(ExecOptions options, CellChannel::ExecCallback done) {
  const std::string cell = "cell " + spec_.id;
  auto named = [cell, done = std::move(done)](Result<ExecResult> r) {
    if (!r.ok()) return done(r.error().Wrap(cell));
    done(std::move(r));
  };
  if (reactor_ == nullptr) {
    // No context to post to: the only answer that cannot wait for one.
    named(Error::Msg("no reactor to run asynchronous execs on (CellCreateOptions::reactor)"));
    return {};
  }
  if (!channel_) {
    Error why = Error::Msg(parked_ ? "parked: it takes requests once unparked"
                                   : "no control channel (its set-up did not finish)");
    CellChannel::ExecHandle none;
    boost::asio::post(reactor_->context(), [named, why] { named(why); });
    return none;
  }
  return channel_->ExecAsync(reactor_->context(), std::move(options), std::move(named));
}
Status Cell::SignalExec(uint64_t exec_id, int signo) {
  return OnChannel([&](CellChannel& ch) { return ch.SignalExec(exec_id, signo); });
}
Result<control::StatsReply> Cell::Stats() {
  return OnChannel([&](CellChannel& ch) { return ch.Stats(); });
}

Result<std::string> Cell::ReadFile(const std::string& path, uint64_t max_bytes) {
  return OnChannel([&](CellChannel& ch) { return ch.ReadFile(path, max_bytes); });
}
Result<FileWindow> Cell::ReadFileRange(const std::string& path, uint64_t offset,
                                       uint64_t max_bytes) {
  return OnChannel([&](CellChannel& ch) { return ch.ReadFileRange(path, offset, max_bytes); });
}
Status Cell::WriteFile(const std::string& path, std::string_view data, uint32_t mode) {
  return OnChannel([&](CellChannel& ch) { return ch.WriteFile(path, data, mode); });
}
Status Cell::WriteFileAt(const std::string& path, uint64_t offset, std::string_view data,
                         bool truncate, uint32_t mode) {
  return OnChannel(
      [&](CellChannel& ch) { return ch.WriteFileAt(path, offset, data, truncate, mode); });
}
Status Cell::AppendFile(const std::string& path, std::string_view data, uint32_t mode) {
  return OnChannel([&](CellChannel& ch) { return ch.AppendFile(path, data, mode); });
}
Status Cell::WriteNewFile(const std::string& path, std::string_view data, uint32_t mode) {
  return OnChannel([&](CellChannel& ch) { return ch.WriteNewFile(path, data, mode); });
}
Result<std::vector<control::DirEntry>> Cell::ListDir(const std::string& path, size_t max_entries) {
  return OnChannel([&](CellChannel& ch) { return ch.ListDir(path, max_entries); });
}
Result<control::FileStat> Cell::Stat(const std::string& path, bool follow_symlinks) {
  return OnChannel([&](CellChannel& ch) { return ch.Stat(path, follow_symlinks); });
}
Status Cell::Mkdir(const std::string& path, uint32_t mode, bool parents) {
  return OnChannel([&](CellChannel& ch) { return ch.Mkdir(path, mode, parents); });
}
Status Cell::Remove(const std::string& path, bool recursive) {
  return OnChannel([&](CellChannel& ch) { return ch.Remove(path, recursive); });
}
Status Cell::Rename(const std::string& from, const std::string& to, bool no_replace) {
  return OnChannel([&](CellChannel& ch) { return ch.Rename(from, to, no_replace); });
}

}  // namespace mcpcell::sandbox
