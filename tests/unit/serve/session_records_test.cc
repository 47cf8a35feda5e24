// Records of hibernated sessions (serve/session_records.h) and what the server does with them
// (serve/session_resume.h) before any cell is involved: a record round-trips; a corrupt,
// truncated, mis-named record, one with an unknown field or an unknown version is refused with
// the file and the field named; List skips bad files with a warning naming each; an HTTP
// revival is refused for another tenant's id, a foreign tenant, missing files and an ended
// session, and granted with the recorded protocol version otherwise; `serve --resume` names
// the id and how to list them.
#include "serve/session_records.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "sandbox/snapshot_store.h"
#include "serve/session_resume.h"
#include "serve/session_state.h"
#include "serve/workspaces.h"

namespace mcpcell::serve {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

SessionRecord Sample(const std::string& id, const std::string& tenant = "alice") {
  return SessionRecord{.resume_id = id,
                       .transport = "http",
                       .tenant = tenant,
                       .snapshot_id = std::string(32, 'b'),
                       .policy_name = "default",
                       .policy_sha256 = std::string(64, 'c'),
                       .protocol_version = "2025-06-18",
                       .client_info = {{"name", "probe"}, {"version", "1"}},
                       .client_capabilities = {{"roots", mcp::Json::object()}},
                       .created = FormatUtc(WallClock::now()),
                       .last_used = FormatUtc(WallClock::now()),
                       .hibernated_at = FormatUtc(WallClock::now()),
                       .server_id = std::string(32, 'd')};
}

class SessionRecordsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mcpcell-records-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    state_ = tmpl;
  }
  void TearDown() override { fs::remove_all(state_); }
  void WriteRaw(const std::string& name, const std::string& text) {
    fs::create_directories(state_ + "/sessions");
    std::ofstream(state_ + "/sessions/" + name) << text;
  }
  std::string state_;
  const std::string id_ = std::string(32, 'a');
};

TEST_F(SessionRecordsTest, ARecordWrittenIsReadBackWhole) {
  SessionRecords records(state_ + "/sessions");
  ASSERT_TRUE(records.Write(Sample(id_)).ok());
  auto back = records.Read(id_);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->tenant, "alice");
  EXPECT_EQ(back->protocol_version, "2025-06-18");
  EXPECT_EQ(back->client_info["name"], "probe");
  EXPECT_EQ(back->client_capabilities, (mcp::Json{{"roots", mcp::Json::object()}}));
  EXPECT_FALSE(fs::exists(records.PathOf(id_) + ".tmp")) << "the temp file was renamed over";
  EXPECT_EQ(fs::status(state_ + "/sessions").permissions() & fs::perms::others_all,
            fs::perms::none);
}

TEST_F(SessionRecordsTest, ACorruptRecordIsRefusedNamingTheFile) {
  WriteRaw(id_ + ".json", "{\"version\": 1, \"resume_id\": ");  // cut mid-write
  auto r = SessionRecords(state_ + "/sessions").Read(id_);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr(state_ + "/sessions/" + id_ + ".json"));
  EXPECT_THAT(r.error().message, HasSubstr("not valid JSON"));
}

TEST_F(SessionRecordsTest, ATruncatedRecordNamesTheMissingField) {
  mcp::Json j = mcp::Json::parse(SessionRecordText(Sample(id_)));
  j.erase("snapshot_id");
  auto r = ParseSessionRecord(j.dump(), "f.json");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("missing field \"snapshot_id\""));
}

TEST_F(SessionRecordsTest, AnUnknownVersionOrFieldOrTypeIsRefused) {
  mcp::Json j = mcp::Json::parse(SessionRecordText(Sample(id_)));
  j["version"] = 2;
  auto r = ParseSessionRecord(j.dump(), "f.json");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("version 2 is not 1"));

  j = mcp::Json::parse(SessionRecordText(Sample(id_)));
  j["owner"] = "mallory";
  r = ParseSessionRecord(j.dump(), "f.json");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("unknown field \"owner\""));

  j = mcp::Json::parse(SessionRecordText(Sample(id_)));
  j["tenant"] = 7;
  r = ParseSessionRecord(j.dump(), "f.json");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("\"tenant\" must be a string"));

  j = mcp::Json::parse(SessionRecordText(Sample(id_)));
  j["snapshot_id"] = "../../etc";
  r = ParseSessionRecord(j.dump(), "f.json");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("snapshot_id"));
}

TEST_F(SessionRecordsTest, ARecordUnderAnotherNameIsRefused) {
  const std::string other(32, 'e');
  WriteRaw(other + ".json", SessionRecordText(Sample(id_)));
  auto r = SessionRecords(state_ + "/sessions").Read(other);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("is not the file's name"));
}

TEST_F(SessionRecordsTest, IdsThatAreNotHexNeverReachTheFilesystem) {
  SessionRecords records(state_ + "/sessions");
  for (const std::string& bad :
       std::vector<std::string>{"../x", std::string(31, 'a'), std::string(32, 'A'), ""}) {
    auto r = records.Read(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.error().message, HasSubstr("not a session id"));
  }
  EXPECT_FALSE(records.Write(Sample("../../x")).ok());
}

TEST_F(SessionRecordsTest, ListSkipsBadFilesWithAWarningNamingEach) {
  SessionRecords records(state_ + "/sessions");
  ASSERT_TRUE(records.Write(Sample(id_)).ok());
  WriteRaw(std::string(32, 'f') + ".json", "garbage");
  WriteRaw("notes.txt", "x");
  std::vector<std::string> warnings;
  auto all = records.List(&warnings);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].resume_id, id_);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_THAT(warnings[0], HasSubstr(std::string(32, 'f') + ".json"));
  EXPECT_THAT(warnings[1], HasSubstr("notes.txt"));
}

// SessionResume over a store holding one real hibernation snapshot of tenant alice.
class SessionResumeTest : public SessionRecordsTest {
 protected:
  void SetUp() override {
    SessionRecordsTest::SetUp();
    server_policy_.name = "server";
    tenants_["alice"].name = "alice-policy";
    tenants_["bob"].name = "bob-policy";
    state_obj_ = std::make_unique<SessionState>(SessionStateOptions{
        .state_dir = state_, .server_policy = &server_policy_, .tenant_policies = &tenants_});
    fs::create_directories(state_ + "/files");
    std::ofstream(state_ + "/files/keep.txt") << "kept";
    auto captured = state_obj_->store().Capture("alice", "", {Files()}, {}, "",
                                                sandbox::kSnapshotKindHibernation);
    ASSERT_TRUE(captured.ok()) << captured.error().message;
    snapshot_ = captured->info.id;
    resume_ = std::make_unique<SessionResume>(SessionResumeOptions{.state_dir = state_,
                                                                   .transport = "http",
                                                                   .server_policy = &server_policy_,
                                                                   .tenant_policies = &tenants_,
                                                                   .state = state_obj_.get()});
  }
  void TearDown() override {
    resume_.reset();
    state_obj_.reset();
    SessionRecordsTest::TearDown();
  }
  sandbox::LayerSource Files() const {
    return {.layer = "workspace",
            .dir = state_ + "/files",
            .uid_base = 0,
            .gid_base = 0,
            .exclude = {}};
  }
  void Record(const std::string& id, const std::string& tenant, const std::string& snapshot) {
    SessionRecord r = Sample(id, tenant);
    r.snapshot_id = snapshot;
    ASSERT_TRUE(SessionRecords(state_ + "/sessions").Write(r).ok());
  }
  policies::Policy server_policy_;
  std::map<std::string, policies::Policy> tenants_;
  std::unique_ptr<SessionState> state_obj_;
  std::unique_ptr<SessionResume> resume_;
  std::string snapshot_;
};

TEST_F(SessionResumeTest, TheSameTenantRevivesWithTheRecordedVersion) {
  Record(id_, "alice", snapshot_);
  auto revived = resume_->Revive(id_, "alice");
  ASSERT_TRUE(revived.has_value());
  EXPECT_EQ(revived->protocol_version, "2025-06-18");
  EXPECT_EQ(revived->client_info["name"], "probe");
}

TEST_F(SessionResumeTest, AnotherTenantsIdIsAsUnknownAsAnyOther) {
  Record(id_, "alice", snapshot_);
  EXPECT_FALSE(resume_->Revive(id_, "bob").has_value());
  EXPECT_FALSE(resume_->Revive(std::string(32, '9'), "alice").has_value());
  EXPECT_FALSE(resume_->Revive("not-an-id", "alice").has_value());
  EXPECT_TRUE(fs::exists(state_ + "/sessions/" + id_ + ".json")) << "alice's record stays";
}

TEST_F(SessionResumeTest, AForeignTenantOrMissingFilesAreNotRevived) {
  Record(id_, "carol", snapshot_);  // no policy for carol on this server
  EXPECT_FALSE(resume_->Revive(id_, "carol").has_value());
  const std::string gone(32, '7');
  Record(gone, "alice", std::string(32, '8'));  // its snapshot does not exist
  EXPECT_FALSE(resume_->Revive(gone, "alice").has_value());
}

TEST_F(SessionResumeTest, ASessionPastItsMaximumLifetimeIsDroppedWithItsFiles) {
  tenants_["alice"].time.session_max = std::chrono::seconds(60);
  SessionRecord r = Sample(id_, "alice");
  r.snapshot_id = snapshot_;
  r.created = FormatUtc(WallClock::now() - std::chrono::hours(1));
  ASSERT_TRUE(SessionRecords(state_ + "/sessions").Write(r).ok());
  EXPECT_FALSE(resume_->Revive(id_, "alice").has_value());
  EXPECT_FALSE(fs::exists(state_ + "/sessions/" + id_ + ".json"));
  EXPECT_FALSE(state_obj_->store().Get("alice", snapshot_).ok()) << "its files were deleted";
}

TEST_F(SessionResumeTest, StdioResumeOfAnUnknownOrTenantsSessionNamesTheIdAndTheList) {
  auto unknown = resume_->PrepareStdio(std::string(32, '9'));
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.error().message, HasSubstr(std::string(32, '9')));
  EXPECT_THAT(unknown.error().message, HasSubstr("mcpcell session list"));
  Record(id_, "alice", snapshot_);
  auto tenants = resume_->PrepareStdio(id_);
  ASSERT_FALSE(tenants.ok());
  EXPECT_THAT(tenants.error().message, HasSubstr("no hibernated session \"" + id_ + "\""));
}

TEST_F(SessionResumeTest, SweepKeepsRecordedFilesAndDeletesUnrecordedOnes) {
  Record(id_, "alice", snapshot_);
  auto stray = state_obj_->store().Capture("alice", "", {Files()}, {}, "",
                                           sandbox::kSnapshotKindHibernation);
  ASSERT_TRUE(stray.ok()) << stray.error().message;
  resume_->Sweep();
  EXPECT_TRUE(state_obj_->store().Get("alice", snapshot_).ok());
  EXPECT_FALSE(state_obj_->store().Get("alice", stray->info.id).ok());
}

}  // namespace
}  // namespace mcpcell::serve
