// A JSON Schema 2020-12 subset: enough to check tool arguments and structured output
// strictly and to tell the model which field is wrong, in words it can act on, e.g.
//   arguments.timeout_s: expected integer, got string "x"
// Supported keywords: type (object, string, integer, number, boolean, array, null; or an
// array of them), $ref within the schema ("#", "#/$defs/name", "#anchor"), $defs,
// definitions, $anchor, allOf, anyOf, oneOf, not, if/then/else,
// properties, required, additionalProperties (false or a schema), enum, const, minimum,
// maximum, exclusiveMinimum, exclusiveMaximum, minLength, maxLength (in code points),
// pattern (ECMAScript), minItems, maxItems, items. Annotations (description, title,
// default, examples, format) are accepted and ignored.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "mcp/types.h"

namespace mcp {

// Checks `value` against `schema`. Returns every violation found, each prefixed by the
// path from `root` (e.g. "arguments.files[2].path: ..."); empty = valid.
std::vector<std::string> ValidateJson(const Json& schema, const Json& value,
                                      std::string_view root = "arguments");

// Joins violations with "; " for a one-line message.
std::string JoinErrors(const std::vector<std::string>& errors);

// Registration check: `schema` is a flat schema this validator fully understands and that
// every client can read: an object, with known keywords only, every array schema has
// `items`, no $ref/anyOf/oneOf/allOf/not, no type arrays (nullable unions), `required`
// names declared properties. `where` prefixes the message ("inputSchema").
Status CheckFlatSchema(const Json& schema, std::string_view where = "inputSchema");

// Registration check of tool schemas: an object schema whose keywords are all supported
// (above), each used with the right shape (composition keywords hold schemas, a $ref names
// a schema within this one). Keywords outside the subset (patternProperties, prefixItems,
// dependentSchemas, nullable, ...) are refused, so every accepted schema is fully checked.
Status CheckSchema(const Json& schema, std::string_view where = "inputSchema");

}  // namespace mcp
