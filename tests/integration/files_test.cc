// File operations inside real cells through CellChannel: they act as the sandbox user
// inside the cell's root and refuse what the sandboxed code could not reach: /proc magic
// links (/proc/*/root, /proc/*/fd, /proc/*/cwd), ".." components, symlink escapes, the
// read-only template, init's own /proc entries. Host files stay invisible.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <set>
#include <thread>

#include "tests/integration/cell_fixture.h"

namespace mcpcell::sandbox {
namespace {

using celltest::ProbeSpec;
using celltest::TempStateDir;
using celltest::TestCreateOptions;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(state_.path().empty());
    auto cell = Cell::Create(ProbeSpec(state_), TestCreateOptions());
    ASSERT_TRUE(cell.ok()) << cell.error().message;
    cell_ = std::move(cell).value();
  }
  void TearDown() override {
    if (cell_) {
      EXPECT_TRUE(cell_->Destroy().ok());
    }
  }
  CellChannel& ch() { return cell_->channel(); }
  std::string Sh(const std::string& script) {
    ExecOptions o;
    o.argv = {"/bin/sh", "-c", script};
    o.timeout = 30s;
    auto r = ch().Exec(o);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? r->out.data + r->err.data : "";
  }
  TempStateDir state_;
  std::unique_ptr<Cell> cell_;
};

TEST_F(FilesTest, RoundTripWithProgramsSeeingTheSameFiles) {
  std::string big(1 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + i / 256);
  Status written = ch().WriteFile("/workspace/big.bin", big);
  ASSERT_TRUE(written.ok()) << written.error().message;
  auto back = ch().ReadFile("big.bin", 2 << 20);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_TRUE(*back == big) << "content differs after chunked write/read";
  EXPECT_EQ(Sh("wc -c < /workspace/big.bin"), "1048576\n");
  // Too large for the caller's limit: an error naming both sizes.
  EXPECT_THAT(ch().ReadFile("big.bin", 1000).error().message, HasSubstr("over the limit of 1000"));

  Sh("echo from-program > /workspace/p.txt");
  EXPECT_EQ(ch().ReadFile("p.txt", 100).value(), "from-program\n");
  ASSERT_TRUE(ch().Mkdir("d1/d2", 0755, true).ok());
  ASSERT_TRUE(ch().WriteFile("d1/d2/f", "x").ok());
  auto list = ch().ListDir("/workspace");
  ASSERT_TRUE(list.ok()) << list.error().message;
  std::set<std::string> names;
  for (auto& e : *list) names.insert(e.name);
  EXPECT_EQ(names, (std::set<std::string>{"big.bin", "p.txt", "d1"}));
  auto st = ch().Stat("d1/d2/f");
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(st->type, control::FileType::kRegular);
  EXPECT_EQ(st->size, 1u);
  EXPECT_EQ(st->uid, 1000u) << "file ops must create files as the sandbox user";
  EXPECT_EQ(Sh("stat -c %U /workspace/d1/d2/f"), "sandbox\n");
  ASSERT_TRUE(ch().Remove("d1", true).ok());
  EXPECT_EQ(ch().Stat("d1").error().err, ENOENT);
}

TEST_F(FilesTest, ProcMagicLinksAreRefused) {
  std::promise<pid_t> pid;
  std::atomic<uint64_t> exec_id{0};
  ExecOptions o;
  o.argv = {"/bin/sleep", "1000"};
  o.on_started = [&](uint64_t id, pid_t p) {
    exec_id = id;
    pid.set_value(p);
  };
  o.timeout = 20s;
  auto running = std::async(std::launch::async, [&] { return ch().Exec(o); });
  const std::string proc = "/proc/" + std::to_string(pid.get_future().get());
  for (std::string path :
       {proc + "/root/etc/passwd", proc + "/cwd/x", proc + "/fd/0", proc + "/fd/1",
        std::string("/proc/1/root/etc/passwd"), std::string("/proc/self/root/etc/passwd"),
        std::string("/proc/self/fd/0"), std::string("/proc/thread-self/root/etc/passwd")}) {
    auto r = ch().ReadFile(path, 100);
    ASSERT_FALSE(r.ok()) << path << " was readable";
    EXPECT_EQ(r.error().err, ELOOP) << path << ": " << r.error().message;
    EXPECT_FALSE(ch().WriteFile(path, "x").ok()) << path;
  }
  // A symlink the sandboxed code planted that points at a magic link changes nothing.
  Sh("ln -s /proc/1/root /workspace/r1; ln -s " + proc + "/fd /workspace/fds");
  EXPECT_EQ(ch().ReadFile("/workspace/r1/etc/passwd", 100).error().err, ELOOP);
  EXPECT_EQ(ch().ReadFile("/workspace/fds/1", 100).error().err, ELOOP);
  // Init's own /proc entries are as closed to file ops as to the sandboxed code.
  auto environ = ch().ReadFile("/proc/1/environ", 100000);
  ASSERT_FALSE(environ.ok());
  EXPECT_EQ(environ.error().err, EACCES) << environ.error().message;
  EXPECT_THAT(Sh("cat /proc/1/environ >/dev/null"), HasSubstr("Permission denied"));
  ASSERT_TRUE(ch().SignalExec(exec_id, SIGKILL).ok());
  auto r = running.get();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->signo, SIGKILL);
}

TEST_F(FilesTest, DotDotAndSymlinkEscapesStayInside) {
  // ".." climbs no higher than the cell's root: the cell's own passwd, as `cat` sees it.
  auto passwd = ch().ReadFile("../../../../etc/passwd", 100000);
  ASSERT_TRUE(passwd.ok()) << passwd.error().message;
  EXPECT_EQ(*passwd, Sh("cat ../../../../etc/passwd"));
  EXPECT_THAT(*passwd, HasSubstr("sandbox:x:"));
  // A write by ".." succeeds exactly where the sandboxed code's own write does (the cell's
  // /etc is root's in a cell with privilege, the user's in one without).
  const bool code_can = Sh("echo y > /etc/y 2>/dev/null && echo wrote") == "wrote\n";
  Status written = ch().WriteFile("/workspace/../etc/x", "x");
  EXPECT_EQ(written.ok(), code_can) << (written.ok() ? "" : written.error().message);
  if (!written.ok()) {
    EXPECT_EQ(written.error().err, EACCES);
  }
  // The state dir exists on the host but not inside the cell, whatever the link says.
  Sh("ln -s " + state_.path() + " /workspace/host; ln -s ../../../../.. /workspace/up");
  EXPECT_EQ(ch().ListDir("/workspace/host").error().err, ENOENT);
  auto up = ch().ListDir("/workspace/up");  // ".." in a link target stops at the cell's root
  ASSERT_TRUE(up.ok()) << up.error().message;
  std::set<std::string> names;
  for (auto& e : *up) names.insert(e.name);
  EXPECT_TRUE(names.count("workspace") && names.count("usr") && names.count("proc"));
  EXPECT_FALSE(names.count("work")) << "the host's root leaked into the listing";
  EXPECT_EQ(ch().ReadFile(state_.path() + "/cells", 10).error().err, ENOENT);
}

TEST_F(FilesTest, FileOpsCanWriteExactlyWhereTheCodeCan) {
  // The template's directories belong to root (or, in desktop mode, to an unmapped host
  // uid): neither the code nor a file op may add to them.
  for (std::string path : {"/usr/bin/evil", "/usr/lib/evil", "/usr/sbin/evil"}) {
    Status s = ch().WriteFile(path, "x");
    ASSERT_FALSE(s.ok()) << path << " was writable";
    EXPECT_THAT(s.error().err, AnyOf(EACCES, EROFS, EPERM)) << s.error().message;
  }
  EXPECT_FALSE(ch().Remove("/usr/bin/sh").ok());
  EXPECT_FALSE(ch().Mkdir("/usr/bin/newdir").ok());
  EXPECT_EQ(Sh("test -e /usr/bin/sh && echo present"), "present\n");
  // Elsewhere a file op succeeds exactly when the same write by the sandboxed code does
  // (in desktop mode init wrote /etc/passwd as the one mapped user, who then owns it).
  for (std::string path : {"/etc/passwd", "/etc/newfile", "/usr/newfile", "/newfile", "/tmp/t",
                           "/workspace/w", "/proc/sys/kernel/hostname"}) {
    const bool code_can = Sh("(echo x > " + path + ".code || echo x >> " + path +
                             ") 2>/dev/null && echo yes") == "yes\n";
    EXPECT_EQ(ch().WriteFile(path + ".op", "x").ok() || ch().WriteFile(path, "x").ok(), code_can)
        << path;
  }
  EXPECT_EQ(Sh("cat /tmp/t.op"), "x");
}

TEST_F(FilesTest, SpecialFilesAreRefusedWithoutBlockingInit) {
  Sh("mkfifo /workspace/fifo");
  auto r = ch().ReadFile("fifo", 100);  // a blocking open would hang cell init for good
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("not a regular file"));
  EXPECT_THAT(ch().WriteFile("/dev/null", "x").error().message, HasSubstr("not a regular file"));
  EXPECT_THAT(ch().ReadFile("/dev/zero", 100).error().message, HasSubstr("not a regular file"));
  EXPECT_EQ(Sh("echo fine"), "fine\n");
}

TEST_F(FilesTest, FileOpsRunWhileAnExecIsRunning) {
  ExecOptions o;
  o.argv = {"/bin/sh", "-c", "sleep 1; echo done"};
  auto running = std::async(std::launch::async, [&] { return ch().Exec(o); });
  std::this_thread::sleep_for(100ms);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(ch().WriteFile("f" + std::to_string(i), "x").ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 900ms) << "file ops waited for the exec";
  auto r = running.get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out.data, "done\n");
  EXPECT_EQ(ch().ListDir("/workspace")->size(), 50u);
}

}  // namespace
}  // namespace mcpcell::sandbox
