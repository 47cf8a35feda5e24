#include "sandbox/init/simple_command.h"

#include <limits.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <array>
#include <cstring>

namespace mcpcell::sandbox {
namespace {

// Characters with no meaning to dash in a word that is not the first or in an assignment:
// no quoting, expansion ($ ` ~), globbing (* ? [ ]), redirection, separator, grouping,
// comment (#) or negation (!). Anything else sends the line to the shell.
bool PlainWordChar(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::strchr("_./,:+=@%-", c) != nullptr && c != '\0';
}

// Words that are syntax at the start of a command (dash's keywords; `in` included because
// it is one in some positions), and dash's builtins (`command -V` in dash 0.5.12): a
// builtin may behave unlike the program of its name (echo -e, pwd under a symlink).
constexpr std::array<std::string_view, 13> kReserved = {"case", "do",    "done", "elif", "else",
                                                        "esac", "fi",    "for",  "if",   "in",
                                                        "then", "until", "while"};
constexpr std::array<std::string_view, 39> kBuiltins = {
    ".",       ":",        "[",      "alias", "bg",      "break", "cd",     "chdir",
    "command", "continue", "echo",   "eval",  "exec",    "exit",  "export", "false",
    "fg",      "getopts",  "hash",   "jobs",  "kill",    "local", "printf", "pwd",
    "read",    "readonly", "return", "set",   "shift",   "test",  "times",  "trap",
    "true",    "type",     "ulimit", "umask", "unalias", "unset", "wait"};

bool Contains(const auto& list, std::string_view word) {
  return std::find(list.begin(), list.end(), word) != list.end();
}

// Variables dash sets at startup whatever the environment says (IFS, OPTIND, PPID): an
// environment holding one is passed on changed.
constexpr std::array<std::string_view, 3> kResetByDash = {"IFS", "OPTIND", "PPID"};

bool ShellName(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (unsigned char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      return false;
  }
  return true;
}

}  // namespace

std::optional<std::vector<std::string>> DashSimpleCommandWords(std::string_view line) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < line.size()) {
    if (line[i] == ' ' || line[i] == '\t') {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < line.size() && line[end] != ' ' && line[end] != '\t') {
      if (!PlainWordChar(static_cast<unsigned char>(line[end]))) return std::nullopt;
      ++end;
    }
    words.emplace_back(line.substr(i, end - i));
    i = end;
  }
  if (words.empty()) return std::nullopt;
  const std::string& first = words[0];
  if (first.find('=') != std::string::npos || Contains(kReserved, first)) return std::nullopt;
  if (Contains(kBuiltins, first)) {
    const bool same_as_program = (first == "true" || first == "false") && words.size() == 1;
    if (!same_as_program) return std::nullopt;
  }
  return words;
}

std::string DashBuiltinStandIn(std::string_view word) {
  if (word == "true" || word == "false") return "/usr/bin/" + std::string(word);
  return "";
}

bool DashKeepsEnvironment(const std::vector<std::string>& env, std::string_view program) {
  std::vector<std::string_view> names;
  names.reserve(env.size());
  bool path_ok = program.find('/') != std::string_view::npos;
  for (const std::string& entry : env) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) return false;
    std::string_view name(entry.data(), eq);
    if (!ShellName(name) || Contains(kResetByDash, name)) return false;
    if (name == "PATH") {
      std::string_view value(entry.data() + eq + 1, entry.size() - eq - 1);
      path_ok = path_ok || (!value.empty() && value.find('%') == std::string_view::npos);
    }
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  if (std::adjacent_find(names.begin(), names.end()) != names.end()) return false;
  return path_ok;
}

std::string DashSignalReport(int signo, bool core_dumped) {
  if (signo == SIGINT || signo == SIGPIPE) return "";
  const char* text = ::strsignal(signo);
  std::string report = text != nullptr ? text : "Unknown signal " + std::to_string(signo);
  if (core_dumped) report += " (core dumped)";
  return report + "\n";
}

bool IsDash(const char* path) {
  char resolved[PATH_MAX];
  if (::realpath(path, resolved) == nullptr) return false;
  const char* slash = std::strrchr(resolved, '/');
  return std::strcmp(slash ? slash + 1 : resolved, "dash") == 0;
}

}  // namespace mcpcell::sandbox
