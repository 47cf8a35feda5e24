// TomlReader: the strict reading of a policy's TOML tree that every section of the loader
// shares (policies/loader_sections.h). Every read checks the node's type and range, every
// table refuses keys it does not know, and the first problem becomes the one error,
// "<file>:<line>:<column>: <key path>: <what>"; later reads do nothing once one failed.
// Internal to policies/; one per ParsePolicy call, on its thread.
#pragma once

#include <toml++/toml.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "policies/loader.h"

namespace mcpcell::policies {

class TomlReader {
 public:
  TomlReader(std::string source, const LoadOptions& options)
      : source_(std::move(source)), options_(options) {}

  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }

  // Records the first problem, at `where` and under the key path `path`.
  void Fail(const toml::source_region& where, const std::string& path, const std::string& what);
  // A problem that has no place in the text (the name made from the file name).
  void FailFile(const std::string& what);

  // Refuses keys of `table` outside `known`.
  void OnlyKeys(const toml::table& table, const std::string& path,
                std::initializer_list<const char*> known);

  static std::string Join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }
  static std::string TypeName(const toml::node& n);  // "a string", "an integer", ...
  static std::string Shown(const toml::node& n);     // the value as written, for errors

  // Each read leaves `out` as it was when the key is absent or a read already failed.
  // A sub-table, or nullptr when absent or not a table (then failed()).
  const toml::table* Table(const toml::table& parent, const std::string& path, const char* key);
  // `allowed`, when not empty, is the closed set of values.
  void String(const toml::table& t, const std::string& path, const char* key, std::string* out,
              std::initializer_list<const char*> allowed = {});
  void Bool(const toml::table& t, const std::string& path, const char* key, bool* out);
  void Count(const toml::table& t, const std::string& path, const char* key, uint64_t lo,
             uint64_t hi, uint64_t* out);
  // A size with a unit ("512MiB", base/units.h) within [lo, hi] bytes.
  void Size(const toml::table& t, const std::string& path, const char* key, uint64_t lo,
            uint64_t hi, uint64_t* out);
  // A duration with a unit ("30s", "15m", "2h") within [lo, hi].
  void Duration(const toml::table& t, const std::string& path, const char* key,
                std::chrono::seconds lo, std::chrono::seconds hi, std::chrono::seconds* out);
  // An array of distinct strings; `check` may refuse one element (returns the reason or "").
  void Strings(const toml::table& t, const std::string& path, const char* key,
               std::vector<std::string>* out,
               const std::function<std::string(const std::string&)>& check = {});

  const LoadOptions& options() const { return options_; }

 private:
  std::string source_;
  const LoadOptions& options_;
  std::string error_;
};

}  // namespace mcpcell::policies
