// The project's error and result types (every room but mcp/, which has its own for its
// library users): every fallible step returns a Result that carries its cause as text
// ("mount(\"overlay\", \"/…/root\"): EPERM"), never a bare bool. Header-only, no
// exceptions, usable from cell init (which is built without exceptions).
#pragma once

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <variant>

namespace mcpcell {

// A failure with a human-readable message and, when it came from a syscall, its errno.
struct Error {
  std::string message;
  int err = 0;  // errno of the failing call, 0 when not a syscall failure

  // "what: STRERRORNAME (text)" from the current errno, e.g. SysError("mount(...)").
  static Error Sys(std::string what, int e = errno) {
    std::string m = std::move(what);
    m += ": ";
    const char* name = strerrorname_np(e);
    m += name ? name : "E?";
    m += " (";
    m += std::strerror(e);
    m += ")";
    return Error{std::move(m), e};
  }
  static Error Msg(std::string what) { return Error{std::move(what), 0}; }

  // Prefix context: err.Wrap("create cell c1") -> "create cell c1: mount(...): EPERM".
  Error Wrap(const std::string& context) const& { return Error{context + ": " + message, err}; }
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : err_(std::move(error)), ok_(false) {}  // NOLINT
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return err_; }

 private:
  Error err_;
  bool ok_ = true;
};

using Status = Result<void>;
inline Status Ok() { return Status(); }

}  // namespace mcpcell
