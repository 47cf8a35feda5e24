// The JSON Schema subset: messages that name the field, and the flat-schema check at
// registration.
#include "mcp/schema.h"

#include <gtest/gtest.h>

namespace mcp {
namespace {

const Json kSchema = Json::parse(R"({
  "type": "object",
  "properties": {
    "code": {"type": "string", "minLength": 1, "maxLength": 10},
    "timeout_s": {"type": "integer", "minimum": 1, "maximum": 600},
    "ratio": {"type": "number", "exclusiveMinimum": 0},
    "verbose": {"type": "boolean"},
    "language": {"type": "string", "enum": ["python", "bash"]},
    "name": {"type": "string", "pattern": "^[a-z]+$"},
    "files": {"type": "array", "minItems": 1, "maxItems": 2,
              "items": {"type": "object", "properties": {"path": {"type": "string"}},
                        "required": ["path"], "additionalProperties": false}},
    "nothing": {"type": "null"}
  },
  "required": ["code"],
  "additionalProperties": false
})");

std::string Errors(const Json& value) { return JoinErrors(ValidateJson(kSchema, value)); }

TEST(Schema, AcceptsValidInput) {
  EXPECT_EQ(Errors({{"code", "print(1)"},
                    {"timeout_s", 30},
                    {"ratio", 0.5},
                    {"verbose", true},
                    {"language", "python"},
                    {"name", "abc"},
                    {"files", {{{"path", "/a"}}}},
                    {"nothing", nullptr}}),
            "");
  EXPECT_EQ(Errors({{"code", "x"}, {"timeout_s", 5.0}}), "");  // integral float is an integer
}

TEST(Schema, NamesTheFieldAndWhatWasWrong) {
  EXPECT_EQ(Errors({{"code", "x"}, {"timeout_s", "x"}}),
            "arguments.timeout_s: expected integer, got string \"x\"");
  EXPECT_EQ(Errors({{"code", "x"}, {"timeout_s", 1.5}}),
            "arguments.timeout_s: expected integer, got number 1.5");
  EXPECT_EQ(Errors(Json::object()), "arguments.code: is required but missing");
  EXPECT_EQ(Errors(Json::array()), "arguments: expected object, got array");
  EXPECT_EQ(Errors({{"code", "x"}, {"extra", 1}}),
            "arguments.extra: unknown field (allowed: code, files, language, name, nothing, "
            "ratio, timeout_s, verbose)");
  EXPECT_EQ(Errors({{"code", "x"}, {"language", "ruby"}}),
            "arguments.language: must be one of [\"python\",\"bash\"], got string \"ruby\"");
  EXPECT_EQ(Errors({{"code", "x"}, {"timeout_s", 0}}), "arguments.timeout_s: must be >= 1, got 0");
  EXPECT_EQ(Errors({{"code", "x"}, {"timeout_s", 601}}),
            "arguments.timeout_s: must be <= 600, got 601");
  EXPECT_EQ(Errors({{"code", "x"}, {"ratio", 0}}), "arguments.ratio: must be > 0, got 0");
  EXPECT_EQ(Errors({{"code", ""}}), "arguments.code: must be at least 1 characters long, got 0");
  EXPECT_EQ(Errors({{"code", "abcdefghijk"}}),
            "arguments.code: must be at most 10 characters long, got 11");
  EXPECT_EQ(Errors({{"code", "x"}, {"name", "A1"}}),
            "arguments.name: must match the pattern \"^[a-z]+$\", got string \"A1\"");
  EXPECT_EQ(Errors({{"code", "x"}, {"files", Json::array()}}),
            "arguments.files: must have at least 1 items, got 0");
  EXPECT_EQ(Errors({{"code", "x"}, {"files", {{{"path", "a"}}, {{"path", "b"}}, {{"path", "c"}}}}}),
            "arguments.files: must have at most 2 items, got 3");
  EXPECT_EQ(Errors({{"code", "x"}, {"files", {{{"path", 3}}, {{"mode", "r"}}}}}),
            "arguments.files[0].path: expected string, got integer 3; "
            "arguments.files[1].path: is required but missing; "
            "arguments.files[1].mode: unknown field (allowed: path)");
  EXPECT_EQ(Errors({{"code", "x"}, {"verbose", "yes"}}),
            "arguments.verbose: expected boolean, got string \"yes\"");
}

TEST(Schema, CountsCodePointsNotBytes) {
  EXPECT_EQ(Errors({{"code", "éééééééééé"}}), "");  // 10 characters, 20 bytes
}

TEST(Schema, FlatSchemasPass) {
  EXPECT_TRUE(CheckFlatSchema(kSchema).ok()) << CheckFlatSchema(kSchema).message();
  EXPECT_TRUE(CheckFlatSchema({{"type", "object"}}).ok());
}

TEST(Schema, NonFlatSchemasAreRefusedWithTheReason) {
  auto reason = [](const char* text) { return CheckFlatSchema(Json::parse(text)).message(); };
  EXPECT_EQ(reason(R"({"type":"object","properties":{"a":{"type":"array"}}})"),
            "inputSchema.properties.a: an array schema needs \"items\"");
  EXPECT_NE(reason(R"({"type":"object","properties":{"a":{"$ref":"#/x"}}})").find("$ref"),
            std::string::npos);
  EXPECT_NE(reason(R"({"type":"object","properties":{"a":{"anyOf":[]}}})").find("anyOf"),
            std::string::npos);
  EXPECT_NE(reason(R"({"type":"object","oneOf":[]})").find("oneOf"), std::string::npos);
  EXPECT_NE(reason(R"({"type":"object","allOf":[]})").find("allOf"), std::string::npos);
  EXPECT_NE(reason(R"({"type":"object","properties":{"a":{"type":["string","null"]}}})")
                .find("type arrays"),
            std::string::npos);
  EXPECT_NE(reason(R"({"type":"object","properties":{"a":{"type":"string","nullable":true}}})")
                .find("nullable"),
            std::string::npos);
  EXPECT_NE(reason(R"({"type":"object","required":["x"]})").find("\"x\""), std::string::npos);
  EXPECT_NE(reason(R"({"type":"object","properties":{"a":{"type":"strin"}}})").find("strin"),
            std::string::npos);
  EXPECT_NE(reason(R"({"type":"object","propertys":{}})").find("unknown keyword"),
            std::string::npos);
  EXPECT_NE(reason(R"({"type":"string"})").find("\"type\": \"object\""), std::string::npos);
  EXPECT_NE(reason(R"({"type":"object","properties":{"a":{"type":"string","pattern":"("}}})")
                .find("regular expression"),
            std::string::npos);
}

}  // namespace
}  // namespace mcp
