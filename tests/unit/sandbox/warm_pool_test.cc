// WarmPool's growth with demand, with a fake cell maker (real cells: tests/integration/
// warm_pool_test.cc): a drained pool refills to its floor, a burst raises the target to
// its size up to the ceiling and the pool fills to it, the target falls back to the floor
// once the burst leaves the demand window and the surplus is destroyed, at most `makers`
// cells are made at once, a caller waits only for a cell no other caller waits for, and a
// maker that fails makes the pool back off (doubling) and say why, then recover.
#include "sandbox/warm_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace mcpcell::sandbox {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// What the fake maker has done; shared by the backend and its cells.
struct Counts {
  std::atomic<int> created{0}, destroyed{0}, attempts{0}, in_flight{0}, most_in_flight{0};
};

class FakeCell final : public CellInstance {
 public:
  FakeCell(std::string id, Counts* counts) : counts_(counts) { spec_.id = std::move(id); }
  const std::string& id() const override { return spec_.id; }
  const CellSpec& spec() const override { return spec_; }
  const std::vector<std::string>& warnings() const override { return warnings_; }
  bool usable() const override { return !destroyed_; }
  Result<CgroupUsage> Usage() const override { return CgroupUsage{}; }
  int TakeEgressListener() override { return -1; }
  Status Destroy() override {
    if (!destroyed_.exchange(true)) ++counts_->destroyed;
    return Ok();
  }
  Result<ExecResult> Exec(const ExecOptions&) override { return No(); }
  Status SignalExec(uint64_t, int) override { return No(); }
  Result<control::StatsReply> Stats() override { return No(); }
  Result<std::string> ReadFile(const std::string&, uint64_t) override { return No(); }
  Result<FileWindow> ReadFileRange(const std::string&, uint64_t, uint64_t) override { return No(); }
  Status WriteFile(const std::string&, std::string_view, uint32_t) override { return No(); }
  Status WriteFileAt(const std::string&, uint64_t, std::string_view, bool, uint32_t) override {
    return No();
  }
  Status AppendFile(const std::string&, std::string_view, uint32_t) override { return No(); }
  Status WriteNewFile(const std::string&, std::string_view, uint32_t) override { return No(); }
  Result<std::vector<control::DirEntry>> ListDir(const std::string&, size_t) override {
    return No();
  }
  Result<control::FileStat> Stat(const std::string&, bool) override { return No(); }
  Status Mkdir(const std::string&, uint32_t, bool) override { return No(); }
  Status Remove(const std::string&, bool) override { return No(); }
  Status Rename(const std::string&, const std::string&, bool) override { return No(); }

 private:
  static Error No() { return Error::Msg("fake cell: no requests"); }
  CellSpec spec_;
  std::vector<std::string> warnings_;
  Counts* counts_;
  std::atomic<bool> destroyed_{false};
};

// A maker whose creations can fail (with `failure`) or be held at a gate until opened.
class FakeMaker final : public CellBackend {
 public:
  Result<std::unique_ptr<CellInstance>> Create(const CellSpec& spec) const override {
    ++counts.attempts;
    const int now = ++counts.in_flight;
    for (int most = counts.most_in_flight.load(); now > most;) {
      if (counts.most_in_flight.compare_exchange_weak(most, now)) break;
    }
    {
      std::unique_lock lock(mu_);
      opened_.wait(lock, [&] { return open_; });
    }
    std::this_thread::sleep_for(2ms);  // a creation is not instant: overlaps show
    --counts.in_flight;
    std::string failure;
    {
      std::lock_guard lock(mu_);
      failure = failure_;
    }
    if (!failure.empty()) return Error::Msg(failure);
    ++counts.created;
    return std::unique_ptr<CellInstance>(new FakeCell(spec.id, &counts));
  }
  void Fail(std::string why) {
    std::lock_guard lock(mu_);
    failure_ = std::move(why);
  }
  void Gate(bool open) {
    std::lock_guard lock(mu_);
    open_ = open;
    opened_.notify_all();
  }
  mutable Counts counts;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable opened_;
  bool open_ = true;
  std::string failure_;
};

WarmPool::SpecFactory Specs() {
  return [](const std::string& id) -> Result<CellSpec> {
    CellSpec spec;
    spec.id = id;
    return spec;
  };
}

bool Eventually(const std::function<bool()>& f, std::chrono::milliseconds limit = 5s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!f()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

WarmPoolOptions Growing(size_t floor, size_t ceiling, size_t makers = 1) {
  WarmPoolOptions o;
  o.floor = floor;
  o.ceiling = ceiling;
  o.makers = makers;
  return o;
}

// Takes `n` cells at once (no waiting for ones being made) and destroys them.
void Burst(WarmPool& pool, int n) {
  for (int i = 0; i < n; ++i) {
    if (std::unique_ptr<CellInstance> cell = pool.Take(0ms)) (void)cell->Destroy();
  }
}

TEST(WarmPoolGrowth, ADrainedPoolRefillsToItsFloor) {
  auto maker = std::make_shared<FakeMaker>();
  WarmPool pool(Specs(), maker, Growing(2, 2));
  ASSERT_TRUE(Eventually([&] { return pool.ready() == 2; })) << pool.status();
  Burst(pool, 2);
  EXPECT_EQ(pool.target(), 2u) << "the ceiling is the floor: no growth";
  EXPECT_TRUE(Eventually([&] { return pool.ready() == 2; })) << pool.status();
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(pool.ready(), 2u) << "not beyond the floor";
}

TEST(WarmPoolGrowth, ABurstRaisesTheTargetToItsSizeAndThePoolFillsToIt) {
  auto maker = std::make_shared<FakeMaker>();
  WarmPool pool(Specs(), maker, Growing(1, 20, 2));
  ASSERT_TRUE(Eventually([&] { return pool.ready() == 1; })) << pool.status();
  Burst(pool, 8);  // one hit, seven misses: all demand
  EXPECT_EQ(pool.target(), 8u);
  EXPECT_TRUE(Eventually([&] { return pool.ready() == 8; })) << pool.status();
  // The next burst of that size is served from the pool.
  int hits = 0;
  for (int i = 0; i < 8; ++i) {
    if (std::unique_ptr<CellInstance> cell = pool.Take(0ms)) {
      ++hits;
      (void)cell->Destroy();
    }
  }
  EXPECT_EQ(hits, 8);
}

TEST(WarmPoolGrowth, TheTargetStopsAtTheCeiling) {
  auto maker = std::make_shared<FakeMaker>();
  WarmPool pool(Specs(), maker, Growing(1, 5));
  ASSERT_TRUE(Eventually([&] { return pool.ready() == 1; })) << pool.status();
  Burst(pool, 30);
  EXPECT_EQ(pool.target(), 5u);
  EXPECT_TRUE(Eventually([&] { return pool.ready() == 5; })) << pool.status();
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(pool.ready(), 5u);
}

// Takes spread wider than burst_span are not one burst: the target is the most within one.
TEST(WarmPoolGrowth, DemandIsThePeakWithinOneBurstSpan) {
  auto maker = std::make_shared<FakeMaker>();
  WarmPoolOptions o = Growing(1, 50);
  o.burst_span = 100ms;
  WarmPool pool(Specs(), maker, o);
  for (int i = 0; i < 3; ++i) {
    Burst(pool, 3);
    std::this_thread::sleep_for(250ms);
  }
  EXPECT_GE(pool.target(), 3u);
  EXPECT_LE(pool.target(), 4u) << "3 takes per burst, 250 ms apart, are not 9 at once";
}

TEST(WarmPoolGrowth, AfterTheDemandWindowTheTargetFallsBackAndTheSurplusIsDestroyed) {
  auto maker = std::make_shared<FakeMaker>();
  WarmPoolOptions o = Growing(1, 20);
  o.burst_span = 40ms;
  o.demand_window = 300ms;
  WarmPool pool(Specs(), maker, o);
  ASSERT_TRUE(Eventually([&] { return pool.ready() == 1; })) << pool.status();
  Burst(pool, 6);
  EXPECT_EQ(pool.target(), 6u);
  ASSERT_TRUE(Eventually([&] { return pool.ready() == 6; })) << pool.status();
  const int destroyed_before = maker->counts.destroyed.load();
  EXPECT_TRUE(Eventually([&] { return pool.target() == 1 && pool.ready() == 1; }))
      << "target " << pool.target() << ", ready " << pool.ready();
  EXPECT_EQ(maker->counts.destroyed.load() - destroyed_before, 5) << "the five beyond the floor";
  pool.Stop();
  EXPECT_EQ(maker->counts.created.load(), maker->counts.destroyed.load())
      << "Stop destroys the rest";
}

TEST(WarmPoolGrowth, NoMoreThanMakersCellsAreMadeAtOnce) {
  auto maker = std::make_shared<FakeMaker>();
  maker->Gate(false);
  WarmPool pool(Specs(), maker, Growing(6, 6, 2));
  ASSERT_TRUE(Eventually([&] { return maker->counts.in_flight.load() == 2; }));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(maker->counts.in_flight.load(), 2);
  maker->Gate(true);
  ASSERT_TRUE(Eventually([&] { return pool.ready() == 6; })) << pool.status();
  EXPECT_EQ(maker->counts.most_in_flight.load(), 2);
}

// One cell is being made: the first caller waits for it, the second makes its own at once
// instead of queueing behind the first.
TEST(WarmPoolGrowth, ACallerWaitsOnlyForACellNoOtherCallerWaitsFor) {
  auto maker = std::make_shared<FakeMaker>();
  maker->Gate(false);
  WarmPool pool(Specs(), maker, Growing(1, 1));
  ASSERT_TRUE(Eventually([&] { return maker->counts.in_flight.load() == 1; }));
  std::unique_ptr<CellInstance> first;
  std::thread waiter([&] { first = pool.Take(5s); });
  std::this_thread::sleep_for(50ms);  // the waiter is waiting
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(pool.Take(5s), nullptr);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  maker->Gate(true);
  waiter.join();
  ASSERT_NE(first, nullptr) << pool.status();
  EXPECT_TRUE(first->usable());
  (void)first->Destroy();
}

TEST(WarmPoolGrowth, AFailingMakerMakesThePoolBackOffAndSayWhyThenRecover) {
  auto maker = std::make_shared<FakeMaker>();
  maker->Fail("cgroup mkdir: ENOSPC");
  WarmPoolOptions o = Growing(2, 2);
  o.retry_first = 40ms;
  o.retry_max = 160ms;
  WarmPool pool(Specs(), maker, o);
  ASSERT_TRUE(Eventually([&] {
    return pool.status().find("3 failed in a row") != std::string::npos;
  })) << pool.status();
  EXPECT_THAT(pool.status(), ::testing::StartsWith("retrying: cgroup mkdir: ENOSPC"));
  EXPECT_THAT(pool.status(), HasSubstr("next try in 160 ms"));  // 40, 80, then 160
  EXPECT_EQ(pool.Take(0ms), nullptr) << "the caller makes its own";
  // Backing off (40, 80, then 160 ms apart): 600 ms leave room for five tries at most.
  const int attempts = maker->counts.attempts.load();
  std::this_thread::sleep_for(600ms);
  EXPECT_LE(maker->counts.attempts.load() - attempts, 5);
  maker->Fail("");
  EXPECT_TRUE(Eventually([&] { return pool.ready() == 2; })) << pool.status();
  EXPECT_EQ(pool.status(), "");
}

TEST(WarmPoolGrowth, AFailingSpecFactoryIsReportedAndNothingIsMade) {
  auto maker = std::make_shared<FakeMaker>();
  WarmPool pool([](const std::string&) -> Result<CellSpec> { return Error::Msg("no profile"); },
                maker, Growing(1, 4));
  ASSERT_TRUE(Eventually([&] { return !pool.status().empty(); }));
  EXPECT_THAT(pool.status(), HasSubstr("cell spec: no profile"));
  EXPECT_EQ(maker->counts.attempts.load(), 0);
  EXPECT_EQ(pool.Take(0ms), nullptr);
}

}  // namespace
}  // namespace mcpcell::sandbox
