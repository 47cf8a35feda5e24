// Host probes: each verdict is checked against an independent look at the same kernel
// feature, so a probe that always said "ok" (or always "missing") would fail here.
#include "sandbox/linux/host_probe.h"

#include <fcntl.h>
#include <glob.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <string>

#include "sandbox/linux/cgroup.h"

namespace mcpcell::sandbox {
namespace {

bool ChildCanUnshareUser() {
  pid_t pid = fork();
  if (pid == 0) _exit(unshare(CLONE_NEWUSER) == 0 ? 0 : 1);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::set<std::string> ProbeDirs() {
  std::set<std::string> out;
  glob_t g{};
  if (glob("/tmp/mcpcell-probe-*", 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out.insert(g.gl_pathv[i]);
  }
  globfree(&g);
  return out;
}

TEST(HostProbe, PrivilegeMatchesEuid) {
  ProbeResult r = ProbePrivilege();
  EXPECT_EQ(r.verdict == ProbeVerdict::kOk, geteuid() == 0);
  EXPECT_NE(r.detail.find(std::to_string(geteuid())), std::string::npos) << r.detail;
  EXPECT_FALSE(r.consequence.empty());
}

TEST(HostProbe, UserNamespacesMatchesADirectTry) {
  ProbeResult r = ProbeUserNamespaces();
  EXPECT_EQ(r.verdict != ProbeVerdict::kMissing, ChildCanUnshareUser()) << r.detail;
  EXPECT_NE(r.detail.find("max_user_namespaces="), std::string::npos) << r.detail;
}

TEST(HostProbe, OverlayProbeLeavesNothingInTmp) {
  const std::set<std::string> before = ProbeDirs();
  ProbeResult r = ProbeOverlayInUserNamespace();
  // Overlay in a user namespace needs user namespaces first.
  if (!ChildCanUnshareUser()) {
    EXPECT_EQ(r.verdict, ProbeVerdict::kMissing);
  }
  EXPECT_FALSE(r.detail.empty());
  for (const std::string& d : ProbeDirs()) {
    EXPECT_TRUE(before.count(d)) << "probe left " << d;
  }
}

TEST(HostProbe, CgroupsMatchesDetect) {
  ProbeResult r = ProbeCgroups();
  const CgroupHost host = DetectCgroupHost();
  EXPECT_EQ(r.verdict == ProbeVerdict::kOk, host.mode != CgroupMode::kNone && host.can_create);
  EXPECT_NE(r.detail.find(CgroupModeName(host.mode)), std::string::npos) << r.detail;
}

TEST(HostProbe, SeccompWorksWhereTheKernelHasIt) {
  ProbeResult r = ProbeSeccomp();
  const bool kernel_has_it = access("/proc/sys/kernel/seccomp/actions_avail", R_OK) == 0;
  EXPECT_EQ(r.verdict == ProbeVerdict::kOk, kernel_has_it) << r.detail;
  if (kernel_has_it) {
    EXPECT_NE(r.detail.find("BPF instructions"), std::string::npos) << r.detail;
  }
}

TEST(HostProbe, Openat2MatchesADirectCall) {
  open_how how{};
  how.flags = O_RDONLY | O_CLOEXEC;
  long fd = syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof how);
  const bool has_openat2 = fd >= 0;
  if (fd >= 0) close(static_cast<int>(fd));
  ProbeResult r = ProbeOpenat2();
  EXPECT_EQ(r.verdict == ProbeVerdict::kOk, has_openat2) << r.detail;
}

TEST(HostProbe, ReportListsEveryProbeWithItsConsequence) {
  // The device-node probe makes (and removes) a scratch directory on the state dir's
  // filesystem: here a temporary one, never the host's default.
  std::string state = ::testing::TempDir() + "mcpcell-probe-state-XXXXXX";
  ASSERT_NE(mkdtemp(state.data()), nullptr);
  ASSERT_EQ(setenv("MCPCELL_STATE_DIR", state.c_str(), 1), 0);
  HostReport report = ProbeHost();
  unsetenv("MCPCELL_STATE_DIR");
  EXPECT_EQ(rmdir(state.c_str()), 0) << "the probe left something in " << state;
  ASSERT_EQ(report.probes.size(), 8u);
  const std::string text = FormatHostReport(report);
  for (const ProbeResult& p : report.probes) {
    EXPECT_NE(text.find(p.name), std::string::npos) << p.name;
    EXPECT_NE(text.find(p.consequence), std::string::npos) << p.name;
  }
  EXPECT_EQ(report.root, geteuid() == 0);
  EXPECT_NE(text.find(report.cells_possible ? "cells: possible" : "cells: NOT possible"),
            std::string::npos);
}

constexpr uint64_t kAllCaps = ~uint64_t{0};
constexpr uint64_t kWithoutSetfcap = kAllCaps & ~(uint64_t{1} << CAP_SETFCAP);

TEST(HostProbe, AUidMapRefusedToRootWithoutSetfcapNamesTheCapabilityAndHowToAddIt) {
  // What the overlay probe's child reports in a container that dropped CAP_SETFCAP.
  const ProbeStepFailure failed{"write uid_map", EPERM};
  const ProbeResult r = OverlayProbeVerdict(
      &failed, "write uid_map: EPERM (Operation not permitted)", /*euid=*/0, kWithoutSetfcap);
  EXPECT_EQ(r.verdict, ProbeVerdict::kMissing);
  EXPECT_EQ(r.detail, "write uid_map: EPERM (Operation not permitted)");
  for (const char* part :
       {"lacks CAP_SETFCAP", "Linux >= 5.12", "--cap-add SETFCAP",
        "securityContext.capabilities.add: [\"SETFCAP\"]", "CapabilityBoundingSet="}) {
    EXPECT_NE(r.consequence.find(part), std::string::npos) << part << " in: " << r.consequence;
  }
}

TEST(HostProbe, OtherFailuresDoNotBlameACapability) {
  const ProbeStepFailure uid_map{"write uid_map", EPERM};
  // Holding SETFCAP, mapping a uid other than 0, another errno or another step: the advice
  // would be wrong there, and the probe says what it says without one.
  EXPECT_EQ(MissingCapabilityAdvice(uid_map, 0, kAllCaps), "");
  EXPECT_EQ(MissingCapabilityAdvice(uid_map, 1000, kWithoutSetfcap), "");
  EXPECT_EQ(MissingCapabilityAdvice({"write uid_map", EINVAL}, 0, kWithoutSetfcap), "");
  EXPECT_EQ(MissingCapabilityAdvice({"mount(\"overlay\")", EPERM}, 0, kWithoutSetfcap), "");
  const ProbeStepFailure mount{"mount(\"overlay\")", EPERM};
  const ProbeResult r = OverlayProbeVerdict(&mount, "mount(\"overlay\"): EPERM", 0, kAllCaps);
  EXPECT_EQ(r.verdict, ProbeVerdict::kMissing);
  EXPECT_NE(r.consequence.find("cells cannot get an overlay root"), std::string::npos);
  EXPECT_EQ(r.consequence.find("SETFCAP"), std::string::npos) << r.consequence;
}

TEST(HostProbe, OverlayVerdictWithoutFailureIsOk) {
  const ProbeResult r = OverlayProbeVerdict(nullptr, "", 0, kWithoutSetfcap);
  EXPECT_EQ(r.verdict, ProbeVerdict::kOk);
  EXPECT_NE(r.detail.find("mounted and wrote through an overlay"), std::string::npos);
}

TEST(HostProbe, OverlayProbeWithoutSetfcapSaysSoWhenRoot) {
  // The real thing: a child of this test without CAP_SETFCAP in its bounding, permitted
  // and effective sets runs the probe. Only root maps uid 0; Linux >= 5.12 refuses it.
  if (geteuid() != 0) GTEST_SKIP() << "maps uid 0 only as root";
  int pipefd[2];
  ASSERT_EQ(pipe2(pipefd, O_CLOEXEC), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(pipefd[0]);
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    bool ok = prctl(PR_CAPBSET_DROP, CAP_SETFCAP, 0, 0, 0) == 0 &&
              syscall(SYS_capget, &header, data) == 0;
    data[CAP_SETFCAP / 32].effective &= ~(1u << (CAP_SETFCAP % 32));
    data[CAP_SETFCAP / 32].permitted &= ~(1u << (CAP_SETFCAP % 32));
    ok = ok && syscall(SYS_capset, &header, data) == 0;
    std::string out = ok ? "" : "dropping CAP_SETFCAP failed";
    if (ok) {
      const ProbeResult r = ProbeOverlayInUserNamespace();
      out = std::string(ProbeVerdictName(r.verdict)) + "|" + r.detail + "|" + r.consequence;
    }
    if (write(pipefd[1], out.data(), out.size()) < 0) _exit(2);
    _exit(0);
  }
  close(pipefd[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(pipefd[0], buf, sizeof buf)) > 0;) out.append(buf, n);
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_EQ(out.rfind("missing|write uid_map: EPERM", 0), 0u) << out;
  EXPECT_NE(out.find("lacks CAP_SETFCAP"), std::string::npos) << out;
}

}  // namespace
}  // namespace mcpcell::sandbox
