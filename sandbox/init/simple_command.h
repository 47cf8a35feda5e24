// `/bin/sh -c LINE` without the shell, where that is the same thing.
//
// `run_command` is defined as `/bin/sh -c LINE`. When LINE is one plain external command
// (`python3 x.py`, `ls -la`, `true`), dash itself does nothing but look the program up in
// PATH and exec it in its own place (dash execs the last command of -c without forking),
// after setting PWD. Starting dash for that costs a warm call ~90 us of CPU and two dozen
// page faults here, as much as everything MCP adds. So cell init, asked to
// (ExecRequest::direct_simple_command), does those steps itself, as GNU make does for
// recipe lines without shell syntax, and falls back to the shell whenever it cannot be
// sure of the same result:
//   - the cell's /bin/sh must be dash (the rules below are dash's);
//   - LINE must be words of [A-Za-z0-9_./,:+=@%-] separated by blanks: no quoting,
//     expansion, globbing, redirection, separators, comments or tilde;
//   - the first word is no assignment (no '=') and no reserved word, and no dash builtin,
//     except `true` and `false` with no arguments, which run /usr/bin/true and
//     /usr/bin/false (they do exactly what the builtins do then: nothing, and exit 0 or 1),
//     never a `true` found in PATH: dash's builtin comes before any PATH entry;
//   - every environment name is a shell name (dash drops the others from the program's
//     environment), and PATH is set, non-empty and without dash's '%' entries, when the
//     program is looked up in it;
//   - in the child: PWD is kept when it is absolute and names the working directory, else
//     set from getcwd, as dash does at startup; then each PATH candidate is exec'd in
//     order while the kernel says ENOENT or ENOTDIR. Any other failure (not executable, no
//     #! line, no candidate at all) execs `/bin/sh -c LINE` after all, which then does and
//     reports exactly what it always did (`not found`, 126, running a script).
// A false "no" only costs the shell's startup; so every rule errs towards the shell.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mcpcell::sandbox {

// The words dash would exec for LINE by the rules above, or nullopt: run the shell.
std::optional<std::vector<std::string>> DashSimpleCommandWords(std::string_view line);

// For a bare `true` or `false` (DashSimpleCommandWords allows no other builtin), the
// program that does what the builtin does: "/usr/bin/true" or "/usr/bin/false". Empty
// for every other word, whose program is looked up in PATH.
std::string DashBuiltinStandIn(std::string_view word);

// Whether dash passes `env` ("KEY=VALUE") to the program unchanged but for PWD, and
// whether it would search PATH as init does for `program` (a name without '/' needs PATH
// set, non-empty and without '%').
bool DashKeepsEnvironment(const std::vector<std::string>& env, std::string_view program);

// What dash writes to stderr when the program it waited for was killed by `signo`:
// strsignal's text, " (core dumped)" when it did, and a newline; nothing for SIGINT and
// SIGPIPE. Its exit status is then 128 + signo.
std::string DashSignalReport(int signo, bool core_dumped);

// Whether `path` resolves (symlinks followed) to a file named "dash".
bool IsDash(const char* path);

}  // namespace mcpcell::sandbox
