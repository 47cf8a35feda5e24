// CellSession's pause and resume with a fake backend (the real freezer on a real cell is
// tests/integration/cell_pause_test.cc): an unleased cell is frozen after pause_idle and
// thawed by the next Acquire, transparently; a cell that does not thaw is replaced and the
// call told so; a cell that cannot be paused stays running and is not tried again; Close
// and idle expiry destroy a paused cell; the hooks and Info() say what happened.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sandbox/cell_session.h"

namespace mcpcell::sandbox {
namespace {

using std::chrono::milliseconds;

struct Log {
  std::mutex mu;
  std::vector<std::string> lines;
  void Add(std::string line) {
    std::lock_guard lock(mu);
    lines.push_back(std::move(line));
  }
  bool Has(const std::string& line) {
    std::lock_guard lock(mu);
    return std::find(lines.begin(), lines.end(), line) != lines.end();
  }
};

// What the fake cells do when frozen and thawed.
struct FakeBehaviour {
  Status freeze = Ok();
  Status thaw = Ok();
};

class FakeCell final : public CellInstance {
 public:
  FakeCell(std::string id, FakeBehaviour b, Log* log) : b_(std::move(b)), log_(log) {
    spec_.id = std::move(id);
  }
  const std::string& id() const override { return spec_.id; }
  const CellSpec& spec() const override { return spec_; }
  const std::vector<std::string>& warnings() const override { return warnings_; }
  bool usable() const override { return !destroyed_; }
  Result<CgroupUsage> Usage() const override { return CgroupUsage{}; }
  int TakeEgressListener() override { return -1; }
  Status Destroy() override {
    if (!destroyed_) log_->Add("Destroy " + id() + (frozen_ ? " (frozen)" : ""));
    destroyed_ = true;
    return Ok();
  }
  Status Freeze() override {
    log_->Add("Freeze " + id());
    if (b_.freeze.ok()) frozen_ = true;
    return b_.freeze;
  }
  Status Thaw() override {
    log_->Add("Thaw " + id());
    if (b_.thaw.ok()) frozen_ = false;
    return b_.thaw;
  }
  Result<ExecResult> Exec(const ExecOptions&) override { return Refused(); }
  Status SignalExec(uint64_t, int) override { return Refused(); }
  Result<control::StatsReply> Stats() override { return Refused(); }
  Result<std::string> ReadFile(const std::string&, uint64_t) override { return Refused(); }
  Result<FileWindow> ReadFileRange(const std::string&, uint64_t, uint64_t) override {
    return Refused();
  }
  Status WriteFile(const std::string&, std::string_view, uint32_t) override { return Refused(); }
  Status WriteFileAt(const std::string&, uint64_t, std::string_view, bool, uint32_t) override {
    return Refused();
  }
  Status AppendFile(const std::string&, std::string_view, uint32_t) override { return Refused(); }
  Status WriteNewFile(const std::string&, std::string_view, uint32_t) override { return Refused(); }
  Result<std::vector<control::DirEntry>> ListDir(const std::string&, size_t) override {
    return Refused();
  }
  Result<control::FileStat> Stat(const std::string&, bool) override { return Refused(); }
  Status Mkdir(const std::string&, uint32_t, bool) override { return Refused(); }
  Status Remove(const std::string&, bool) override { return Refused(); }
  Status Rename(const std::string&, const std::string&, bool) override { return Refused(); }

 private:
  // A frozen cell must never get a request: the session thaws first.
  Error Refused() const {
    return Error::Msg(frozen_ ? "request to a frozen cell" : "fake cell: no requests");
  }
  CellSpec spec_;
  std::vector<std::string> warnings_;
  FakeBehaviour b_;
  Log* log_;
  std::atomic<bool> frozen_{false}, destroyed_{false};
};

class FakeBackend final : public CellBackend {
 public:
  FakeBackend(FakeBehaviour b, Log* log) : b_(std::move(b)), log_(log) {}
  Result<std::unique_ptr<CellInstance>> Create(const CellSpec& spec) const override {
    return std::unique_ptr<CellInstance>(new FakeCell(spec.id, b_, log_));
  }

 private:
  FakeBehaviour b_;
  Log* log_;
};

struct Harness {
  Log log;
  std::shared_ptr<CellHooks> hooks = std::make_shared<CellHooks>();
  std::unique_ptr<CellSession> session;

  explicit Harness(FakeBehaviour b, milliseconds pause_idle = milliseconds(1),
                   milliseconds idle = std::chrono::hours(1)) {
    CellSessionOptions o;
    o.pause_idle = pause_idle;
    o.idle_timeout = idle;
    o.backend = std::make_shared<FakeBackend>(std::move(b), &log);
    hooks->on_paused = [this](CellInstance& c, const std::string& key) {
      log.Add("on_paused " + c.id() + " " + key);
    };
    hooks->on_unpaused = [this](CellInstance& c, const std::string& key, milliseconds,
                                bool resumed) {
      log.Add(std::string("on_unpaused ") + c.id() + " " + key +
              (resumed ? " resumed" : " destroyed"));
    };
    session = std::make_unique<CellSession>(
        "s1",
        [](const std::string& id) -> Result<CellSpec> {
          CellSpec spec;
          spec.id = id;
          return spec;
        },
        o, "", hooks);
  }

  // The cell id of a first call, released at once; then waits past pause_idle.
  std::string UseOnce() {
    std::string id;
    {
      Result<CellLease> lease = session->Acquire();
      if (!lease.ok()) {
        ADD_FAILURE() << lease.error().message;
        return "";
      }
      id = lease->id();
    }  // released
    std::this_thread::sleep_for(milliseconds(5));
    return id;
  }
};

TEST(CellSessionPause, AnUnleasedCellIsFrozenAndTheNextCallThawsItTransparently) {
  Harness h({});
  const std::string id = h.UseOnce();
  ASSERT_TRUE(h.session->PauseDue(std::chrono::steady_clock::now()));
  Status paused = h.session->PauseIdleCell();
  ASSERT_TRUE(paused.ok()) << paused.error().message;
  EXPECT_TRUE(h.log.Has("Freeze " + id));
  EXPECT_TRUE(h.log.Has("on_paused " + id + " s1"));
  CellSessionInfo info = h.session->Info();
  EXPECT_TRUE(info.paused);
  EXPECT_FALSE(h.session->PauseDue(std::chrono::steady_clock::now()));  // already paused
  std::this_thread::sleep_for(milliseconds(2));

  Result<CellLease> lease = h.session->Acquire();
  ASSERT_TRUE(lease.ok()) << lease.error().message;
  EXPECT_EQ(lease->id(), id);  // the same cell, thawed
  EXPECT_TRUE(lease->replaced_reason().empty());
  EXPECT_TRUE(h.log.Has("Thaw " + id));
  EXPECT_TRUE(h.log.Has("on_unpaused " + id + " s1 resumed"));
  // Thawed before the lease: a request reaches a running cell, not a frozen one.
  EXPECT_EQ(lease->Stats().error().message, "fake cell: no requests");
  info = h.session->Info();
  EXPECT_FALSE(info.paused);
  EXPECT_GT(info.paused_total.count(), 0);
  EXPECT_FALSE(h.session->PauseDue(std::chrono::steady_clock::now()));  // leased
}

TEST(CellSessionPause, ACellThatDoesNotThawIsReplacedAndTheCallIsToldSo) {
  Harness h({.thaw = Error::Msg("freezer.state: still FREEZING")});
  const std::string id = h.UseOnce();
  ASSERT_TRUE(h.session->PauseIdleCell().ok());
  Result<CellLease> lease = h.session->Acquire();
  ASSERT_TRUE(lease.ok()) << lease.error().message;
  EXPECT_NE(lease->id(), id);
  EXPECT_NE(lease->replaced_reason().find("could not be resumed from its pause"), std::string::npos)
      << lease->replaced_reason();
  EXPECT_NE(lease->replaced_reason().find("still FREEZING"), std::string::npos);
  EXPECT_TRUE(h.log.Has("Destroy " + id + " (frozen)"));
  EXPECT_EQ(h.session->Info().cells_created, 2u);
}

TEST(CellSessionPause, ACellThatCannotBePausedStaysRunningAndIsNotTriedAgain) {
  Harness h({.freeze = Error::Msg("cell c cannot be paused: it has no cgroup")});
  const std::string id = h.UseOnce();
  Status paused = h.session->PauseIdleCell();
  ASSERT_FALSE(paused.ok());
  EXPECT_NE(paused.error().message.find("no cgroup"), std::string::npos);
  EXPECT_FALSE(h.session->Info().paused);
  EXPECT_FALSE(h.session->PauseDue(std::chrono::steady_clock::now()));
  Result<CellLease> lease = h.session->Acquire();
  ASSERT_TRUE(lease.ok()) << lease.error().message;
  EXPECT_EQ(lease->id(), id);
  EXPECT_FALSE(h.log.Has("Thaw " + id));
  EXPECT_FALSE(h.log.Has("on_paused " + id + " s1"));
}

TEST(CellSessionPause, CloseAndIdleExpiryDestroyAPausedCell) {
  Harness closing({});
  const std::string a = closing.UseOnce();
  ASSERT_TRUE(closing.session->PauseIdleCell().ok());
  ASSERT_TRUE(closing.session->Close().ok());
  EXPECT_TRUE(closing.log.Has("Destroy " + a + " (frozen)"));
  EXPECT_TRUE(closing.log.Has("on_unpaused " + a + " s1 destroyed"));

  Harness idle({}, milliseconds(1), milliseconds(3));
  const std::string b = idle.UseOnce();
  ASSERT_TRUE(idle.session->PauseIdleCell().ok());
  ASSERT_TRUE(idle.session->DestroyIdleCell().ok());
  EXPECT_TRUE(idle.log.Has("Destroy " + b + " (frozen)"));
  EXPECT_FALSE(idle.session->Info().paused);
}

TEST(CellSessionPause, NoPauseWhenItIsOffOrNotBeforeIdleExpiry) {
  Harness off({}, milliseconds(0));
  off.UseOnce();
  EXPECT_FALSE(off.session->PauseDue(std::chrono::steady_clock::now()));
  Harness late({}, milliseconds(10), milliseconds(10));
  late.UseOnce();
  std::this_thread::sleep_for(milliseconds(10));
  EXPECT_FALSE(late.session->PauseDue(std::chrono::steady_clock::now()));
}

}  // namespace
}  // namespace mcpcell::sandbox
