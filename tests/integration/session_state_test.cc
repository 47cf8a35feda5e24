// The sessions' filesystem state with real cells (serve/session_state.h over the snapshot
// store and CellSessionManager): files the sandbox user writes are snapshotted, changed,
// restored equal (sha256 of every file, modes, owners, symlinks); a snapshot over a restored
// one is whole; a fork into a second session shares the files and not the changes, and has
// its own hostname; a live base cannot be deleted; an idle session hibernates and its next
// cell has the files back; no snapshot holds a /run path. The sandbox user can write only
// /workspace and /tmp (a tmpfs, /var/tmp links to it, never captured): /usr/local and /var
// belong to host root, which a cell does not map, so the root and /usr layers hold what the
// server writes there (/etc/passwd, hostname, hosts), checked by the manifest. Needs a root
// server (idmapped layers); unprivileged it checks the clear refusal.
#include "serve/session_state.h"

#include <unistd.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/integration/cell_fixture.h"

namespace mcpcell::serve {
namespace {

using sandbox::CellLease;
using sandbox::celltest::Eventually;
using sandbox::celltest::ProbeFactory;
using sandbox::celltest::TempStateDir;
using sandbox::celltest::TestCreateOptions;
using ::testing::HasSubstr;

constexpr const char* kDirs = "/workspace";

std::string Sh(const CellLease& lease, const std::string& script) {
  sandbox::celltest::ProbeRun r = sandbox::celltest::RunInCell(lease, {"/bin/sh", "-c", script});
  EXPECT_TRUE(r.ok && r.exit_code == 0) << script << "\n" << r.error << r.err;
  return r.out;
}

// Every path under the test dirs with its type, mode, owner and link target, and the
// sha256 of every file.
std::string Fingerprint(const CellLease& lease) {
  return Sh(lease, std::string("for d in ") + kDirs +
                       "; do find $d -printf '%p %y %m %U %l\\n'; done | sort; "
                       "find " +
                       kDirs + " -type f -exec sha256sum {} + | sort");
}

void WriteFiles(const CellLease& lease) {
  Sh(lease, std::string("set -e; for d in ") + kDirs +
                "; do mkdir -p $d/sub/deeper; printf 'hello %s\\n' $d > $d/a.txt; "
                "chmod 600 $d/a.txt; head -c 100000 /dev/urandom > $d/sub/blob.bin; "
                "printf '#!/bin/sh\\necho hi\\n' > $d/sub/run.sh; chmod 750 $d/sub/run.sh; "
                "ln -s ../a.txt $d/sub/link; ln -s /nonexistent $d/dangling; "
                ": > $d/sub/deeper/empty; done");
}

void ChangeFiles(const CellLease& lease) {
  Sh(lease, std::string("set -e; for d in ") + kDirs +
                "; do echo changed > $d/a.txt; rm -r $d/sub/deeper; rm $d/sub/link; "
                "echo new > $d/new.txt; chmod 644 $d/sub/run.sh; done");
}

class SessionStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(state_.path().empty());
    tenants_.emplace("short", policies::Policy{});
    sandbox::CellSessionOptions o;
    o.create = TestCreateOptions();
    manager_ = std::make_unique<sandbox::CellSessionManager>(ProbeFactory(state_), o);
    sandbox::CellSessionProfile short_idle;
    short_idle.factory = ProbeFactory(state_);
    short_idle.idle_timeout = std::chrono::seconds(1);
    ASSERT_TRUE(manager_->AddProfile("short", std::move(short_idle)).ok());
    sessions_ = std::make_unique<SessionState>(SessionStateOptions{
        .state_dir = state_.path(), .server_policy = &policy_, .tenant_policies = &tenants_});
    sandbox::CellHooks hooks;
    hooks.hibernate = [this](sandbox::CellInstance& cell, const std::string& key,
                             const std::string& profile, const sandbox::SessionBase* base,
                             bool frozen) {
      return sessions_->Hibernate(cell, key, profile, base, frozen);
    };
    hooks.on_base_released = [this](const std::string& key, const std::string& profile,
                                    const sandbox::SessionBase& base) {
      sessions_->BaseReleased(key, profile, base);
    };
    manager_->SetCellHooks(std::move(hooks));
    sessions_->Attach(manager_.get());
  }
  void TearDown() override {
    if (manager_) manager_->CloseAll();
    manager_.reset();
  }

  Result<CellLease> Lease(const std::string& key, const std::string& tenant = "") {
    auto session = manager_->Get(key, tenant);
    if (!session) return session.error();
    return (*session)->Acquire();
  }

  TempStateDir state_;
  policies::Policy policy_;
  std::map<std::string, policies::Policy> tenants_;
  std::unique_ptr<SessionState> sessions_;  // outlives the manager (its hooks call it)
  std::unique_ptr<sandbox::CellSessionManager> manager_;
};

TEST_F(SessionStateTest, RestoreBringsBackEveryFileAndAForkKeepsItsChangesApart) {
  std::string written;
  {
    auto lease = Lease("s1");
    ASSERT_TRUE(lease.ok()) << lease.error().message;
    WriteFiles(*lease);
    written = Fingerprint(*lease);
  }
  ASSERT_THAT(written, HasSubstr("/workspace/sub/link l 777 1000 ../a.txt"));
  auto one = sessions_->Create("s1", "", "one");
  if (::geteuid() != 0) {
    ASSERT_FALSE(one.ok());
    EXPECT_THAT(one.error().message, HasSubstr("snapshots need a server running as root"));
    return;
  }
  ASSERT_TRUE(one.ok()) << one.error().message;
  EXPECT_GE(one->snapshot.files, 5u);
  EXPECT_GT(one->quota_used_bytes, 100000u);
  auto stored = sessions_->store().Get("default", "one");
  ASSERT_TRUE(stored.ok()) << stored.error().message;
  std::set<std::string> paths;
  for (const sandbox::SnapshotLayer& layer : stored->layers)
    for (const sandbox::SnapshotEntry& e : layer.entries) {
      paths.insert(layer.name + ":" + e.path);
      EXPECT_FALSE(layer.name == "root" && (e.path == "run" || e.path.rfind("run/", 0) == 0))
          << "a snapshot holds " << e.path;
    }
  EXPECT_TRUE(paths.count("root:etc/passwd"));
  EXPECT_TRUE(paths.count("workspace:sub/link"));

  std::string changed;
  {
    auto lease = Lease("s1");
    ASSERT_TRUE(lease.ok()) << lease.error().message;
    ChangeFiles(*lease);
    changed = Fingerprint(*lease);
  }
  ASSERT_NE(changed, written);
  auto restored = sessions_->Restore("s1", "", "one");
  ASSERT_TRUE(restored.ok()) << restored.error().message;
  EXPECT_EQ(restored->programs_ended, 0u);
  {
    auto lease = Lease("s1");
    ASSERT_TRUE(lease.ok()) << lease.error().message;
    EXPECT_EQ(Fingerprint(*lease), written);
    ChangeFiles(*lease);  // the same change, now over the snapshot's layers
  }
  // Captured over "one": whole, with the deletions as whiteouts.
  ASSERT_TRUE(sessions_->Create("s1", "", "two").ok());

  std::string fork_host;
  auto fork = sessions_->Restore("s2", "", "one");
  ASSERT_TRUE(fork.ok()) << fork.error().message;
  {
    auto lease = Lease("s2");
    ASSERT_TRUE(lease.ok()) << lease.error().message;
    EXPECT_EQ(Fingerprint(*lease), written);
    Sh(*lease, "echo fork > /workspace/fork-only");
    fork_host = Sh(*lease, "cat /etc/hostname");
    // No machine id or random seed to share: a cell has none (docs/lifecycle.md, "Identity").
    EXPECT_EQ(Sh(*lease,
                 "for f in /etc/machine-id /var/lib/dbus/machine-id "
                 "/var/lib/systemd/random-seed; do test -e $f && echo $f; done; true"),
              "");
  }
  ASSERT_TRUE(sessions_->Restore("s1", "", "two").ok());
  {
    auto lease = Lease("s1");
    ASSERT_TRUE(lease.ok()) << lease.error().message;
    EXPECT_EQ(Fingerprint(*lease), changed);
    EXPECT_EQ(Sh(*lease, "ls /workspace/fork-only 2>/dev/null || echo absent"), "absent\n");
    EXPECT_NE(Sh(*lease, "cat /etc/hostname"), fork_host);
  }

  // "one" is s2's base: its dirs are s2's lower layers.
  Status in_use = sessions_->Delete("", "one");
  ASSERT_FALSE(in_use.ok());
  EXPECT_THAT(in_use.error().message, HasSubstr("is in use: a live session runs over it"));
  // The same from another process's view of the store (`mcpcell snapshot delete`): the
  // server's in-use mark refuses it.
  sandbox::SnapshotStore operator_view(state_.path() + "/snapshots");
  Status cli = operator_view.Delete("default", "one");
  ASSERT_FALSE(cli.ok());
  EXPECT_THAT(cli.error().message, HasSubstr("is in use: a running server has it as the base"));
  ASSERT_TRUE(manager_->Close("s2").ok());
  EXPECT_TRUE(sessions_->Delete("", "one").ok());
  EXPECT_FALSE(sessions_->Restore("s1", "", "one").ok());
  EXPECT_FALSE(sessions_->Restore("s1", "other", "two").ok());  // another tenant: not found
}

TEST_F(SessionStateTest, AnIdleSessionHibernatesAndItsNextCellHasTheFilesBack) {
  std::string written, first_cell;
  {
    auto lease = Lease("h1", "short");
    ASSERT_TRUE(lease.ok()) << lease.error().message;
    WriteFiles(*lease);
    written = Fingerprint(*lease);
    first_cell = lease->id();
  }
  auto session = manager_->Get("h1", "short");
  ASSERT_TRUE(session.ok());
  if (::geteuid() != 0) {
    // The capture is refused: the files go, as before hibernation existed.
    ASSERT_TRUE(Eventually([&] { return (*session)->Info().cell_id.empty(); }));
    auto lease = (*session)->Acquire();
    ASSERT_TRUE(lease.ok()) << lease.error().message;
    EXPECT_THAT(lease->replaced_reason(), HasSubstr("could not be kept"));
    return;
  }
  ASSERT_TRUE(Eventually([&] { return (*session)->Info().hibernated; }));
  auto hidden = sessions_->store().List("short");
  ASSERT_TRUE(hidden.ok());
  ASSERT_EQ(hidden->size(), 1u);
  EXPECT_EQ((*hidden)[0].kind, sandbox::kSnapshotKindHibernation);
  // It is the session's base, marked in use: another process cannot delete it (the CLI's
  // --force lifts only its own check of the kind).
  sandbox::SnapshotStore operator_view(state_.path() + "/snapshots");
  Status cli = operator_view.Delete("short", (*hidden)[0].id);
  ASSERT_FALSE(cli.ok());
  EXPECT_THAT(cli.error().message, HasSubstr("is in use"));
  auto listed = sessions_->List("short");
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty()) << "a hibernation snapshot is not listed";
  {
    auto lease = (*session)->Acquire();
    ASSERT_TRUE(lease.ok()) << lease.error().message;
    EXPECT_NE(lease->id(), first_cell);
    EXPECT_THAT(lease->replaced_reason(),
                HasSubstr("hibernated after 1 s of idle: its programs were stopped, its files "
                          "kept"));
    EXPECT_EQ(Fingerprint(*lease), written);
  }
  // The session's end deletes its hibernation snapshot.
  ASSERT_TRUE(manager_->Close("h1").ok());
  hidden = sessions_->store().List("short");
  ASSERT_TRUE(hidden.ok());
  EXPECT_TRUE(hidden->empty());
}

}  // namespace
}  // namespace mcpcell::serve
