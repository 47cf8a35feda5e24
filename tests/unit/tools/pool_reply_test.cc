// The launcher's reader of a pool's events (tools/launcher/pool_reply.h): every event the
// pool writes (nlohmann's dump, as tools/cell_pool.cc sends them) reads back field for
// field; fields of later versions are skipped; anything that is not one flat object with a
// string "event", or a known field of the wrong type or range, is refused with a reason.
#include "tools/launcher/pool_reply.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

struct Parsed {
  int status = -1;
  pool_reply reply{};
  std::string why;
};

Parsed Parse(const std::string& text) {
  Parsed p;
  char why[256] = "";
  p.status = ParsePoolReply(text.data(), text.size(), &p.reply, why, sizeof why);
  p.why = why;
  return p;
}

TEST(PoolReply, ReadsEveryEventThePoolWrites) {
  Parsed exited = Parse(json{
      {"event", "exited"},
      {"exit_code", 7},
      {"signaled", true},
      {"signo", 15},
      {"timed_out", true},
      {"oom_killed", true}}.dump());
  ASSERT_EQ(exited.status, 0) << exited.why;
  EXPECT_EQ(exited.reply.event, POOL_EVENT_EXITED);
  EXPECT_EQ(exited.reply.exit_code, 7);
  EXPECT_EQ(exited.reply.signo, 15);
  EXPECT_TRUE(exited.reply.signaled && exited.reply.timed_out && exited.reply.oom_killed);

  Parsed started = Parse(json{{"event", "started"}, {"cell", "w0123"}}.dump());
  ASSERT_EQ(started.status, 0) << started.why;
  EXPECT_EQ(started.reply.event, POOL_EVENT_STARTED);

  const std::string message = "bad request: argv[0] \"x\\y\"\n\ttab \x01 caf\xc3\xa9 \xe2\x82\xac";
  Parsed error = Parse(
      json{{"event", "error"}, {"message", message}, {"errno", 22}, {"fallback", true}}.dump());
  ASSERT_EQ(error.status, 0) << error.why;
  EXPECT_EQ(error.reply.event, POOL_EVENT_ERROR);
  EXPECT_EQ(std::string(error.reply.message), message);
  EXPECT_EQ(error.reply.err, 22);
  EXPECT_TRUE(error.reply.fallback);
}

TEST(PoolReply, SkipsWhatALaterVersionAddsAndCutsLongMessages) {
  Parsed p = Parse(R"( { "later": {"a": [1, 2.5e3, null, {"b": "c"}], "d": []},
      "event" : "error", "x": -3, "y": false, "message": "\u00e9\ud83d\u0041",
      "errno": 0 } )");
  ASSERT_EQ(p.status, 0) << p.why;
  EXPECT_EQ(std::string(p.reply.message), "\xc3\xa9?A");  // a lone surrogate half: '?'
  Parsed other = Parse(R"({"event":"progress","bytes":12})");
  ASSERT_EQ(other.status, 0) << other.why;
  EXPECT_EQ(other.reply.event, POOL_EVENT_OTHER);
  Parsed big = Parse(json{{"event", "error"}, {"message", std::string(5000, 'm')}}.dump());
  ASSERT_EQ(big.status, 0) << big.why;
  EXPECT_EQ(std::string(big.reply.message), std::string(sizeof big.reply.message - 1, 'm'));
}

TEST(PoolReply, DecodesEveryEscapeJsonHas) {
  Parsed p = Parse(R"({"event":"error","message":"<\"\\\/\b\f\n\r\t\u0041\u00e9\u20ac>"})");
  ASSERT_EQ(p.status, 0) << p.why;
  EXPECT_EQ(std::string(p.reply.message), "<\"\\/\b\f\n\r\tA\xc3\xa9\xe2\x82\xac>");
  // A character that is not one of them after a backslash, a NUL among them included.
  for (std::string bad : {std::string("\\a"), std::string("\\U0041"), std::string("\\\0", 2)}) {
    Parsed q = Parse(R"({"event":"error","message":")" + bad + R"("})");
    EXPECT_NE(q.status, 0) << bad;
    EXPECT_THAT(q.why, HasSubstr("a bad value for message")) << bad;
  }
}

TEST(PoolReply, RefusesAnythingElseAndSaysWhy) {
  struct Case {
    std::string text, why;
  } cases[] = {
      {"", "not a JSON object"},
      {"[]", "not a JSON object"},
      {R"({"event":"started"} x)", "bytes after the object"},
      {R"({"cell":"c"})", "no \"event\""},
      {R"({"event":1})", "a bad value for event"},
      {R"({"event":"exited","exit_code":256,"signo":0})", "a bad value for exit_code"},
      {R"({"event":"exited","exit_code":-1,"signo":0})", "a bad value for exit_code"},
      {R"({"event":"exited","exit_code":1.5,"signo":0})", "a bad value for exit_code"},
      {R"({"event":"exited","exit_code":0,"signo":65})", "a bad value for signo"},
      {R"({"event":"exited","exit_code":0})", "an exit without signo"},
      {R"({"event":"exited","signo":0})", "an exit without exit_code"},
      {R"({"event":"exited","exit_code":0,"signo":0,"signaled":1})", "a bad value for signaled"},
      {R"({"event":"error","errno":4096})", "a bad value for errno"},
      {R"({"event":"error","message":"\q"})", "a bad value for message"},
      {"{\"event\":\"error\",\"message\":\"a\nb\"}", "a bad value for message"},
      {R"({"event":"error","message":"\u12"})", "a bad value for message"},
      {R"({"event":"started")", "the object does not end"},
      {R"({"event":"started",})", "a bad key"},
      {R"({"event":"started","x":[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]})", "a bad value for x"},
      {R"({"event":"started","x":nul})", "a bad value for x"},
      {R"({"event":"started","x":"unterminated)", "a bad value for x"},
      {R"({"event":"exited","exit_code":99999999999999999999,"signo":0})",
       "a bad value for exit_code"},
  };
  for (const Case& c : cases) {
    Parsed p = Parse(c.text);
    EXPECT_EQ(p.status, -1) << c.text;
    EXPECT_THAT(p.why, HasSubstr(c.why)) << c.text;
  }
}

TEST(PoolReply, JsonSafeUtf8) {
  auto safe = [](const std::string& s) { return IsJsonSafeUtf8(s.data(), s.size()) == 1; };
  EXPECT_TRUE(safe(""));
  EXPECT_TRUE(safe("plain ascii \x7f"));
  EXPECT_TRUE(safe("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf"));
  EXPECT_FALSE(safe(std::string("nul\0inside", 10)));
  EXPECT_FALSE(safe("\xc0\x80"));          // overlong
  EXPECT_FALSE(safe("\xe0\x80\xaf"));      // overlong
  EXPECT_FALSE(safe("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(safe("\xf4\x90\x80\x80"));  // beyond U+10FFFF
  EXPECT_FALSE(safe("\xe2\x82"));          // cut short
  EXPECT_FALSE(safe("\x80"));              // a lone continuation byte
  EXPECT_FALSE(safe("\xff"));
}

}  // namespace
