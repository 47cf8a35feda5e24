// The audit trail writer: every part of the server appends its events through one Trail.
//
// Append gives a record its seq, time, prev and hash (record.h) and writes it as one line
// with one write(2) to `<dir>/audit.jsonl`, opened O_APPEND. A record is never torn: a
// short write (disk full) is truncated away and reported. Records are not fsync'ed one by
// one; a checkpoint (every `checkpoint_every` records, at rotation and at Close) syncs the
// file and, with a `signing_key`, signs the hash before it (signing.h). The file rotates by
// size and age to `audit-<first seq>-<time>.jsonl` and the chain goes on in the new file;
// rotated files older than `retention` are deleted; both are recorded (`audit.rotated`,
// `audit.deleted`). At Open the end of the trail is read and the chain continued; if it
// was cut or does not verify there, a `recovered` record names where.
//
// Several writers (processes, or Trail objects) may share a trail: each append, checkpoint,
// rotation and retention pass holds an exclusive flock on `<dir>/.lock`; under it, a writer
// whose file grew or was rotated since its own last record reads the last record to carry
// on its `seq` and `prev` (or, if that tail is damaged, recovers as at Open). With
// `options.server` set, every record carries `server` (which writer's session it is about).
// Checkpoints count this writer's records. Threading: every method may be called from any
// thread; one mutex orders this writer's records. Sinks run under it and the flock, in
// record order: they must be quick and must not call back into the Trail.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "audit/signing.h"
#include "base/status.h"
#include "base/unique_fd.h"

namespace mcpcell::audit {

struct TrailOptions {
  std::string dir;                                               // <state_dir>/audit (AuditDir)
  uint64_t rotate_bytes = uint64_t{64} << 20;                    // 0: never by size
  std::chrono::seconds rotate_age = std::chrono::hours(24);      // 0: never by age
  std::chrono::seconds retention = std::chrono::hours(24 * 90);  // 0: keep forever
  uint64_t checkpoint_every = 10000;                             // 0: only at rotation and Close
  std::string signing_key;  // PEM Ed25519 private key; "": unsigned
  // When true, a failed write makes Healthy() false until a write succeeds again (the
  // server then refuses new sessions).
  bool required = false;
  // The writer's instance id: the `server` field of every record ("": no such field).
  std::string server;
  // The clock for record times, rotation by age and retention; tests move it.
  std::function<std::chrono::system_clock::time_point()> clock;
};

// Receives each record after it was written, and its line (canonical JSON, no newline).
// A sink must outlive the Trail (Close still writes a checkpoint through it).
using RecordSink = std::function<void(const nlohmann::json& record, std::string_view line)>;

class Trail {
 public:
  static Result<std::unique_ptr<Trail>> Open(TrailOptions options);
  ~Trail();  // Close()
  Trail(const Trail&) = delete;
  Trail& operator=(const Trail&) = delete;

  // Appends one event. `fields` is a JSON object of the type's fields; they may not use the
  // record's own names (seq, time, type, tenant, session, cell, prev, hash). An empty
  // tenant, session or cell means "not about one". Errors: bad fields, a closed trail, and
  // write failures (nothing of the record stays in the file then).
  Status Append(std::string_view type, std::string_view tenant, std::string_view session,
                std::string_view cell, const nlohmann::json& fields = nlohmann::json::object());
  // The same about a session of another writer `server` (e.g. ending a crashed server's
  // sessions): the record's `server` is that one's.
  Status AppendFor(std::string_view server, std::string_view type, std::string_view tenant,
                   std::string_view session, std::string_view cell,
                   const nlohmann::json& fields = nlohmann::json::object());
  // Writes a checkpoint now (if anything was appended since the last one) and syncs.
  Status Checkpoint();
  // Deletes rotated files older than the retention (also done at Open and each rotation).
  Status EnforceRetention();
  // Final checkpoint, sync, close. Further Appends fail. Idempotent.
  Status Close();

  void AddSink(RecordSink sink);

  // False while writes fail, when options.required is set; always true otherwise.
  bool Healthy() const;
  uint64_t failed_writes() const;
  std::string last_error() const;  // why the last failed write failed; "" if none did
  uint64_t last_seq() const;
  std::string last_hash() const;

 private:
  explicit Trail(TrailOptions options);
  std::chrono::system_clock::time_point Now() const;
  Status Recover();
  Status CatchUpLocked();
  Status AppendLocked(std::string_view type, std::string_view tenant, std::string_view session,
                      std::string_view cell, const nlohmann::json& fields,
                      std::string_view prefix = {},
                      std::optional<std::string_view> server = std::nullopt);
  Status WriteLocked(const std::string& bytes);
  Status MaybeRotateLocked();
  Status RotateLocked();
  Status RetentionLocked();
  Status CheckpointLocked();
  Status SyncLocked();

  const TrailOptions options_;
  std::unique_ptr<CheckpointSigner> signer_;
  UniqueFd lock_fd_;
  UniqueFd fd_;
  mutable std::mutex mu_;                   // then the flock on lock_fd_
  uint64_t size_ = 0;                       // of the current file
  uint64_t file_first_seq_ = 0;             // first seq in the current file (0: none yet)
  std::optional<int64_t> file_started_ms_;  // time of the current file's first record
  uint64_t last_seq_ = 0;
  std::string last_hash_;
  uint64_t since_checkpoint_ = 0;
  uint64_t failed_ = 0;
  bool last_failed_ = false;
  std::string last_error_;
  bool closed_ = false;
  std::vector<RecordSink> sinks_;
};

}  // namespace mcpcell::audit
