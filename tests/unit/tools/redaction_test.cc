// Redactor: every form of a value, overlapping values, short values, streams cut anywhere,
// and whole tool results.
#include "tools/redaction.h"

#include <gtest/gtest.h>

#include <thread>

#include "base/base64.h"

namespace mcpcell::tools {
namespace {

const std::string kValue = "ghp_s3cr3t/Value+with spaces&\"quotes\"";
const std::string kLabel = "[secret TOKEN]";

Redactor One(const std::string& value = kValue) { return Redactor(SecretValues{{"TOKEN", value}}); }

std::string UrlSafe(std::string s) {
  for (char& c : s) c = c == '+' ? '-' : c == '/' ? '_' : c;
  return s;
}

TEST(Redactor, ThePlainValueIsReplacedEverywhereItOccurs) {
  EXPECT_EQ(One().Redact("a " + kValue + " b " + kValue), "a " + kLabel + " b " + kLabel);
}

TEST(Redactor, EveryBase64FormIsReplaced) {
  std::string b64 = Base64Encode(kValue);
  ASSERT_NE(b64.find('='), std::string::npos);  // the test value needs padding
  std::string unpadded = b64.substr(0, b64.find('='));
  for (const std::string& form : {b64, unpadded, UrlSafe(b64), UrlSafe(unpadded)}) {
    EXPECT_EQ(One().Redact("x=" + form + ";"), "x=" + kLabel + ";") << form;
  }
}

TEST(Redactor, TheValueInsideALongerBase64TextIsCoveredAtEveryAlignment) {
  for (std::string prefix : {"", "a", "ab", "abc", "abcd"}) {
    std::string b64 = Base64Encode(prefix + kValue + "trailing bytes");
    std::string out = One().Redact(b64);
    EXPECT_NE(out.find(kLabel), std::string::npos) << prefix;
    // At most a few characters at each edge mix the value with its neighbours.
    EXPECT_LT(out.size(), b64.size() - Base64Encode(kValue).size() + kLabel.size() + 12) << prefix;
  }
}

TEST(Redactor, ALongValuesBase64WrappedInLinesIsReplaced) {
  const std::string key(90, 'k');  // base64: 120 characters, two lines
  Redactor r(SecretValues{{"KEY", key}});
  std::string b64 = Base64Encode(key);
  for (size_t width : {76, 64}) {
    std::string wrapped = b64.substr(0, width) + "\n" + b64.substr(width) + "\n";
    EXPECT_EQ(r.Redact(wrapped), "[secret KEY]\n") << width;
  }
}

TEST(Redactor, PercentEncodedFormsAreReplaced) {
  const std::string upper = "ghp_s3cr3t%2FValue%2Bwith%20spaces%26%22quotes%22";
  std::string lower = "ghp_s3cr3t%2fValue%2bwith%20spaces%26%22quotes%22";
  std::string form = "ghp_s3cr3t%2FValue%2Bwith+spaces%26%22quotes%22";
  for (const std::string& f : {upper, lower, form})
    EXPECT_EQ(One().Redact("?q=" + f + "&x=1"), "?q=" + kLabel + "&x=1") << f;
}

TEST(Redactor, JsonEscapedFormsAreReplaced) {
  std::string escaped = R"(ghp_s3cr3t/Value+with spaces&\"quotes\")";
  std::string solidus = R"(ghp_s3cr3t\/Value+with spaces&\"quotes\")";
  for (const std::string& f : {escaped, solidus})
    EXPECT_EQ(One().Redact(R"({"token":")" + f + R"("})"), R"({"token":")" + kLabel + R"("})") << f;
  Redactor unicode(SecretValues{{"PW", "pässwörd"}});
  EXPECT_EQ(unicode.Redact(R"("p\u00e4ssw\u00f6rd")"), "\"[secret PW]\"");
}

TEST(Redactor, OverlappingValuesLeaveNoPartOfEither) {
  Redactor r(SecretValues{{"A", "abcdef12"}, {"B", "ef12ghij"}});
  EXPECT_EQ(r.Redact("<abcdef12ghij>"), "<[secret A][secret B]>");
  // A value inside another: the longer one names the span.
  Redactor nested(SecretValues{{"SHORT", "cdef"}, {"LONG", "abcdefgh"}});
  EXPECT_EQ(nested.Redact("abcdefgh cdef"), "[secret LONG] [secret SHORT]");
}

TEST(Redactor, ValuesShorterThanFourBytesAreNotRedacted) {
  Redactor r(SecretValues{{"PIN", "123"}, {"EMPTY", ""}});
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(r.Redact("pin 123"), "pin 123");
  EXPECT_EQ(MakeRedactor(
                [](const std::string&) {
                  return SecretValues{{"PIN", "123"}};
                },
                "s1"),
            nullptr);
}

TEST(Redactor, NothingChangesWithoutValues) {
  const std::string text("plain output\nwith\0bytes", 23);
  EXPECT_EQ(Redactor(SecretValues{}).Redact(text), text);
  EXPECT_EQ(MakeRedactor(SecretValuesFn{}, "s1"), nullptr);
  StreamRedactor passthrough(nullptr);
  EXPECT_EQ(passthrough.Feed(text), text);
  EXPECT_EQ(passthrough.Finish(), "");
}

TEST(Redactor, MakeRedactorAsksForTheSessionsValues) {
  std::string asked;
  auto r = MakeRedactor(
      [&asked](const std::string& key) {
        asked = key;
        return SecretValues{{"TOKEN", kValue}};
      },
      "s-42");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(asked, "s-42");
  EXPECT_EQ(r->Redact(kValue), kLabel);
}

// Feeds `text` in pieces of `size` bytes and returns all the stream emitted.
std::string Streamed(const std::shared_ptr<const Redactor>& r, const std::string& text,
                     size_t size) {
  StreamRedactor stream(r);
  std::string out;
  for (size_t at = 0; at < text.size(); at += size) out += stream.Feed(text.substr(at, size));
  return out + stream.Finish();
}

TEST(StreamRedactor, AValueSplitAtAnyChunkBoundaryIsFound) {
  auto r = std::make_shared<const Redactor>(SecretValues{{"TOKEN", kValue}});
  std::string text = "start " + kValue + " middle " + Base64Encode(kValue) + " end " + kValue;
  std::string expected = r->Redact(text);
  ASSERT_EQ(expected, "start " + kLabel + " middle " + kLabel + " end " + kLabel);
  for (size_t size = 1; size <= text.size(); ++size)
    EXPECT_EQ(Streamed(r, text, size), expected) << "chunks of " << size;
}

TEST(StreamRedactor, OverlappingValuesAcrossChunksAreOneSpan) {
  auto r = std::make_shared<const Redactor>(SecretValues{{"A", "abcdef12"}, {"B", "ef12ghij"}});
  std::string text = "x abcdef12ghij y";
  for (size_t size = 1; size <= text.size(); ++size)
    EXPECT_EQ(Streamed(r, text, size), "x [secret A][secret B] y") << "chunks of " << size;
}

TEST(StreamRedactor, HoldsBackOnlyWhatMayStartAValue) {
  auto r = std::make_shared<const Redactor>(SecretValues{{"TOKEN", "abcdefgh"}});
  StreamRedactor stream(r);
  const std::string text = "0123456789012345678901234567890123456789";
  std::string out = stream.Feed(text);
  // The last longest()-1 bytes wait for the next chunk; the rest is out already.
  ASSERT_LT(r->longest(), text.size());
  EXPECT_EQ(out, text.substr(0, text.size() - (r->longest() - 1)));
  EXPECT_EQ(out + stream.Finish(), text);
}

TEST(RedactResult, TextContentAndStructuredStringsAreRedactedProtocolFieldsAreNot) {
  Redactor r(SecretValues{{"TEXT", "text"}, {"TOKEN", kValue}});
  mcp::ToolResult result = mcp::ToolResult::Text("out: " + kValue);
  result.AddText("and text");
  result.structured_content = {{"stdout", kValue}, {"nested", {{"list", {kValue, 3}}}}};
  mcp::ToolResult red = RedactResult(result, &r);
  EXPECT_EQ(red.content[0]["type"], "text");
  EXPECT_EQ(red.content[0]["text"], "out: " + kLabel);
  EXPECT_EQ(red.content[1]["text"], "and [secret TEXT]");
  EXPECT_EQ(red.structured_content["stdout"], kLabel);
  EXPECT_EQ(red.structured_content["nested"]["list"][0], kLabel);
  EXPECT_EQ(red.structured_content["nested"]["list"][1], 3);
  EXPECT_EQ(RedactResult(result, nullptr).content, result.content);
}

}  // namespace
// A call's redactor is made once, on first use, from the values at that moment; scopes
// nest, end, and belong to their thread.
TEST(CallRedactorScope, MakesTheCallsRedactorOnceOnFirstUse) {
  EXPECT_EQ(CallRedactorScope::Current(), nullptr);
  int reads = 0;
  SecretValues values;  // empty until the call grants one, as env-mode secrets are
  SecretValuesFn fn = [&](const std::string& key) {
    ++reads;
    EXPECT_EQ(key, "s1");
    return values;
  };
  {
    CallRedactorScope scope(fn, "s1");
    EXPECT_EQ(reads, 0);
    values = {{"A", "alpha-value"}};
    ASSERT_EQ(CallRedactorScope::Current(), &scope);
    auto first = CallRedactorScope::Current()->Get();
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(scope.Get(), first);
    EXPECT_EQ(reads, 1);
    {
      SecretValuesFn none = [](const std::string&) { return SecretValues{}; };
      CallRedactorScope inner(none, "s1");
      EXPECT_EQ(CallRedactorScope::Current(), &inner);
      EXPECT_EQ(inner.Get(), nullptr);
    }
    EXPECT_EQ(CallRedactorScope::Current(), &scope);
    bool other_thread_sees_none = false;
    std::thread([&] { other_thread_sees_none = CallRedactorScope::Current() == nullptr; }).join();
    EXPECT_TRUE(other_thread_sees_none);
  }
  EXPECT_EQ(CallRedactorScope::Current(), nullptr);
}

}  // namespace mcpcell::tools
