// The response masker: values and their base64 forms become placeholders, also when a value
// is split across the pieces the stream arrives in.
#include "egress/secret_masker.h"

#include <gtest/gtest.h>

#include "base/base64.h"

namespace mcpcell::egress {
namespace {

std::string FeedInPieces(SecretMasker& m, const std::string& data, size_t piece) {
  std::string out;
  for (size_t i = 0; i < data.size(); i += piece) out += m.Feed(data.substr(i, piece));
  return out + m.Finish();
}

TEST(SecretMasker, MasksAValueSplitAcrossEveryPossibleBoundary) {
  std::string body = "{\"echo\":\"ghp_realtoken\",\"again\":\"ghp_realtoken\"}";
  std::string want = "{\"echo\":\"PH\",\"again\":\"PH\"}";
  for (size_t piece = 1; piece <= body.size(); ++piece) {
    SecretMasker m(std::vector<SecretMask>{{"ghp_realtoken", "PH"}});
    EXPECT_EQ(FeedInPieces(m, body, piece), want) << "piece size " << piece;
  }
}

TEST(SecretMasker, MasksTheBase64FormToo) {
  SecretMasker m(std::vector<SecretMask>{{"ghp_realtoken", "mcpcell-secret-1"}});
  std::string out = FeedInPieces(m, "x " + Base64Encode("ghp_realtoken") + " y", 3);
  EXPECT_EQ(out, "x " + Base64Encode("mcpcell-secret-1") + " y");
}

TEST(SecretMasker, PassesOtherBytesThroughUnchangedAndComplete) {
  SecretMasker m(std::vector<SecretMask>{{"secretvalue", "PH"}});
  std::string body = "secretvalu and ecretvalue and secretvalu";  // near misses
  EXPECT_EQ(FeedInPieces(m, body, 4), body);
}

TEST(SecretMasker, HoldsBackOnlyWhatCouldStartAValue) {
  // The longest needle is the base64 form "YWJjZGVm": the last 7 bytes may begin one.
  SecretMasker m(std::vector<SecretMask>{{"abcdef", "X"}});
  EXPECT_EQ(m.Feed("0123456789"), "012");
  EXPECT_EQ(m.Feed("abc"), "345");
  EXPECT_EQ(m.Feed("def!"), "6789X");
  EXPECT_EQ(m.Finish(), "!");
}

TEST(SecretMasker, SeveralSecretsAndMaskAll) {
  SecretMasker m(std::vector<SecretMask>{{"alpha-value", "A"}, {"beta-value", "B"}});
  EXPECT_EQ(m.MaskAll("alpha-value/beta-value"), "A/B");
  EXPECT_EQ(FeedInPieces(m, "[beta-value][alpha-value]", 2), "[B][A]");
}

TEST(SecretMasker, PiecesOfEverySizeGiveWhatMaskAllGives) {
  // Values (and base64 forms) packed close together and overlapping near misses, fed in
  // pieces shorter and longer than the longest needle, so both ways of joining the held
  // bytes to the next piece meet values that straddle the boundary.
  std::vector<SecretMask> masks{{"ghp_realtoken", "PH"}, {"ghp_real", "SHORT"}};
  std::string body;
  for (int i = 0; i < 40; ++i)
    body += std::string(static_cast<size_t>(i % 7), 'g') + "ghp_realtoken" + "ghp_rea" +
            Base64Encode("ghp_realtoken") + "ghp_real" + std::to_string(i);
  std::string want = SecretMasker(masks).MaskAll(body);
  EXPECT_EQ(want.find("ghp_real"), std::string::npos);
  for (size_t piece : {1u, 5u, 19u, 20u, 21u, 33u, 64u, 257u}) {
    SecretMasker m(masks);
    EXPECT_EQ(FeedInPieces(m, body, piece), want) << "piece size " << piece;
  }
  SecretMasker mixed(masks);  // alternating short and long pieces
  std::string out;
  for (size_t at = 0, i = 0; at < body.size(); ++i) {
    size_t n = i % 2 ? 3 : 45;
    out += mixed.Feed(std::string_view(body).substr(at, n));
    at += n;
  }
  EXPECT_EQ(out + mixed.Finish(), want);
}

TEST(SecretMasker, WithoutMasksIsTheIdentity) {
  SecretMasker m(std::vector<SecretMask>{});
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.Feed("abc"), "abc");
  EXPECT_EQ(m.Finish(), "");
}

}  // namespace
}  // namespace mcpcell::egress
