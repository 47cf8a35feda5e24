// Asynchronous execs (issue 29) in real cells: Cell::ExecAsync on a CellReactor. A
// thousand programs waiting at once hold no thread (this process's thread count is the
// same before, while they run and after), a timeout and a cancellation through the async
// path kill the whole process group, output caps hold, and a cell destroyed with execs in
// flight completes each callback exactly once with an error naming it.
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <mutex>
#include <thread>

#include "sandbox/cell_reactor.h"
#include "tests/integration/cell_fixture.h"

namespace mcpcell::sandbox {
namespace {

using celltest::ProbeSpec;
using celltest::TempStateDir;
using celltest::TestCreateOptions;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

int ThreadCount() {
  DIR* d = ::opendir("/proc/self/task");
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

// The callbacks of `n` async execs: each records its outcome, how often it was called and
// whether it ran on the reactor.
class Outcomes {
 public:
  Outcomes(size_t n, const CellReactor& reactor) : reactor_(reactor), results_(n), calls_(n) {}
  CellChannel::ExecCallback For(size_t i) {
    return [this, i](Result<ExecResult> r) {
      std::lock_guard lock(mu_);
      ++calls_[i];
      if (!reactor_.on_reactor_thread()) ++off_reactor_;
      results_[i].emplace(std::move(r));
      ++done_;
      cv_.notify_all();
    };
  }
  bool WaitAll(std::chrono::seconds limit) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return done_ >= results_.size(); });
  }
  size_t done() {
    std::lock_guard lock(mu_);
    return done_;
  }
  // After WaitAll: no more callbacks run.
  const Result<ExecResult>& at(size_t i) const { return *results_[i]; }
  int calls(size_t i) {
    std::lock_guard lock(mu_);
    return calls_[i];
  }
  int off_reactor() {
    std::lock_guard lock(mu_);
    return off_reactor_;
  }

 private:
  const CellReactor& reactor_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::optional<Result<ExecResult>>> results_;
  std::vector<int> calls_;
  size_t done_ = 0;
  int off_reactor_ = 0;
};

class ExecAsyncTest : public ::testing::Test {
 protected:
  void MakeCells(int n) {
    ASSERT_FALSE(state_.path().empty());
    CellCreateOptions options = TestCreateOptions();
    options.reactor = &reactor_;
    for (int i = 0; i < n; ++i) {
      auto cell = Cell::Create(ProbeSpec(state_), options);
      ASSERT_TRUE(cell.ok()) << cell.error().message;
      cells_.push_back(std::move(cell).value());
    }
  }
  void TearDown() override {
    for (auto& c : cells_) {
      if (c) {
        EXPECT_TRUE(c->Destroy().ok());
      }
    }
    cells_.clear();  // before the reactor (declared first, destroyed last)
  }
  // Number of processes named `comm` in cell `i`, counted from inside (a synchronous exec).
  int CountProcesses(size_t i, const std::string& comm) {
    ExecOptions o;
    o.argv = {"/bin/sh", "-c",
              "n=0; for f in /proc/[0-9]*/comm; do [ \"$(cat $f 2>/dev/null)\" = " + comm +
                  " ] && n=$((n+1)); done; echo $n"};
    auto r = cells_[i]->Exec(o);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? std::atoi(r->out.data.c_str()) : -1;
  }

  CellReactor reactor_{2};
  TempStateDir state_;
  std::vector<std::unique_ptr<Cell>> cells_;
};

// Each exec waiting in a cell holds fds (its pipes and event socket), not a thread.
TEST_F(ExecAsyncTest, AThousandWaitingExecsHoldNoThread) {
  constexpr int kCells = 5, kExecs = 1000;  // 200 programs per cell (pids.max is 256)
  rlimit fds{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &fds), 0);
  ASSERT_GE(fds.rlim_max, 8 * kExecs) << "the fd hard limit is too low for this test";
  if (fds.rlim_cur < 8 * kExecs) {
    fds.rlim_cur = 8 * kExecs;  // this process only: about 5 fds per exec in flight
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &fds), 0);
  }
  MakeCells(kCells);
  ASSERT_EQ(reactor_.thread_count(), 2);
  const int before = ThreadCount();
  Outcomes outcomes(kExecs, reactor_);
  std::atomic<int> started{0};
  const auto start = Clock::now();
  for (int i = 0; i < kExecs; ++i) {
    ExecOptions o;
    o.argv = {"/bin/sleep", "1"};
    o.timeout = 60s;
    o.on_started = [&](uint64_t, pid_t) { ++started; };
    cells_[i % kCells]->ExecAsync(std::move(o), outcomes.For(i));
  }
  const int threads_after_start = ThreadCount();
  int peak_in_flight = 0, most_threads = threads_after_start;
  while (outcomes.done() < kExecs && Clock::now() - start < 120s) {
    peak_in_flight = std::max(peak_in_flight, started.load() - static_cast<int>(outcomes.done()));
    most_threads = std::max(most_threads, ThreadCount());
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(outcomes.WaitAll(1s)) << outcomes.done() << " of " << kExecs << " completed";
  for (int i = 0; i < kExecs; ++i) {
    ASSERT_TRUE(outcomes.at(i).ok()) << i << ": " << outcomes.at(i).error().message;
    EXPECT_EQ(outcomes.at(i)->exit_code, 0) << i;
    EXPECT_FALSE(outcomes.at(i)->signaled) << i;
    EXPECT_EQ(outcomes.calls(i), 1) << i;
  }
  EXPECT_EQ(started.load(), kExecs);
  EXPECT_EQ(outcomes.off_reactor(), 0);
  std::printf(
      "%d execs over %d cells in %lld ms: threads %d before, at most %d while %d ran at "
      "once, %d after\n",
      kExecs, kCells,
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count()),
      before, most_threads, peak_in_flight, ThreadCount());
  // Many ran at once (else the test proves nothing), on no thread more than before.
  EXPECT_GE(peak_in_flight, 100);
  EXPECT_EQ(threads_after_start, before);
  EXPECT_EQ(most_threads, before);
  EXPECT_EQ(ThreadCount(), before);
}

TEST_F(ExecAsyncTest, TimeoutKillsTheWholeProcessGroup) {
  MakeCells(1);
  Outcomes outcomes(1, reactor_);
  ExecOptions o;
  o.argv = {"/bin/sh", "-c", "sleep 1000 & sleep 1000 & echo started; wait"};
  o.timeout = 500ms;
  const auto start = Clock::now();
  cells_[0]->ExecAsync(std::move(o), outcomes.For(0));
  ASSERT_TRUE(outcomes.WaitAll(10s));
  const auto took = Clock::now() - start;
  const auto& r = outcomes.at(0);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->timed_out);
  EXPECT_TRUE(r->signaled);
  EXPECT_EQ(r->signo, SIGKILL);
  EXPECT_EQ(r->out.data, "started\n");
  EXPECT_GE(took, 500ms);
  EXPECT_LT(took, 5s);
  EXPECT_EQ(CountProcesses(0, "sleep"), 0) << "background members of the group survived";
}

TEST_F(ExecAsyncTest, CancelThroughTheHandleKillsTheWholeProcessGroup) {
  MakeCells(1);
  Outcomes outcomes(1, reactor_);
  std::promise<void> started;
  ExecOptions o;
  o.argv = {"/bin/sh", "-c", "sleep 1000 & sleep 1000 & wait"};
  o.on_started = [&](uint64_t, pid_t) { started.set_value(); };
  CellChannel::ExecHandle handle = cells_[0]->ExecAsync(std::move(o), outcomes.For(0));
  EXPECT_NE(handle.exec_id(), 0u);
  ASSERT_EQ(started.get_future().wait_for(10s), std::future_status::ready);
  std::this_thread::sleep_for(100ms);  // let the shell start its children
  handle.Cancel();
  ASSERT_TRUE(outcomes.WaitAll(10s));
  const auto& r = outcomes.at(0);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->cancelled);
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->signo, SIGKILL);
  EXPECT_EQ(CountProcesses(0, "sleep"), 0) << "background members of the group survived";
  handle.Cancel();  // after the end: nothing
  EXPECT_EQ(outcomes.calls(0), 1);
}

TEST_F(ExecAsyncTest, OutputCapsHoldAndStdinIsFed) {
  MakeCells(1);
  Outcomes outcomes(2, reactor_);
  std::atomic<uint64_t> streamed{0};
  ExecOptions o;
  o.argv = {"/bin/sh", "-c", "head -c 3000000 /dev/zero; head -c 5000 /dev/zero >&2"};
  o.keep_bytes = 4096;
  o.on_output = [&](OutputStream, std::string_view d) { streamed += d.size(); };
  cells_[0]->ExecAsync(std::move(o), outcomes.For(0));
  ExecOptions in;
  in.argv = {"/usr/bin/wc", "-c"};
  in.stdin_data = std::string(3 << 20, 'x');  // larger than a pipe holds: fed as it drains
  cells_[0]->ExecAsync(std::move(in), outcomes.For(1));
  ASSERT_TRUE(outcomes.WaitAll(30s));
  const auto& r = outcomes.at(0);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->out.total, 3000000u);
  EXPECT_EQ(r->out.data, std::string(4096, '\0'));
  EXPECT_EQ(r->err.total, 5000u);
  EXPECT_EQ(r->err.data.size(), 4096u);
  EXPECT_TRUE(r->out.truncated());
  EXPECT_EQ(streamed.load(), 3005000u);
  ASSERT_TRUE(outcomes.at(1).ok()) << outcomes.at(1).error().message;
  EXPECT_EQ(outcomes.at(1)->out.data, std::to_string(3 << 20) + "\n");
}

TEST_F(ExecAsyncTest, ADestroyedCellCompletesEachCallbackOnceNamingIt) {
  constexpr int kExecs = 20;
  MakeCells(2);  // the first is destroyed by Destroy(), the second by its destructor alone
  for (int which = 0; which < 2; ++which) {
    const std::string id = cells_[which]->id();
    Outcomes outcomes(kExecs, reactor_);
    std::atomic<int> started{0};
    for (int i = 0; i < kExecs; ++i) {
      ExecOptions o;
      o.argv = {"/bin/sleep", "1000"};
      o.on_started = [&](uint64_t, pid_t) { ++started; };
      cells_[which]->ExecAsync(std::move(o), outcomes.For(i));
    }
    const auto deadline = Clock::now() + 20s;
    while (started.load() < kExecs && Clock::now() < deadline) std::this_thread::sleep_for(10ms);
    ASSERT_EQ(started.load(), kExecs);
    if (which == 0) {
      EXPECT_TRUE(cells_[which]->Destroy().ok());
    }
    cells_[which].reset();
    ASSERT_TRUE(outcomes.WaitAll(10s)) << outcomes.done() << " of " << kExecs;
    std::this_thread::sleep_for(200ms);  // a second call would come by now
    for (int i = 0; i < kExecs; ++i) {
      EXPECT_EQ(outcomes.calls(i), 1) << i;
      ASSERT_FALSE(outcomes.at(i).ok()) << i;
      EXPECT_THAT(outcomes.at(i).error().message, HasSubstr("cell " + id)) << i;
      EXPECT_THAT(outcomes.at(i).error().message, HasSubstr("exec \"/bin/sleep\"")) << i;
    }
    EXPECT_EQ(outcomes.off_reactor(), 0);
  }
}

TEST(ExecAsyncWithoutReactor, FailsAtOnceSayingWhy) {
  TempStateDir state;
  ASSERT_FALSE(state.path().empty());
  auto cell = Cell::Create(ProbeSpec(state), TestCreateOptions());
  ASSERT_TRUE(cell.ok()) << cell.error().message;
  std::optional<Result<ExecResult>> got;
  ExecOptions o;
  o.argv = {"/bin/true"};
  (*cell)->ExecAsync(std::move(o), [&](Result<ExecResult> r) { got.emplace(std::move(r)); });
  ASSERT_TRUE(got.has_value());
  ASSERT_FALSE(got->ok());
  EXPECT_THAT(got->error().message, HasSubstr("no reactor"));
  EXPECT_THAT(got->error().message, HasSubstr((*cell)->id()));
  EXPECT_TRUE((*cell)->Destroy().ok());
}

}  // namespace
}  // namespace mcpcell::sandbox
