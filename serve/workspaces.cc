#include "serve/workspaces.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "policies/workspace_name.h"

namespace mcpcell::serve {
namespace {

namespace fs = std::filesystem;
using policies::WorkspaceOwnerDir;

constexpr std::chrono::milliseconds kWaitStep{100};

std::string Shown(const WorkspaceId& id) {
  return "workspace \"" + id.name + "\" of " +
         (id.owner.empty() ? std::string("the server's own sessions")
                           : "tenant \"" + id.owner + "\"");
}

Status CheckId(const WorkspaceId& id) {
  if (Status s = policies::CheckWorkspaceName(id.name); !s) return s;
  if (id.owner.empty()) return Ok();
  if (id.owner == policies::kNoTenantOwner) {
    return Error::Msg("tenant \"_\" cannot own named workspaces: \"_\" holds the server's own");
  }
  if (Status s = policies::CheckWorkspaceName(id.owner); !s) {
    return Error::Msg("tenant \"" + id.owner +
                      "\" cannot own named workspaces: its name must be 1-64 of [A-Za-z0-9._-], "
                      "not starting with \".\"");
  }
  return Ok();
}

// mkdir -p, each new directory with `mode`.
Status MakeDirs(const std::string& path, mode_t mode) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i != path.size() && path[i] != '/') continue;
    std::string part = path.substr(0, i);
    if (::mkdir(part.c_str(), mode) != 0 && errno != EEXIST) {
      return Error::Sys("mkdir(\"" + part + "\")");
    }
  }
  return Ok();
}

uint64_t DirBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code ec2;
    if (it->is_regular_file(ec2) && !it->is_symlink(ec2)) total += it->file_size(ec2);
  }
  return total;
}

// Written beside and renamed over, so a reader never sees half a record.
Status WriteFileAtomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out.flush()) return Error::Sys("write \"" + tmp + "\"");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Error::Sys("rename(\"" + tmp + "\")");
  return Ok();
}

std::string ReadAll(int fd) {
  std::string text;
  char buf[4096];
  off_t at = 0;
  for (ssize_t n; (n = ::pread(fd, buf, sizeof buf, at)) > 0; at += n) text.append(buf, n);
  return text;
}

std::optional<WorkspaceHolder> ParseHolder(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  WorkspaceHolder h;
  if (j.is_object()) {
    h.pid = j.value("pid", int64_t{0});
    h.cell = j.value("cell", "");
    h.session = j.value("session", "");
    h.since = j.value("since", "");
  }
  return h;
}

std::string HolderText(const WorkspaceHolder& h) {
  return nlohmann::json{
      {"pid", h.pid}, {"cell", h.cell}, {"session", h.session}, {"since", h.since}}
      .dump();
}

void WriteHolder(int fd, const WorkspaceHolder& h) {
  const std::string text = HolderText(h);
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, text.data(), text.size(), 0);
}

Status WriteRecord(const std::string& path, const WorkspaceId& id, WallClock::time_point used,
                   uint64_t bytes) {
  nlohmann::json j = {{"tenant", WorkspaceOwnerDir(id.owner)},
                      {"name", id.name},
                      {"last_used", FormatUtc(used)},
                      {"bytes", bytes}};
  return WriteFileAtomic(path, j.dump() + "\n");
}

// Locks `path` (made if missing) without waiting: the fd, or an invalid one when another
// holder has it. Starts over when the file was unlinked or replaced while being locked.
Result<UniqueFd> TryLock(const std::string& path) {
  for (;;) {
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    if (!fd) return Error::Sys("open(\"" + path + "\")");
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK) return UniqueFd();
      return Error::Sys("flock(\"" + path + "\", LOCK_EX)");
    }
    struct stat held, now;
    if (::fstat(fd.get(), &held) != 0) return Error::Sys("fstat(\"" + path + "\")");
    if (::stat(path.c_str(), &now) == 0 && now.st_ino == held.st_ino && now.st_dev == held.st_dev)
      return fd;
  }
}

// The holder written in a lock file that someone holds, or nullopt when it is free.
std::optional<WorkspaceHolder> CurrentHolder(const std::string& lock_path) {
  UniqueFd fd(::open(lock_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  if (::flock(fd.get(), LOCK_SH | LOCK_NB) == 0) return std::nullopt;
  return ParseHolder(ReadAll(fd.get()));
}

std::string BusyMessage(const WorkspaceId& id, const std::optional<WorkspaceHolder>& h) {
  std::string by = "another session";
  if (h && !h->cell.empty()) {
    by += " (cell " + h->cell + (h->session.empty() ? "" : ", session " + h->session) +
          ", server pid " + std::to_string(h->pid) +
          (h->since.empty() ? "" : ", since " + h->since) + ")";
  }
  return Shown(id) + " is in use by " + by +
         ": one live session at a time may use it; it is free again when that session ends";
}

std::string MetaDir(const std::string& root, const std::string& owner) {
  return root + "/" + owner + "/.meta";
}

}  // namespace

std::string FormatUtc(WallClock::time_point t) {
  const std::time_t secs = WallClock::to_time_t(t);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::optional<WallClock::time_point> ParseUtc(const std::string& text) {
  std::tm tm{};
  const char* end = ::strptime(text.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  return WallClock::from_time_t(::timegm(&tm));
}

WorkspaceLock::WorkspaceLock(WorkspaceId id, std::string dir, std::string meta_path, UniqueFd fd)
    : id_(std::move(id)),
      dir_(std::move(dir)),
      meta_path_(std::move(meta_path)),
      fd_(std::move(fd)) {}

WorkspaceLock::~WorkspaceLock() {
  // Best effort: a record that cannot be written leaves the one written at lock time.
  (void)WriteRecord(meta_path_ + ".json", id_, WallClock::now(), DirBytes(dir_));
  (void)!::ftruncate(fd_.get(), 0);
}

void WorkspaceLock::NoteSession(const std::string& cell_id, const std::string& session) {
  auto h = ParseHolder(ReadAll(fd_.get()));
  h->cell = cell_id;
  h->session = session;
  WriteHolder(fd_.get(), *h);
}

WorkspaceStore::WorkspaceStore(std::string state_dir)
    : root_(policies::WorkspacesRoot(state_dir)) {}

Result<std::unique_ptr<WorkspaceLock>> WorkspaceStore::Lock(
    const WorkspaceId& id, const std::string& cell_id, policies::WorkspaceBusy busy,
    std::chrono::milliseconds wait_for) const {
  if (Status s = CheckId(id); !s) return s.error();
  const std::string owner_dir = root_ + "/" + WorkspaceOwnerDir(id.owner);
  // The path to a workspace must be traversable by the cells' own uids (their init binds
  // it), not listable; the records are the server's alone.
  if (Status s = MakeDirs(owner_dir, 0711); !s) return s.error().Wrap(Shown(id));
  const std::string meta = MetaDir(root_, WorkspaceOwnerDir(id.owner)) + "/" + id.name;
  if (Status s = MakeDirs(MetaDir(root_, WorkspaceOwnerDir(id.owner)), 0700); !s)
    return s.error().Wrap(Shown(id));
  const auto deadline = std::chrono::steady_clock::now() + wait_for;
  Result<UniqueFd> fd = TryLock(meta + ".lock");
  while (fd && !fd->valid() && busy == policies::WorkspaceBusy::kWait &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(kWaitStep);
    fd = TryLock(meta + ".lock");
  }
  if (!fd) return fd.error().Wrap(Shown(id));
  if (!fd->valid()) {
    std::string message = BusyMessage(id, CurrentHolder(meta + ".lock"));
    if (busy == policies::WorkspaceBusy::kWait) {
      message += " (waited " + std::to_string(wait_for.count() / 1000) + " s)";
    }
    return Error::Msg(message);
  }
  const std::string dir = owner_dir + "/" + id.name;
  if (Status s = MakeDirs(dir, 0755); !s) return s.error().Wrap(Shown(id));
  // As for --workspace (policies/compiler.cc, OpenToCells): a root server maps each cell's
  // sandbox user to a uid of that cell's own range, so the top directory must be writable
  // by any uid; the 0711 directories above it keep other host users from finding it.
  if (::geteuid() == 0 && ::chmod(dir.c_str(), 0777) != 0)
    return Error::Sys("chmod(\"" + dir + "\", 0777)").Wrap(Shown(id));
  WorkspaceHolder holder{
      .pid = ::getpid(), .cell = cell_id, .session = "", .since = FormatUtc(WallClock::now())};
  WriteHolder(fd->get(), holder);
  uint64_t bytes = 0;
  if (auto info = Inspect(WorkspaceOwnerDir(id.owner), id.name)) bytes = info->bytes;
  if (Status s = WriteRecord(meta + ".json", id, WallClock::now(), bytes); !s)
    return s.error().Wrap(Shown(id));
  return std::make_unique<WorkspaceLock>(id, dir, meta, std::move(*fd));
}

Result<WorkspaceInfo> WorkspaceStore::Inspect(const std::string& owner,
                                              const std::string& name) const {
  WorkspaceInfo info;
  info.owner = owner;
  info.name = name;
  info.dir = root_ + "/" + owner + "/" + name;
  const std::string meta = MetaDir(root_, owner) + "/" + name;
  std::ifstream in(meta + ".json");
  if (in) {
    std::stringstream text;
    text << in.rdbuf();
    auto j = nlohmann::json::parse(text.str(), nullptr, false);
    if (j.is_object()) {
      info.last_used = ParseUtc(j.value("last_used", ""));
      info.bytes = j.value("bytes", uint64_t{0});
    }
  }
  info.holder = CurrentHolder(meta + ".lock");
  return info;
}

Result<std::vector<WorkspaceInfo>> WorkspaceStore::List(const std::string& owner) const {
  std::vector<WorkspaceInfo> out;
  std::error_code ec;
  if (!fs::exists(root_, ec)) return out;
  for (const auto& o : fs::directory_iterator(root_, ec)) {
    const std::string name = o.path().filename().string();
    if (!o.is_directory() || (!owner.empty() && name != owner)) continue;
    for (const auto& w : fs::directory_iterator(o.path(), ec)) {
      const std::string ws = w.path().filename().string();
      if (!w.is_directory() || w.is_symlink() || !policies::CheckWorkspaceName(ws)) continue;
      auto info = Inspect(name, ws);
      if (!info) return info.error();
      out.push_back(std::move(*info));
    }
  }
  if (ec) return Error::Sys("list \"" + root_ + "\"", ec.value());
  std::sort(out.begin(), out.end(), [](const WorkspaceInfo& a, const WorkspaceInfo& b) {
    return std::tie(a.owner, a.name) < std::tie(b.owner, b.name);
  });
  return out;
}

Status WorkspaceStore::Delete(const WorkspaceId& id) const {
  if (Status s = CheckId(id); !s) return s;
  const std::string owner = WorkspaceOwnerDir(id.owner);
  const std::string dir = root_ + "/" + owner + "/" + id.name;
  const std::string meta = MetaDir(root_, owner) + "/" + id.name;
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(dir, ec)) && !fs::exists(meta + ".json", ec)) {
    return Error::Msg("no " + Shown(id) + " (" + dir + ")");
  }
  Result<UniqueFd> fd = TryLock(meta + ".lock");
  if (!fd) return fd.error().Wrap(Shown(id));
  if (!fd->valid()) {
    return Error::Msg(BusyMessage(id, CurrentHolder(meta + ".lock")) + ": not deleted");
  }
  // Under the lock, so no cell can take it meanwhile; the lock file goes last.
  fs::remove_all(dir, ec);
  if (ec) return Error::Sys("remove \"" + dir + "\"", ec.value());
  if (::unlink((meta + ".json").c_str()) != 0 && errno != ENOENT)
    return Error::Sys("unlink(\"" + meta + ".json\")");
  if (::unlink((meta + ".lock").c_str()) != 0) return Error::Sys("unlink(\"" + meta + ".lock\")");
  return Ok();
}

std::vector<WorkspaceInfo> WorkspaceStore::RemoveUnused(
    WallClock::time_point now,
    const std::function<std::chrono::seconds(const std::string& owner)>& retention) const {
  std::vector<WorkspaceInfo> removed;
  auto all = List();
  if (!all) return removed;
  for (WorkspaceInfo& w : *all) {
    if (w.holder) continue;
    std::optional<WallClock::time_point> last = w.last_used;
    if (!last) {
      struct stat st;
      if (::stat(w.dir.c_str(), &st) != 0) continue;
      last = WallClock::from_time_t(st.st_mtim.tv_sec);
    }
    if (now - *last <= retention(w.owner)) continue;
    const std::string owner = w.owner == policies::kNoTenantOwner ? "" : w.owner;
    if (Delete(WorkspaceId{owner, w.name})) removed.push_back(std::move(w));
  }
  return removed;
}

}  // namespace mcpcell::serve
