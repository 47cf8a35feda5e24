#include "audit/trail.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "audit/record.h"
#include "audit/tail_scan.h"
#include "audit/trail_files.h"

namespace mcpcell::audit {

using nlohmann::json;

namespace {

Result<UniqueFd> OpenCurrentFile(const std::string& dir) {
  std::string path = dir + "/" + kCurrentFileName;
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return Error::Sys("open(\"" + path + "\", O_APPEND)");
  return fd;
}

Result<UniqueFd> OpenLockFile(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return Error::Sys("mkdir(\"" + dir + "\")");
  std::string path = dir + "/.lock";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return Error::Sys("open(\"" + path + "\")");
  return fd;
}

// The trail's exclusive flock for one operation: every writer's appends, rotations and
// checkpoints take it, so records of several processes form one chain.
class FileLock {
 public:
  FileLock(int fd, const std::string& dir) : fd_(fd) {
    int rc;
    do {
      rc = ::flock(fd_, LOCK_EX);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) status_ = Error::Sys("flock(\"" + dir + "/.lock\")");
  }
  ~FileLock() {
    if (status_) ::flock(fd_, LOCK_UN);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  const Status& status() const { return status_; }

 private:
  int fd_;
  Status status_ = Ok();
};

int64_t ToMs(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

}  // namespace

Trail::Trail(TrailOptions options) : options_(std::move(options)), last_hash_(kZeroHash) {}

Trail::~Trail() { (void)Close(); }

std::chrono::system_clock::time_point Trail::Now() const {
  return options_.clock ? options_.clock() : std::chrono::system_clock::now();
}

Result<std::unique_ptr<Trail>> Trail::Open(TrailOptions options) {
  if (options.dir.empty()) return Error::Msg("audit trail: no directory given");
  std::unique_ptr<Trail> trail(new Trail(std::move(options)));
  auto lock = OpenLockFile(trail->options_.dir);
  if (!lock) return lock.error();
  trail->lock_fd_ = std::move(*lock);
  if (!trail->options_.signing_key.empty()) {
    auto signer = CheckpointSigner::Load(trail->options_.signing_key);
    if (!signer) return signer.error().Wrap("audit signing_key");
    trail->signer_ = std::move(*signer);
  }
  std::lock_guard lock_mu(trail->mu_);
  FileLock file_lock(trail->lock_fd_.get(), trail->options_.dir);
  if (!file_lock.status()) return file_lock.status().error();
  if (Status s = trail->Recover(); !s) return s.error().Wrap("audit trail " + trail->options_.dir);
  if (Status s = trail->RetentionLocked(); !s) return s.error();
  return trail;
}

// Continues the chain from the trail's last good record; records a cut or a break there.
// At Open, and when another writer rotated the file or left a tail that does not verify.
Status Trail::Recover() {
  file_first_seq_ = 0;
  file_started_ms_.reset();
  auto files = ListTrailFiles(options_.dir);
  if (!files) return files.error();
  const std::string current = options_.dir + "/" + kCurrentFileName;
  auto tail = ScanTail(current);
  if (!tail) return tail.error();
  std::string tail_file = kCurrentFileName;
  const TrailFile* newest_rotated = nullptr;
  for (const TrailFile& f : *files)
    if (!f.current) newest_rotated = &f;
  std::optional<json> chain_from = tail->last;
  if (!chain_from && newest_rotated) {
    auto rotated_tail = ScanTail(newest_rotated->path);
    if (!rotated_tail) return rotated_tail.error();
    chain_from = rotated_tail->last;
    if (tail->size == 0) {
      tail = std::move(rotated_tail);
      tail_file = newest_rotated->name;
    }
  }
  if (chain_from) {
    last_seq_ = (*chain_from)["seq"].get<uint64_t>();
    last_hash_ = (*chain_from)["hash"].get<std::string>();
  }
  auto fd = OpenCurrentFile(options_.dir);
  if (!fd) return fd.error();
  fd_ = std::move(*fd);
  struct stat st {};
  if (::fstat(fd_.get(), &st) != 0) return Error::Sys("fstat(\"" + current + "\")");
  size_ = static_cast<uint64_t>(st.st_size);
  if (auto first = FirstRecord(current)) {
    file_first_seq_ = (*first)["seq"].get<uint64_t>();
    if (auto ms = ParseTimeMs((*first)["time"].get<std::string>())) file_started_ms_ = *ms;
  }
  if (!tail->damaged) return Ok();
  // A cut line gets its newline (in the same write as the record), so that the bytes stay
  // for inspection and the record starts a line of its own.
  std::string prefix = tail->unterminated && tail_file == kCurrentFileName ? "\n" : "";
  json fields = {{"file", tail_file},
                 {"cut_offset", tail->cut_offset},
                 {"cut_bytes", tail->size - tail->cut_offset},
                 {"torn", tail->torn},
                 {"after_seq", last_seq_},
                 {"after_hash", last_hash_},
                 {"reason", tail->reason}};
  return AppendLocked("recovered", "", "", "", fields, prefix);
}

// With the flock held: if another writer appended or rotated since our last record, carry
// on from its last record (the cheap way when its tail is a good record, else Recover()).
Status Trail::CatchUpLocked() {
  const std::string current = options_.dir + "/" + kCurrentFileName;
  struct stat ours {
  }, on_disk{};
  if (::fstat(fd_.get(), &ours) != 0) return Error::Sys("fstat(\"" + current + "\")");
  const bool rotated = ::stat(current.c_str(), &on_disk) != 0 || on_disk.st_ino != ours.st_ino ||
                       on_disk.st_dev != ours.st_dev;
  if (!rotated && static_cast<uint64_t>(ours.st_size) == size_) return Ok();
  if (rotated || ours.st_size == 0) return Recover();
  auto last = LastGoodRecord(fd_.get(), static_cast<uint64_t>(ours.st_size), current);
  if (!last) return last.error();
  if (!*last) return Recover();
  size_ = static_cast<uint64_t>(ours.st_size);
  last_seq_ = (**last)["seq"].get<uint64_t>();
  last_hash_ = (**last)["hash"].get<std::string>();
  if (file_first_seq_ == 0) {
    if (auto first = FirstRecord(current)) {
      file_first_seq_ = (*first)["seq"].get<uint64_t>();
      if (auto ms = ParseTimeMs((*first)["time"].get<std::string>())) file_started_ms_ = *ms;
    }
  }
  return Ok();
}

Status Trail::Append(std::string_view type, std::string_view tenant, std::string_view session,
                     std::string_view cell, const json& fields) {
  return AppendFor(options_.server, type, tenant, session, cell, fields);
}

Status Trail::AppendFor(std::string_view server, std::string_view type, std::string_view tenant,
                        std::string_view session, std::string_view cell, const json& fields) {
  if (type.empty()) return Error::Msg("audit record without a type");
  if (!fields.is_object())
    return Error::Msg("audit " + std::string(type) + ": fields not an object");
  for (const auto& [key, value] : fields.items())
    if (IsReservedField(key))
      return Error::Msg("audit " + std::string(type) + ": field \"" + key +
                        "\" is one of the record's own names");
  std::lock_guard lock(mu_);
  if (closed_) return Error::Msg("audit trail " + options_.dir + " is closed");
  FileLock file_lock(lock_fd_.get(), options_.dir);
  Status ready = file_lock.status() ? CatchUpLocked() : file_lock.status();
  if (!ready) {
    ++failed_;
    last_failed_ = true;
    last_error_ = ready.error().message;
    return ready;
  }
  if (Status s = MaybeRotateLocked(); !s) {
    ++failed_;
    last_error_ = s.error().message;  // keep writing to the current file
  }
  if (Status s = AppendLocked(type, tenant, session, cell, fields, {}, server); !s) return s;
  if (options_.checkpoint_every != 0 && since_checkpoint_ >= options_.checkpoint_every)
    return CheckpointLocked();
  return Ok();
}

Status Trail::AppendLocked(std::string_view type, std::string_view tenant, std::string_view session,
                           std::string_view cell, const json& fields, std::string_view prefix,
                           std::optional<std::string_view> server) {
  const auto now = Now();
  // The record in its two halves around "hash" (SealRecord): one canonical dump, not two.
  json lower = json::object(), upper = json::object();
  for (const auto& [key, value] : fields.items())
    (SortsBeforeHash(key) ? lower : upper)[key] = value;
  lower["cell"] = cell;
  upper["prev"] = last_hash_;
  upper["seq"] = last_seq_ + 1;
  upper["session"] = session;
  upper["tenant"] = tenant;
  upper["time"] = FormatTime(now);
  upper["type"] = type;
  const std::string_view writer = server.value_or(options_.server);
  if (!writer.empty()) upper["server"] = writer;
  SealedRecord sealed = SealRecord(lower, upper);
  std::string bytes;
  bytes.reserve(prefix.size() + sealed.line.size() + 1);
  bytes.append(prefix).append(sealed.line).push_back('\n');
  if (Status s = WriteLocked(bytes); !s) return s;
  last_seq_ += 1;
  last_hash_ = sealed.hash;
  ++since_checkpoint_;
  if (file_first_seq_ == 0) file_first_seq_ = last_seq_;
  if (!file_started_ms_) file_started_ms_ = ToMs(now);
  if (sinks_.empty()) return Ok();
  json record = std::move(lower);
  record.update(upper);
  record["hash"] = std::move(sealed.hash);
  for (const RecordSink& sink : sinks_) sink(record, sealed.line);
  return Ok();
}

// One write(2): the whole line or, after a short write, nothing of it.
Status Trail::WriteLocked(const std::string& bytes) {
  ssize_t n;
  do {
    n = ::write(fd_.get(), bytes.data(), bytes.size());
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(bytes.size())) {
    size_ += bytes.size();
    last_failed_ = false;
    return Ok();
  }
  Error error = n < 0 ? Error::Sys("write(\"" + options_.dir + "/" + kCurrentFileName + "\")")
                      : Error::Msg("short write to " + options_.dir + "/" + kCurrentFileName +
                                   " (" + std::to_string(n) + " of " +
                                   std::to_string(bytes.size()) + " bytes; disk full?)");
  // With the trail's lock held nothing else appends, so size_ is where the line began.
  if (n > 0 && ::ftruncate(fd_.get(), static_cast<off_t>(size_)) != 0)
    error = Error::Sys(error.message + "; ftruncate back to " + std::to_string(size_));
  ++failed_;
  last_failed_ = true;
  last_error_ = error.message;
  return error;
}

Status Trail::MaybeRotateLocked() {
  if (file_first_seq_ == 0 || size_ == 0) return Ok();
  bool by_size = options_.rotate_bytes != 0 && size_ >= options_.rotate_bytes;
  bool by_age =
      options_.rotate_age.count() != 0 && file_started_ms_ &&
      ToMs(Now()) - *file_started_ms_ >=
          std::chrono::duration_cast<std::chrono::milliseconds>(options_.rotate_age).count();
  if (!by_size && !by_age) return Ok();
  return RotateLocked();
}

// Seals the file with a checkpoint, renames it, and chains the new file onto it.
Status Trail::RotateLocked() {
  if (Status s = CheckpointLocked(); !s) return s;
  auto started = std::chrono::system_clock::time_point(
      std::chrono::milliseconds(file_started_ms_.value_or(ToMs(Now()))));
  std::string name = RotatedFileName(file_first_seq_, started);
  std::string from = options_.dir + "/" + kCurrentFileName, to = options_.dir + "/" + name;
  if (::rename(from.c_str(), to.c_str()) != 0)
    return Error::Sys("rename(\"" + from + "\", \"" + to + "\")");
  auto fd = OpenCurrentFile(options_.dir);
  if (!fd) return fd.error();
  fd_ = std::move(*fd);
  json fields = {{"file", name},
                 {"first_seq", file_first_seq_},
                 {"last_seq", last_seq_},
                 {"last_hash", last_hash_}};
  size_ = 0;
  file_first_seq_ = 0;
  file_started_ms_.reset();
  if (Status s = AppendLocked("audit.rotated", "", "", "", fields); !s) return s;
  return RetentionLocked();
}

Status Trail::EnforceRetention() {
  std::lock_guard lock(mu_);
  if (closed_) return Error::Msg("audit trail " + options_.dir + " is closed");
  FileLock file_lock(lock_fd_.get(), options_.dir);
  if (!file_lock.status()) return file_lock.status();
  if (Status s = CatchUpLocked(); !s) return s;
  return RetentionLocked();
}

// Deletes the oldest rotated files while they are older than the retention, so what stays
// is always one unbroken stretch of the chain.
Status Trail::RetentionLocked() {
  if (options_.retention.count() == 0) return Ok();
  auto files = ListTrailFiles(options_.dir);
  if (!files) return files.error();
  const int64_t cutoff_ms =
      ToMs(Now()) -
      std::chrono::duration_cast<std::chrono::milliseconds>(options_.retention).count();
  for (size_t i = 0; i + 1 < files->size() && !(*files)[i].current; ++i) {
    const TrailFile& f = (*files)[i];
    struct stat st {};
    if (::stat(f.path.c_str(), &st) != 0) return Error::Sys("stat(\"" + f.path + "\")");
    int64_t mtime_ms = int64_t{st.st_mtim.tv_sec} * 1000 + st.st_mtim.tv_nsec / 1000000;
    if (mtime_ms >= cutoff_ms) break;
    const TrailFile& next = (*files)[i + 1];
    uint64_t next_first = next.current ? file_first_seq_ : next.first_seq;
    if (::unlink(f.path.c_str()) != 0) return Error::Sys("unlink(\"" + f.path + "\")");
    json fields = {{"file", f.name},
                   {"first_seq", f.first_seq},
                   {"last_seq", next_first == 0 ? last_seq_ : next_first - 1},
                   {"reason", "retention"},
                   {"retention_days", options_.retention.count() / 86400}};
    if (Status s = AppendLocked("audit.deleted", "", "", "", fields); !s) return s;
  }
  return Ok();
}

Status Trail::Checkpoint() {
  std::lock_guard lock(mu_);
  if (closed_) return Error::Msg("audit trail " + options_.dir + " is closed");
  FileLock file_lock(lock_fd_.get(), options_.dir);
  if (!file_lock.status()) return file_lock.status();
  if (Status s = CatchUpLocked(); !s) return s;
  return CheckpointLocked();
}

// Signs the hash of the record before the checkpoint; syncs the file after it.
Status Trail::CheckpointLocked() {
  if (since_checkpoint_ == 0) return SyncLocked();
  json fields = {{"signed_seq", last_seq_}, {"signed_hash", last_hash_}};
  if (signer_) {
    auto signature = signer_->SignBase64(last_hash_);
    if (!signature) return signature.error();
    fields["signature"] = *signature;
    fields["key_id"] = signer_->key_id();
  }
  if (Status s = AppendLocked("checkpoint", "", "", "", fields); !s) return s;
  since_checkpoint_ = 0;
  return SyncLocked();
}

Status Trail::SyncLocked() {
  if (::fdatasync(fd_.get()) != 0)
    return Error::Sys("fdatasync(\"" + options_.dir + "/" + kCurrentFileName + "\")");
  return Ok();
}

Status Trail::Close() {
  std::lock_guard lock(mu_);
  if (closed_) return Ok();
  Status s = Ok();
  {
    FileLock file_lock(lock_fd_.get(), options_.dir);
    s = file_lock.status();
    if (s) s = CatchUpLocked();
    if (s) s = CheckpointLocked();
  }
  closed_ = true;
  fd_.Reset();
  lock_fd_.Reset();
  return s;
}

void Trail::AddSink(RecordSink sink) {
  std::lock_guard lock(mu_);
  sinks_.push_back(std::move(sink));
}

bool Trail::Healthy() const {
  std::lock_guard lock(mu_);
  return !(options_.required && last_failed_);
}
uint64_t Trail::failed_writes() const {
  std::lock_guard lock(mu_);
  return failed_;
}
std::string Trail::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}
uint64_t Trail::last_seq() const {
  std::lock_guard lock(mu_);
  return last_seq_;
}
std::string Trail::last_hash() const {
  std::lock_guard lock(mu_);
  return last_hash_;
}

}  // namespace mcpcell::audit
