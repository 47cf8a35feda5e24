// Standard base64 (RFC 4648 §4, with padding) for HTTP Basic credentials and for masking
// the base64 form of a secret in responses. Backed by OpenSSL's EVP codec.
// Threading: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mcpcell::egress {

std::string Base64Encode(std::string_view bytes);
// nullopt when text is not canonical padded base64 (whitespace is not accepted).
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace mcpcell::egress
