// The artifact store (see artifact_cache.h).
#include "packages/artifact_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <system_error>
#include <vector>

namespace mcpcell::packages {

namespace fs = std::filesystem;

namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Result<void> MakeDir(const fs::path& p) {
  std::error_code ec;
  fs::create_directories(p, ec);
  if (ec) return Error::Msg("mkdir -p \"" + p.string() + "\": " + ec.message());
  chmod(p.c_str(), 0700);
  return {};
}

}  // namespace

Result<std::unique_ptr<ArtifactCache>> ArtifactCache::Open(fs::path dir, uint64_t max_bytes) {
  if (dir.empty() || !dir.is_absolute())
    return Error::Msg("package cache directory \"" + dir.string() + "\" must be absolute");
  std::unique_ptr<ArtifactCache> cache(new ArtifactCache(dir, max_bytes));
  for (const char* sub : {"tmp", "sha1", "sha256", "sha512"}) {
    if (auto st = MakeDir(dir / sub); !st.ok()) return st.error();
  }
  // Leftovers of an interrupted download are never artifacts.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir / "tmp", ec)) fs::remove(e.path(), ec);
  for (const char* algo : {"sha1", "sha256", "sha512"}) {
    auto digest = DigestFromName(algo);
    for (const auto& e : fs::recursive_directory_iterator(dir / algo, ec)) {
      if (!e.is_regular_file()) continue;
      std::string hex = e.path().filename().string();
      if (!IsLowerHex(hex, DigestHexLength(*digest))) continue;
      struct stat st {};
      if (stat(e.path().c_str(), &st) != 0) continue;
      Entry entry{static_cast<uint64_t>(st.st_size),
                  static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
      cache->entries_[std::string(algo) + "/" + hex] = entry;
      cache->counters_.bytes += entry.size;
    }
  }
  if (ec) return Error::Msg("scan \"" + dir.string() + "\": " + ec.message());
  std::lock_guard lock(cache->mu_);
  cache->EvictLocked("");
  return cache;
}

fs::path ArtifactCache::PathOf(const std::string& key) const {
  size_t slash = key.find('/');
  return dir_ / key.substr(0, slash) / key.substr(slash + 1, 2) / key.substr(slash + 1);
}

void ArtifactCache::Touch(const std::string& key) {
  // mtime is the use time that survives restarts; failure only costs LRU accuracy.
  utimensat(AT_FDCWD, PathOf(key).c_str(), nullptr, 0);
  auto it = entries_.find(key);
  if (it != entries_.end()) it->second.last_use = NowNs();
}

Result<fs::path> ArtifactCache::Get(DigestAlgo algo, const std::string& hex, uint64_t max_bytes,
                                    const Download& download, bool* hit) {
  if (!IsLowerHex(hex, DigestHexLength(algo)))
    return Error::Msg("\"" + hex + "\" is not a " + std::string(DigestName(algo)) + " digest");
  std::string key = std::string(DigestName(algo)) + "/" + hex;
  std::shared_ptr<InFlight> flight;
  bool leader = false;
  {
    std::unique_lock lock(mu_);
    if (entries_.count(key)) {
      Touch(key);
      ++counters_.hits;
      *hit = true;
      return PathOf(key);
    }
    *hit = false;
    ++counters_.misses;
    auto it = in_flight_.find(key);
    if (it == in_flight_.end()) {
      flight = std::make_shared<InFlight>();
      in_flight_[key] = flight;
      leader = true;
    } else {
      flight = it->second;
    }
    if (!leader) {
      cv_.wait(lock, [&] { return flight->done; });
      return flight->result;
    }
  }
  Result<fs::path> result = Store(algo, hex, max_bytes, download);
  std::lock_guard lock(mu_);
  flight->result = result;
  flight->done = true;
  in_flight_.erase(key);
  cv_.notify_all();
  return result;
}

Result<fs::path> ArtifactCache::Store(DigestAlgo algo, const std::string& hex, uint64_t max_bytes,
                                      const Download& download) {
  std::string key = std::string(DigestName(algo)) + "/" + hex;
  fs::path temp;
  {
    std::lock_guard lock(mu_);
    temp =
        dir_ / "tmp" /
        (hex.substr(0, 16) + "." + std::to_string(getpid()) + "." + std::to_string(++temp_serial_));
    ++counters_.fetches;
  }
  int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Error::Sys("open(\"" + temp.string() + "\")");
  Digest digest(algo);
  uint64_t written = 0;
  std::string write_error;
  Sink sink = [&](const char* data, size_t size) {
    if (written + size > max_bytes) {
      write_error = "the artifact is larger than " + std::to_string(max_bytes) +
                    " bytes (packages.max_artifact_size)";
      return false;
    }
    digest.Update(data, size);
    while (size > 0) {
      ssize_t n = write(fd, data, size);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        write_error = Error::Sys("write(\"" + temp.string() + "\")").message;
        return false;
      }
      data += n;
      size -= static_cast<size_t>(n);
      written += static_cast<uint64_t>(n);
    }
    return true;
  };
  Status fetched = download(sink);
  auto fail = [&](Error e) {
    close(fd);
    unlink(temp.c_str());
    return e;
  };
  if (!write_error.empty()) return fail(Error::Msg(write_error));
  if (!fetched.ok()) return fail(fetched.error());
  if (fsync(fd) != 0) return fail(Error::Sys("fsync(\"" + temp.string() + "\")"));
  std::string got = digest.FinalHex();
  if (got != hex) {
    return fail(Error{"hash mismatch: the registry published " + std::string(DigestName(algo)) +
                          " " + hex + " but the download has " + got,
                      kHashMismatch});
  }
  close(fd);
  fs::path final_path = PathOf(key);
  if (auto st = MakeDir(final_path.parent_path()); !st.ok()) return fail(st.error());
  if (rename(temp.c_str(), final_path.c_str()) != 0)
    return fail(Error::Sys("rename(\"" + temp.string() + "\", \"" + final_path.string() + "\")"));
  // The rename is durable once its directory is.
  int dfd = open(final_path.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  std::lock_guard lock(mu_);
  auto [it, inserted] = entries_.emplace(key, Entry{written, NowNs()});
  if (inserted) counters_.bytes += written;
  EvictLocked(key);
  return final_path;
}

void ArtifactCache::EvictLocked(const std::string& keep) {
  if (counters_.bytes <= max_bytes_) {
    counters_.artifacts = entries_.size();
    return;
  }
  std::vector<std::pair<int64_t, std::string>> order;
  for (const auto& [key, e] : entries_) order.emplace_back(e.last_use, key);
  std::sort(order.begin(), order.end());
  for (const auto& [use, key] : order) {
    if (counters_.bytes <= max_bytes_) break;
    if (key == keep) continue;
    // A reader that already opened the file keeps its bytes (unlink semantics).
    unlink(PathOf(key).c_str());
    counters_.bytes -= entries_[key].size;
    entries_.erase(key);
  }
  counters_.artifacts = entries_.size();
}

ArtifactCache::Counters ArtifactCache::counters() const {
  std::lock_guard lock(mu_);
  Counters c = counters_;
  c.artifacts = entries_.size();
  return c;
}

}  // namespace mcpcell::packages
