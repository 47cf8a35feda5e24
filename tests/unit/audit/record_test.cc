#include "audit/record.h"

#include <gtest/gtest.h>

namespace mcpcell::audit {
namespace {

using nlohmann::json;

TEST(CanonicalJsonTest, SortsKeysAtEveryLevelAndHasNoWhitespace) {
  json j = json::parse(R"({ "b": 1, "a": { "z": [1, 2], "y": null }, "A": true })");
  EXPECT_EQ(CanonicalJson(j), R"({"A":true,"a":{"y":null,"z":[1,2]},"b":1})");
}

TEST(CanonicalJsonTest, EscapesOnlyQuotesBackslashesAndControlCharacters) {
  json j = {{"s", "quote\" back\\ nl\n tab\t bell\x07 é 漢"}};
  EXPECT_EQ(CanonicalJson(j), "{\"s\":\"quote\\\" back\\\\ nl\\n tab\\t bell\\u0007 é 漢\"}");
}

TEST(CanonicalJsonTest, ReplacesInvalidUtf8InsteadOfThrowing) {
  json j = {{"s", std::string("a\xff"
                              "b")}};
  EXPECT_EQ(CanonicalJson(j),
            "{\"s\":\"a\xEF\xBF\xBD"
            "b\"}");
}

TEST(CanonicalJsonTest, IsStableThroughParseAndDump) {
  json j = {{"n", 1.5}, {"big", 18446744073709551615ull}, {"neg", -3}, {"s", "é"}};
  std::string once = CanonicalJson(j);
  EXPECT_EQ(CanonicalJson(json::parse(once)), once);
}

TEST(Sha256HexTest, MatchesTheStandardTestVector) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(RecordHashTest, CoversEverythingButTheHashItself) {
  json r = {{"seq", 1}, {"prev", std::string(kZeroHash)}, {"type", "x"}};
  std::string h = RecordHash(r);
  EXPECT_EQ(h, Sha256Hex(CanonicalJson(r)));
  r["hash"] = h;
  EXPECT_EQ(RecordHash(r), h);
  r["type"] = "y";
  EXPECT_NE(RecordHash(r), h);
}

TEST(SealRecordTest, EqualsTheCanonicalRecordWithItsHash) {
  json record = {{"a_field", "x\u00e9\"y"},
                 {"cell", "c"},
                 {"hash_like", 1},
                 {"h", {3, 2}},
                 {"prev", std::string(kZeroHash)},
                 {"seq", 7},
                 {"zz", {{"b", 1}, {"a", 2}}}};
  json lower = json::object(), upper = json::object();
  for (const auto& [key, value] : record.items())
    (SortsBeforeHash(key) ? lower : upper)[key] = value;
  SealedRecord sealed = SealRecord(lower, upper);
  EXPECT_EQ(sealed.hash, RecordHash(record));
  record["hash"] = sealed.hash;
  EXPECT_EQ(sealed.line, CanonicalJson(record));
  // A half may be empty.
  SealedRecord only_upper = SealRecord(json::object(), {{"seq", 1}});
  EXPECT_EQ(only_upper.line, "{\"hash\":\"" + only_upper.hash + "\",\"seq\":1}");
  SealedRecord only_lower = SealRecord({{"cell", ""}}, json::object());
  EXPECT_EQ(only_lower.line, "{\"cell\":\"\",\"hash\":\"" + only_lower.hash + "\"}");
  EXPECT_EQ(only_lower.hash, Sha256Hex("{\"cell\":\"\"}"));
}

TEST(TimeTest, FormatsRfc3339UtcWithMilliseconds) {
  auto t = std::chrono::system_clock::time_point(std::chrono::milliseconds(1764637323456));
  EXPECT_EQ(FormatTime(t), "2025-12-02T01:02:03.456Z");
  EXPECT_EQ(FormatCompactTime(t), "20251202T010203Z");
}

TEST(TimeTest, ParsesDatesTimesFractionsAndOffsets) {
  EXPECT_EQ(ParseTimeMs("2025-12-02T01:02:03.456Z").value(), 1764637323456);
  EXPECT_EQ(ParseTimeMs("2025-12-02T03:02:03.456+02:00").value(), 1764637323456);
  EXPECT_EQ(ParseTimeMs("2025-12-02").value(), 1764633600000);
  auto bad = ParseTimeMs("yesterday");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("\"yesterday\""), std::string::npos);
  EXPECT_FALSE(ParseTimeMs("2025-13-02"));
  EXPECT_FALSE(ParseTimeMs("2025-12-02T01:02"));
}

TEST(ParseRecordLineTest, NamesWhatIsMissing) {
  EXPECT_EQ(ParseRecordLine("{").error().message, "not JSON");
  EXPECT_EQ(ParseRecordLine("[1]").error().message, "not a JSON object");
  EXPECT_EQ(ParseRecordLine(R"({"seq":-1})").error().message, "no unsigned \"seq\"");
  EXPECT_EQ(ParseRecordLine(R"({"seq":1,"time":"t"})").error().message, "no string \"type\"");
  json r = {{"seq", 1},      {"time", "t"}, {"type", "x"},   {"tenant", ""},
            {"session", ""}, {"cell", ""},  {"prev", "abc"}, {"hash", std::string(kZeroHash)}};
  EXPECT_EQ(ParseRecordLine(r.dump()).error().message, "no 64-hex-digit \"prev\"");
  r["prev"] = std::string(kZeroHash);
  EXPECT_TRUE(ParseRecordLine(r.dump()));
}

TEST(IsReservedFieldTest, ReservesTheRecordsOwnNames) {
  EXPECT_TRUE(IsReservedField("hash"));
  EXPECT_TRUE(IsReservedField("tenant"));
  EXPECT_FALSE(IsReservedField("tool"));
}

}  // namespace
}  // namespace mcpcell::audit
