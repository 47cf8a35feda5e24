// JSON Schema 2020-12 in tool schemas (mcp/schema.h): CheckSchema accepts the composition
// keywords, $defs/$ref and $anchor and refuses malformed ones; ValidateJson applies them,
// and every violation names the path that failed.
#include <gtest/gtest.h>

#include "mcp/schema.h"

namespace mcp {
namespace {

// The conformance suite's json-schema-2020-12 schema.
const Json kContact = Json::parse(R"({
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "$defs": {"address": {"$anchor": "addressDef", "type": "object",
                        "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                        "additionalProperties": false}},
  "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"},
                 "home": {"$ref": "#addressDef"},
                 "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                 "phone": {"type": "string"}, "email": {"type": "string"}},
  "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
  "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
  "then": {"required": ["phone"]},
  "else": {"required": ["email"]},
  "additionalProperties": false
})");

std::string Errors(const Json& schema, const Json& value) {
  return JoinErrors(ValidateJson(schema, value, "arguments"));
}

TEST(Schema2020, TheSuitesSchemaIsAcceptedAndAValidValuePasses) {
  EXPECT_TRUE(CheckSchema(kContact).ok()) << CheckSchema(kContact).message();
  EXPECT_EQ(Errors(kContact, {{"email", "a@b"}, {"address", {{"city", "Oslo"}}}}), "");
}

TEST(Schema2020, RefsAreFollowedAndTheirViolationsNameThePath) {
  EXPECT_EQ(Errors(kContact, {{"email", "a@b"}, {"address", {{"city", 7}}}}),
            "arguments.address.city: expected string, got integer 7");
  EXPECT_EQ(Errors(kContact, {{"email", "a@b"}, {"home", {{"zip", "1"}}}}),
            "arguments.home.zip: unknown field (allowed: city, street)");
}

TEST(Schema2020, AnyOfInAllOfSaysWhichAlternativesFailed) {
  std::string e = Errors(kContact, {{"name", "x"}});
  EXPECT_NE(e.find("arguments: must match at least one schema of anyOf"), std::string::npos) << e;
  EXPECT_NE(e.find("arguments.phone: is required but missing"), std::string::npos) << e;
}

TEST(Schema2020, IfThenElseAppliesTheBranchTheConditionPicks) {
  EXPECT_EQ(Errors(kContact, {{"contactMethod", "phone"}, {"email", "a@b"}}),
            "arguments.phone: is required but missing");
  EXPECT_EQ(Errors(kContact, {{"contactMethod", "phone"}, {"phone", "1"}}), "");
}

TEST(Schema2020, OneOfNotConstAndTypeArrays) {
  Json s = Json::parse(R"({"type":"object","properties":{
      "n": {"oneOf": [{"type":"integer"}, {"type":"number","minimum":10}]},
      "m": {"not": {"const": "forbidden"}},
      "t": {"type": ["string", "null"]}}})");
  ASSERT_TRUE(CheckSchema(s).ok()) << CheckSchema(s).message();
  EXPECT_EQ(Errors(s, {{"n", 3}, {"m", "ok"}, {"t", nullptr}}), "");
  EXPECT_EQ(Errors(s, {{"n", 12}}),
            "arguments.n: must match exactly one schema of oneOf, matched 2");
  EXPECT_NE(Errors(s, {{"n", 2.5}})
                .find("arguments.n: must match exactly one schema of oneOf, "
                      "matched none"),
            std::string::npos);
  EXPECT_EQ(Errors(s, {{"m", "forbidden"}}),
            "arguments.m: must not match the schema {\"const\":\"forbidden\"} (\"not\")");
  EXPECT_EQ(Errors(s, {{"t", 1}}),
            "arguments.t: expected one of [\"string\",\"null\"], got integer 1");
}

TEST(Schema2020, ARefCycleEndsInAnErrorNotAStackOverflow) {
  Json s =
      Json::parse(R"({"type":"object","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},
                          "properties":{"x":{"$ref":"#/$defs/a"}}})");
  ASSERT_TRUE(CheckSchema(s).ok());
  EXPECT_NE(Errors(s, {{"x", 1}}).find("nests deeper than 64"), std::string::npos);
}

TEST(Schema2020, MalformedKeywordsAreRefusedNamingWhere) {
  auto reason = [](const char* text) { return CheckSchema(Json::parse(text)).message(); };
  EXPECT_EQ(reason(R"({"type":"object","properties":{"a":{"$ref":"#/$defs/none"}}})"),
            "inputSchema.properties.a: \"$ref\" \"#/$defs/none\" must name a schema within this "
            "one (\"#/$defs/name\" or \"#anchor\")");
  EXPECT_EQ(reason(R"({"type":"object","$ref":"https://example.com/s.json"})").substr(0, 19),
            "inputSchema: \"$ref\"");
  EXPECT_EQ(reason(R"({"type":"object","anyOf":[]})"),
            "inputSchema: \"anyOf\" must be a non-empty array of schemas");
  EXPECT_EQ(reason(R"({"type":"object","allOf":[{"type":"strin"}]})").substr(0, 27),
            "inputSchema.allOf[0]: \"type");
  EXPECT_EQ(reason(R"({"type":"object","$defs":{"d":{"propertys":{}}}})"),
            "inputSchema.$defs.d: unknown keyword \"propertys\"");
  EXPECT_NE(reason(R"({"type":"object","patternProperties":{}})").find("not supported"),
            std::string::npos);
  EXPECT_EQ(reason(R"({"type":"object","properties":{"a":{"type":[]}}})"),
            "inputSchema.properties.a: \"type\" must not be an empty array");
}

}  // namespace
}  // namespace mcp
