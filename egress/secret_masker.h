// Masks real secret values in a response stream before the cell sees it: each value, and
// its base64 form, is replaced by its placeholder (and the placeholder's base64 form), so a
// server that echoes a token back (an error page, a "whoami") does not hand it to the code.
//
// The stream arrives in arbitrary pieces; the masker holds back the last (longest needle -
// 1) bytes of what it was fed, so a value split across pieces is still found. Finish()
// releases the held bytes at the end of the body. Exact for the forms it knows; a value
// the server transforms otherwise (another encoding, compression) is not recognised, which
// is why the proxy asks upstream for an identity-encoded response.
// Threading: one instance per response, used by one thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "egress/secret_substitution.h"

namespace mcpcell::egress {

class SecretMasker {
 public:
  explicit SecretMasker(const std::vector<SecretMask>& masks);

  // The masked bytes that are safe to emit now, appended to *out (the proxy builds a chunk
  // around them in place).
  void Feed(std::string_view data, std::string* out);
  std::string Feed(std::string_view data);
  // The rest, at the end of the stream.
  void Finish(std::string* out);
  std::string Finish();
  // A whole string at once (response header values).
  std::string MaskAll(std::string_view data) const;
  bool empty() const { return needles_.empty(); }

 private:
  struct Needle {
    std::string from, to;
  };
  // Appends data[pos..] with every complete needle replaced, less the tail that may still
  // start a needle (its length in *held; nothing is held back when final).
  void Mask(std::string_view data, size_t pos, bool final, size_t* held, std::string* out) const;
  // Replaces the needles that start in [pos, limit), appending data[pos..] up to the end of
  // the last one; returns where it stopped. Unless final, it stops before a match that a
  // longer needle may still take over once more bytes arrive (leftmost, then longest).
  size_t Scan(std::string_view data, size_t pos, size_t limit, bool final,
              std::string* out) const;
  // A needle longer than `length` may still match at data[at..] when more bytes arrive.
  bool CouldGrow(std::string_view data, size_t at, size_t length) const;

  std::vector<Needle> needles_;
  size_t longest_ = 0;
  std::string carry_;
};

}  // namespace mcpcell::egress
