// launch_cost: what a process's size does to the CPU it spends launching a child that only
// execs, as the server does for every cell's init (bench/http_load/README.md, "Where a new
// session's server CPU goes"). A process with T idle threads and M MiB of touched heap
// launches /bin/true N times with fork semantics (fork + execve: the child gets a copy of
// the address space, then the parent pays copy-on-write faults) and N times with
// posix_spawn (CLONE_VM|CLONE_VFORK: nothing copied), and prints the parent's CPU per
// launch. The namespaces a cell's clone3 also makes are not part of this; only the copy.
//
//   build/bin/launch_cost [--threads T] [--heap-mib M] [--launches N]
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

double SelfCpuMs() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto ms = [](const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; };
  return ms(ru.ru_utime) + ms(ru.ru_stime);
}

// The parent's CPU per launch of /bin/true, with fork semantics or with posix_spawn.
double LaunchCostMs(bool fork_semantics, int launches) {
  char* args[] = {const_cast<char*>("/bin/true"), nullptr};
  const double before = SelfCpuMs();
  for (int i = 0; i < launches; ++i) {
    pid_t pid = -1;
    if (fork_semantics) {
      pid = ::fork();
      if (pid == 0) {
        ::execve(args[0], args, environ);
        _exit(127);
      }
    } else if (::posix_spawn(&pid, args[0], nullptr, nullptr, args, environ) != 0) {
      pid = -1;
    }
    if (pid < 0) {
      std::perror("launch /bin/true");
      std::exit(1);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
  return (SelfCpuMs() - before) / launches;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 300, heap_mib = 30, launches = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (v <= 0) {
      std::fprintf(stderr, "launch_cost: %s needs a positive number, not %s\n", argv[i],
                   argv[i + 1]);
      return 2;
    }
    if (flag == "--threads") {
      threads = v;
    } else if (flag == "--heap-mib") {
      heap_mib = v;
    } else if (flag == "--launches") {
      launches = v;
    } else {
      std::fprintf(stderr, "usage: %s [--threads T] [--heap-mib M] [--launches N]\n", argv[0]);
      return 2;
    }
  }
  // Idle threads blocked on a condition variable: they cost no CPU of their own, only
  // their stacks' mappings in the address space a fork copies.
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::vector<std::thread> idle;
  for (int i = 0; i < threads; ++i) {
    idle.emplace_back([&] {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return stop; });
    });
  }
  std::vector<char> heap(static_cast<size_t>(heap_mib) << 20);
  std::memset(heap.data(), 1, heap.size());
  const double forked = LaunchCostMs(true, launches);
  const double spawned = LaunchCostMs(false, launches);
  std::printf(
      "%d threads, %d MiB heap, %d launches each: fork+execve %.3f ms, posix_spawn %.3f "
      "ms of parent CPU per launch (%.1fx)\n",
      threads, heap_mib, launches, forked, spawned, forked / spawned);
  {
    std::lock_guard lock(mu);
    stop = true;
  }
  cv.notify_all();
  for (std::thread& t : idle) t.join();
  return 0;
}
