// Shared by the audit unit tests: a temp dir, reading and rewriting trail files line by
// line, re-hashing a tampered chain (what a careful forger would do), and an Ed25519 key
// pair written as PEM files.
#pragma once

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "audit/record.h"
#include "audit/trail.h"
#include "audit/trail_files.h"

namespace mcpcell::audit::testing {

class TempDir {
 public:
  TempDir() {
    std::string templ = ::testing::TempDir() + "audit-test-XXXXXX";
    char* made = mkdtemp(templ.data());
    path_ = made ? made : "";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

inline void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

// Complete lines (without their newlines).
inline std::vector<std::string> ReadLines(const std::string& path) {
  std::vector<std::string> lines;
  std::istringstream in(ReadFile(path));
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

inline void WriteLines(const std::string& path, const std::vector<std::string>& lines) {
  std::string data;
  for (const auto& l : lines) data += l + "\n";
  WriteFile(path, data);
}

// Recomputes prev and hash of lines[from..] so the chain holds again.
inline void Rehash(std::vector<std::string>* lines, size_t from) {
  std::string prev = from == 0
                         ? std::string(kZeroHash)
                         : nlohmann::json::parse((*lines)[from - 1])["hash"].get<std::string>();
  for (size_t i = from; i < lines->size(); ++i) {
    auto r = nlohmann::json::parse((*lines)[i]);
    r["prev"] = prev;
    r.erase("hash");
    prev = Sha256Hex(CanonicalJson(r));
    r["hash"] = prev;
    (*lines)[i] = CanonicalJson(r);
  }
}

struct KeyPair {
  std::string private_pem;
  std::string public_pem;
};

// A fresh Ed25519 key pair in dir/<name>.pem and dir/<name>.pub.pem.
inline KeyPair MakeKeyPair(const std::string& dir, const std::string& name) {
  EVP_PKEY* key = EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519");
  KeyPair kp{dir + "/" + name + ".pem", dir + "/" + name + ".pub.pem"};
  FILE* f = fopen(kp.private_pem.c_str(), "w");
  PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  fclose(f);
  f = fopen(kp.public_pem.c_str(), "w");
  PEM_write_PUBKEY(f, key);
  fclose(f);
  EVP_PKEY_free(key);
  return kp;
}

inline std::string CurrentPath(const std::string& dir) { return dir + "/" + kCurrentFileName; }

// Options for a trail in dir that neither rotates nor checkpoints unless asked.
inline TrailOptions QuietOptions(const std::string& dir) {
  TrailOptions o;
  o.dir = dir;
  o.rotate_bytes = 0;
  o.rotate_age = std::chrono::seconds(0);
  o.retention = std::chrono::seconds(0);
  o.checkpoint_every = 0;
  return o;
}

// Writes n exec.start records for tenant "t1", session "s1", cell "c1".
inline void AppendN(Trail* trail, int n) {
  for (int i = 0; i < n; ++i) {
    Status s =
        trail->Append("exec.start", "t1", "s1", "c1",
                      {{"tool", "run_command"}, {"command_sha256", Sha256Hex(std::to_string(i))}});
    if (!s) ADD_FAILURE() << s.error().message;
  }
}

}  // namespace mcpcell::audit::testing
