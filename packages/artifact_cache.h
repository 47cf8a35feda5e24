// The content-addressed artifact store of the package service:
// <dir>/<algo>/<first two hex digits>/<hex>, e.g. <dir>/sha256/ab/ab12.... A file appears
// there only complete and verified (written to <dir>/tmp, fsynced, digest checked, renamed),
// so a crash never leaves a partial artifact. Use times are file mtimes (touched on every
// hit), so the least recently used order survives restarts; beyond max_bytes the least
// recently used artifacts are deleted (never the one just stored).
// Two concurrent requests for one artifact download it once: the second waits for the first.
// Threading: every method may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "base/status.h"
#include "packages/digest.h"

namespace mcpcell::packages {

// errno-style code in the Error of a fetch whose bytes did not match the expected digest.
inline constexpr int kHashMismatch = EBADMSG;

class ArtifactCache {
 public:
  // Writes chunks of the artifact; returns false to stop (the fetch then fails).
  using Sink = std::function<bool(const char* data, size_t size)>;
  // Downloads the artifact into `sink`; its error is the fetch's error.
  using Download = std::function<Status(const Sink& sink)>;

  struct Counters {
    uint64_t bytes = 0, artifacts = 0, hits = 0, misses = 0, fetches = 0;
  };

  static Result<std::unique_ptr<ArtifactCache>> Open(std::filesystem::path dir, uint64_t max_bytes);

  // The stored artifact's path, or runs `download` once (concurrent callers for the same
  // key wait for it) with at most `max_bytes`, verifies the digest and stores it.
  // `*hit` tells whether it came from the store.
  Result<std::filesystem::path> Get(DigestAlgo algo, const std::string& hex, uint64_t max_bytes,
                                    const Download& download, bool* hit);
  Counters counters() const;

 private:
  struct Entry {
    uint64_t size = 0;
    int64_t last_use = 0;  // nanoseconds since the epoch
  };
  struct InFlight {
    bool done = false;
    Result<std::filesystem::path> result = Error::Msg("pending");
  };
  ArtifactCache(std::filesystem::path dir, uint64_t max_bytes)
      : dir_(std::move(dir)), max_bytes_(max_bytes) {}
  std::filesystem::path PathOf(const std::string& key) const;
  Result<std::filesystem::path> Store(DigestAlgo algo, const std::string& hex, uint64_t max_bytes,
                                      const Download& download);
  void Touch(const std::string& key);
  void EvictLocked(const std::string& keep);

  const std::filesystem::path dir_;
  const uint64_t max_bytes_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Entry> entries_;  // "sha256/<hex>" -> entry
  std::map<std::string, std::shared_ptr<InFlight>> in_flight_;
  Counters counters_;
  uint64_t temp_serial_ = 0;
};

}  // namespace mcpcell::packages
