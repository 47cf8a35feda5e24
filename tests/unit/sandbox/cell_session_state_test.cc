// CellSession over a base snapshot, with a fake backend (real cells and the store are
// tests/integration/session_state_test.cc): RestartOver ends the cell and its leases, counts
// the programs it ended and makes the next cell over the base's layers (never from the warm
// pool); WithFrozenCell freezes and always thaws; at idle expiry the hibernate hook keeps
// the files as the base and the next call is told, or fails and the call is told why;
// released bases reach on_base_released, except at server shutdown (keep_base).
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
  size_t Count(const std::string& prefix) {
    std::lock_guard lock(mu);
    return std::count_if(lines.begin(), lines.end(),
                         [&](const std::string& l) { return l.rfind(prefix, 0) == 0; });
  }
};

// A cell that remembers its spec and reports `running` execs in its Stats.
class FakeCell final : public CellInstance {
 public:
  FakeCell(CellSpec spec, uint32_t running, Log* log)
      : spec_(std::move(spec)), running_(running), log_(log) {}
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
    frozen_ = true;
    return Ok();
  }
  Status Thaw() override {
    log_->Add("Thaw " + id());
    frozen_ = false;
    return Ok();
  }
  Result<ExecResult> Exec(const ExecOptions&) override { return Refused(); }
  Status SignalExec(uint64_t, int) override { return Refused(); }
  Result<control::StatsReply> Stats() override {
    if (frozen_) return Refused();
    control::StatsReply r;
    r.running_execs = running_;
    return r;
  }
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
  Error Refused() const {
    return Error::Msg(frozen_ ? "request to a frozen cell" : "fake cell: no requests");
  }
  CellSpec spec_;
  uint32_t running_;
  std::vector<std::string> warnings_;
  Log* log_;
  std::atomic<bool> frozen_{false}, destroyed_{false};
};

class FakeBackend final : public CellBackend {
 public:
  FakeBackend(uint32_t running, Log* log) : running_(running), log_(log) {}
  Result<std::unique_ptr<CellInstance>> Create(const CellSpec& spec) const override {
    log_->Add("Create " + std::to_string(spec.layers.size()) + " layers");
    return std::unique_ptr<CellInstance>(new FakeCell(spec, running_, log_));
  }

 private:
  uint32_t running_;
  Log* log_;
};

SessionBase Base(const std::string& id, bool hibernation = false) {
  return {.snapshot_id = id,
          .layers = {{"/", "/snaps/" + id + "/root"}, {"/workspace", "/snaps/" + id + "/ws"}},
          .hibernation = hibernation};
}

struct Harness {
  Log log;
  std::shared_ptr<CellHooks> hooks = std::make_shared<CellHooks>();
  std::unique_ptr<CellSession> session;
  std::string workspace_host_dir;

  explicit Harness(uint32_t running = 0, milliseconds idle = std::chrono::hours(1)) {
    CellSessionOptions o;
    o.idle_timeout = idle;
    o.backend = std::make_shared<FakeBackend>(running, &log);
    hooks->on_base_released = [this](const std::string& key, const std::string& profile,
                                     const SessionBase& base) {
      log.Add("released " + base.snapshot_id + " " + key + " " + profile);
    };
    session = std::make_unique<CellSession>(
        "s1",
        [this](const std::string& id) -> Result<CellSpec> {
          CellSpec spec;
          spec.id = id;
          spec.workspace_host_dir = workspace_host_dir;
          return spec;
        },
        o, "tenant-a", hooks);
  }
};

TEST(CellSessionState, RestartOverEndsTheCellCountsItsProgramsAndTheNextCellRunsOverTheBase) {
  Harness h(/*running=*/2);
  std::string first;
  {
    Result<CellLease> lease = h.session->Acquire();
    ASSERT_TRUE(lease.ok()) << lease.error().message;
    first = lease->id();
    EXPECT_TRUE(lease->spec().layers.empty());
  }
  Result<RestartResult> r = h.session->RestartOver(Base("aaaa"), "restored");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->counted);
  EXPECT_EQ(r->programs_ended, 2u);
  EXPECT_TRUE(h.log.Has("Destroy " + first));
  EXPECT_FALSE(h.session->closed());
  EXPECT_EQ(h.session->Info().base_snapshot, "aaaa");
  EXPECT_FALSE(h.session->Info().hibernated);

  Result<CellLease> lease = h.session->Acquire();
  ASSERT_TRUE(lease.ok()) << lease.error().message;
  EXPECT_NE(lease->id(), first);
  EXPECT_EQ(lease->replaced_reason(), "restored");
  ASSERT_EQ(lease->spec().layers.size(), 2u);
  EXPECT_EQ(lease->spec().layers[0].host_dir, "/snaps/aaaa/root");
  EXPECT_EQ(lease->spec().layers[1].target, "/workspace");
}

TEST(CellSessionState, RestartOverStopsARunningLeaseAndWaitsForIt) {
  Harness h;
  std::atomic<bool> stopped{false};
  std::thread call([&] {
    Result<CellLease> lease = h.session->Acquire();
    ASSERT_TRUE(lease.ok());
    std::stop_token stop = lease->stop_token();
    while (!stop.stop_requested()) std::this_thread::sleep_for(milliseconds(1));
    stopped = true;
  });
  while (h.session->Info().active_leases == 0) std::this_thread::sleep_for(milliseconds(1));
  Result<RestartResult> r = h.session->RestartOver(Base("bbbb"));
  call.join();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(stopped);
  // A later lease gets a fresh stop token: the restart did not end the session.
  Result<CellLease> lease = h.session->Acquire();
  ASSERT_TRUE(lease.ok()) << lease.error().message;
  EXPECT_FALSE(lease->stop_token().stop_requested());
  EXPECT_TRUE(lease->replaced_reason().empty());
}

TEST(CellSessionState, ANewBaseReleasesTheOldOneAndCloseReleasesTheLastUnlessKept) {
  Harness h;
  ASSERT_TRUE(h.session->RestartOver(Base("aaaa")).ok());
  ASSERT_TRUE(h.session->RestartOver(Base("bbbb")).ok());
  EXPECT_TRUE(h.log.Has("released aaaa s1 tenant-a"));
  EXPECT_FALSE(h.log.Has("released bbbb s1 tenant-a"));
  ASSERT_TRUE(h.session->Close("client closed").ok());
  EXPECT_TRUE(h.log.Has("released bbbb s1 tenant-a"));

  Harness kept;
  ASSERT_TRUE(kept.session->RestartOver(Base("cccc", true)).ok());
  ASSERT_TRUE(kept.session->Close("the server is shutting down", /*keep_base=*/true).ok());
  EXPECT_EQ(kept.log.Count("released"), 0u);
}

TEST(CellSessionState, APersistentWorkspaceIsNotReplacedByTheBaseWorkspaceLayer) {
  Harness h;
  h.workspace_host_dir = "/srv/ws";
  ASSERT_TRUE(h.session->RestartOver(Base("aaaa")).ok());
  Result<CellLease> lease = h.session->Acquire();
  ASSERT_TRUE(lease.ok()) << lease.error().message;
  ASSERT_EQ(lease->spec().layers.size(), 1u);
  EXPECT_EQ(lease->spec().layers[0].target, "/");
}

TEST(CellSessionState, WithFrozenCellFreezesGivesTheBaseAndThawsAlsoOnError) {
  Harness h;
  ASSERT_TRUE(h.session->RestartOver(Base("aaaa")).ok());
  std::string seen_base, cell_id;
  Status st = h.session->WithFrozenCell([&](CellInstance& cell, const SessionBase* base,
                                            bool frozen) -> Status {
    EXPECT_TRUE(frozen);
    cell_id = cell.id();
    seen_base = base ? base->snapshot_id : "none";
    return Error::Msg("capture failed");
  });
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message, "capture failed");
  EXPECT_EQ(seen_base, "aaaa");
  EXPECT_TRUE(h.log.Has("Freeze " + cell_id));
  EXPECT_TRUE(h.log.Has("Thaw " + cell_id));
  Result<CellLease> lease = h.session->Acquire();  // not held off after the error
  ASSERT_TRUE(lease.ok()) << lease.error().message;
  EXPECT_EQ(lease->id(), cell_id);
  EXPECT_TRUE(lease->Stats().ok());  // thawed
}

TEST(CellSessionState, IdleExpiryHibernatesAndTheNextCallRunsOverTheKeptFiles) {
  Harness h(0, milliseconds(1));
  std::string frozen_when_captured;
  h.hooks->hibernate = [&](CellInstance& cell, const std::string& key, const std::string& profile,
                           const SessionBase* base, bool frozen) -> Result<SessionBase> {
    frozen_when_captured = frozen ? "frozen" : "running";
    h.log.Add("hibernate " + cell.id() + " " + key + " " + profile + " over " +
              (base ? base->snapshot_id : "none"));
    return Base("h1", true);
  };
  std::string first;
  {
    Result<CellLease> lease = h.session->Acquire();
    ASSERT_TRUE(lease.ok());
    first = lease->id();
  }
  std::this_thread::sleep_for(milliseconds(5));
  ASSERT_TRUE(h.session->DestroyIdleCell().ok());
  EXPECT_TRUE(h.log.Has("hibernate " + first + " s1 tenant-a over none"));
  EXPECT_EQ(frozen_when_captured, "frozen");
  EXPECT_TRUE(h.log.Has("Destroy " + first + " (frozen)"));
  CellSessionInfo info = h.session->Info();
  EXPECT_TRUE(info.hibernated);
  EXPECT_EQ(info.base_snapshot, "h1");

  Result<CellLease> lease = h.session->Acquire();
  ASSERT_TRUE(lease.ok()) << lease.error().message;
  EXPECT_NE(lease->replaced_reason().find("hibernated after 0 s of idle: its programs were "
                                          "stopped, its files kept"),
            std::string::npos)
      << lease->replaced_reason();
  EXPECT_EQ(lease->spec().layers.size(), 2u);
  EXPECT_FALSE(h.session->Info().hibernated);
}

TEST(CellSessionState, AFailedHibernationLosesTheFilesAndTheCallIsToldWhy) {
  Harness h(0, milliseconds(1));
  h.hooks->hibernate = [](CellInstance&, const std::string&, const std::string&,
                          const SessionBase*, bool) -> Result<SessionBase> {
    return Error::Msg("snapshot storage quota exceeded");
  };
  { ASSERT_TRUE(h.session->Acquire().ok()); }
  std::this_thread::sleep_for(milliseconds(5));
  ASSERT_TRUE(h.session->DestroyIdleCell().ok());
  EXPECT_FALSE(h.session->Info().hibernated);
  Result<CellLease> lease = h.session->Acquire();
  ASSERT_TRUE(lease.ok()) << lease.error().message;
  EXPECT_NE(lease->replaced_reason().find("could not be kept (snapshot storage quota exceeded)"),
            std::string::npos)
      << lease->replaced_reason();
  EXPECT_TRUE(lease->spec().layers.empty());
}

TEST(CellSessionState, ASecondHibernationReplacesTheFirstWhichIsReleased) {
  Harness h(0, milliseconds(1));
  int n = 0;
  h.hooks->hibernate = [&](CellInstance&, const std::string&, const std::string&,
                           const SessionBase* base, bool) -> Result<SessionBase> {
    h.log.Add("over " + std::string(base ? base->snapshot_id : "none"));
    return Base("h" + std::to_string(++n), true);
  };
  for (int i = 0; i < 2; ++i) {
    { ASSERT_TRUE(h.session->Acquire().ok()); }
    std::this_thread::sleep_for(milliseconds(5));
    ASSERT_TRUE(h.session->DestroyIdleCell().ok());
  }
  EXPECT_TRUE(h.log.Has("over h1"));  // the second capture is over the first's files
  EXPECT_TRUE(h.log.Has("released h1 s1 tenant-a"));
  EXPECT_EQ(h.session->Info().base_snapshot, "h2");
}

}  // namespace
}  // namespace mcpcell::sandbox
