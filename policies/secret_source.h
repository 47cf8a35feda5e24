// Where a secret's value comes from (policy `[[secrets]] source`, docs/secrets.md), and
// reading it. The loader checks a source with ParseSecretSource (and that a file is
// readable); the server reads it with ReadSecretSource each time a session needs the value
// (a grant's value function, an exec's environment, a /run/secrets file), so a rotated
// file, environment variable or vault answer is used from the next request on.
//
//   file:PATH         the file's content (absolute path; at most 64 KiB)
//   env:VAR           the server's environment variable VAR
//   command:CMDLINE   the standard output of CMDLINE, split on spaces (no shell), run with
//                     posix_spawn; a non-zero exit or no answer within the timeout is an error
// One trailing newline ("\n" or "\r\n") is trimmed from every value. Errors name the secret
// and the source, never the value.
// Threading: stateless functions, safe from any thread.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/status.h"

namespace mcpcell::policies {

struct SecretSource {
  enum class Kind { kFile, kEnv, kCommand };
  Kind kind = Kind::kFile;
  std::string path;               // kFile
  std::string variable;           // kEnv
  std::vector<std::string> argv;  // kCommand
};

// Parses "file:/abs/path", "env:NAME" or "command:/abs/program arg ...".
Result<SecretSource> ParseSecretSource(const std::string& text);

struct SecretReadOptions {
  std::chrono::milliseconds command_timeout{5000};
  size_t max_bytes = 64 * 1024;
};

// The current value of secret `name` from `source`. Errors: "secret NAME: ...".
Result<std::string> ReadSecretSource(const std::string& name, const SecretSource& source,
                                     const SecretReadOptions& options = {});

// Overwrites `value`'s bytes before it is dropped (explicit_bzero), then clears it.
void WipeSecret(std::string& value);

}  // namespace mcpcell::policies
