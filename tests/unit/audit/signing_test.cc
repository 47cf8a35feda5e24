// Checkpoints signed with an operator's Ed25519 key, and their verification.
#include "audit/signing.h"

#include <gtest/gtest.h>

#include "audit/trail.h"
#include "audit/verify.h"
#include "test_util.h"

namespace mcpcell::audit {
namespace {

using nlohmann::json;
using testing::CurrentPath;
using testing::MakeKeyPair;
using testing::ReadLines;
using testing::TempDir;

TEST(SigningTest, SignsAndVerifiesAndRefusesOtherMessages) {
  TempDir dir;
  auto kp = MakeKeyPair(dir.path(), "op");
  auto signer = CheckpointSigner::Load(kp.private_pem);
  ASSERT_TRUE(signer) << signer.error().message;
  auto verifier = SignatureVerifier::Load(kp.public_pem);
  ASSERT_TRUE(verifier) << verifier.error().message;
  EXPECT_EQ((*signer)->key_id(), (*verifier)->key_id());
  EXPECT_EQ((*signer)->key_id().size(), 16u);
  auto sig = (*signer)->SignBase64("hash");
  ASSERT_TRUE(sig);
  EXPECT_TRUE((*verifier)->Verify("hash", *sig));
  EXPECT_FALSE((*verifier)->Verify("hasH", *sig));
  EXPECT_FALSE((*verifier)->Verify("hash", "!!"));
}

TEST(SigningTest, KeyErrorsNameTheFile) {
  TempDir dir;
  auto missing = CheckpointSigner::Load(dir.path() + "/none.pem");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find(dir.path() + "/none.pem"), std::string::npos);
  testing::WriteFile(dir.path() + "/junk.pem", "not a key");
  auto junk = SignatureVerifier::Load(dir.path() + "/junk.pem");
  ASSERT_FALSE(junk);
  EXPECT_NE(junk.error().message.find("junk.pem"), std::string::npos);
}

std::string SignedTrail(const std::string& dir, const std::string& key) {
  auto options = testing::QuietOptions(dir + "/audit");
  options.signing_key = key;
  options.checkpoint_every = 3;
  auto trail = Trail::Open(options);
  EXPECT_TRUE(trail) << trail.error().message;
  testing::AppendN(trail->get(), 7);
  EXPECT_TRUE((*trail)->Close());
  return dir + "/audit";
}

TEST(SignedTrailTest, CheckpointsCarryAVerifyingSignature) {
  TempDir dir;
  auto kp = MakeKeyPair(dir.path(), "op");
  std::string audit = SignedTrail(dir.path(), kp.private_pem);
  json cp = json::parse(ReadLines(CurrentPath(audit))[3]);
  ASSERT_EQ(cp["type"], "checkpoint");
  EXPECT_TRUE(cp.contains("signature"));
  auto verifier = SignatureVerifier::Load(kp.public_pem);
  ASSERT_TRUE(verifier);
  EXPECT_EQ(cp["key_id"], (*verifier)->key_id());
  auto report = VerifyTrail(audit, verifier->get());
  ASSERT_TRUE(report);
  EXPECT_TRUE(report->ok()) << Describe(*report->failure);
  EXPECT_EQ(report->checkpoints, 3u);  // after 3, after 6 (+1 checkpoint), and at Close
  EXPECT_EQ(report->signatures_verified, 3u);
  auto unchecked = VerifyTrail(audit, nullptr);
  ASSERT_TRUE(unchecked);
  EXPECT_TRUE(unchecked->ok());
  ASSERT_EQ(unchecked->notes.size(), 1u);
  EXPECT_NE(unchecked->notes[0].find("not checked"), std::string::npos);
}

TEST(SignedTrailTest, AnotherKeysSignatureIsFound) {
  TempDir dir;
  auto kp = MakeKeyPair(dir.path(), "op");
  auto other = MakeKeyPair(dir.path(), "other");
  std::string audit = SignedTrail(dir.path(), kp.private_pem);
  auto verifier = SignatureVerifier::Load(other.public_pem);
  ASSERT_TRUE(verifier);
  auto report = VerifyTrail(audit, verifier->get());
  ASSERT_TRUE(report);
  ASSERT_FALSE(report->ok());
  EXPECT_EQ(report->failure->kind, FindingKind::kBadSignature);
  EXPECT_EQ(report->failure->line, 4u);
}

// A forger who changes a signature and re-hashes the whole chain after it still fails.
TEST(SignedTrailTest, AChangedSignatureIsFoundEvenWhenTheChainIsRehashed) {
  TempDir dir;
  auto kp = MakeKeyPair(dir.path(), "op");
  auto forger = MakeKeyPair(dir.path(), "forger");
  std::string audit = SignedTrail(dir.path(), kp.private_pem);
  auto lines = ReadLines(CurrentPath(audit));
  ASSERT_EQ(lines.size(), 10u);
  json cp = json::parse(lines[9]);  // the last checkpoint: nothing after it vouches for it
  ASSERT_EQ(cp["type"], "checkpoint");
  auto forged = CheckpointSigner::Load(forger.private_pem);
  ASSERT_TRUE(forged);
  cp["signature"] = (*forged)->SignBase64(cp["signed_hash"].get<std::string>()).value();
  lines[9] = CanonicalJson(cp);
  testing::Rehash(&lines, 9);
  testing::WriteLines(CurrentPath(audit), lines);
  auto verifier = SignatureVerifier::Load(kp.public_pem);
  ASSERT_TRUE(verifier);
  auto report = VerifyTrail(audit, verifier->get());
  ASSERT_TRUE(report);
  ASSERT_FALSE(report->ok());
  EXPECT_EQ(report->failure->kind, FindingKind::kBadSignature);
  EXPECT_EQ(report->failure->line, 10u);
  EXPECT_EQ(report->failure->seq, 10u);
  EXPECT_TRUE(VerifyTrail(audit, nullptr)->ok());  // without the key, only the chain counts
}

TEST(SignedTrailTest, AnUnsignedCheckpointFailsWhenAKeyIsGiven) {
  TempDir dir;
  auto kp = MakeKeyPair(dir.path(), "op");
  std::string audit = SignedTrail(dir.path(), "");
  auto verifier = SignatureVerifier::Load(kp.public_pem);
  ASSERT_TRUE(verifier);
  auto report = VerifyTrail(audit, verifier->get());
  ASSERT_TRUE(report);
  ASSERT_FALSE(report->ok());
  EXPECT_EQ(report->failure->kind, FindingKind::kBadSignature);
  EXPECT_NE(report->failure->message.find("not signed"), std::string::npos);
}

}  // namespace
}  // namespace mcpcell::audit
