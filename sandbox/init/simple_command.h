// `/bin/sh -c LINE` without the shell, where that gives the same result.
//
// `run_command` is defined as `/bin/sh -c LINE`. When LINE is one plain external command
// (`python3 x.py`, `ls -la`, `true`), dash (0.5.12) sets PWD, looks the program up in
// PATH, forks, execs it in the child and waits, then exits with its status, or with
// 128+n and the signal's name on stderr when a signal killed it. Starting dash for that
// costs a warm call ~90 us of CPU and two dozen page faults here, as much as everything
// MCP adds. So cell init, asked to (ExecRequest::direct_simple_command), does those steps
// itself, as GNU make does for recipe lines without shell syntax, and falls back to the
// shell whenever it cannot be sure of the same result:
//   - the cell's /bin/sh must be dash (the rules below are dash's);
//   - LINE must be words of [A-Za-z0-9_./,:+=@%-] separated by blanks: no quoting,
//     expansion, globbing, redirection, separators, comments or tilde;
//   - the first word is no assignment (no '=') and no reserved word, and no dash builtin,
//     except `true` and `false` with no arguments, which run /usr/bin/true and
//     /usr/bin/false (they do exactly what the builtins do then: nothing, and exit 0 or 1),
//     never a `true` found in PATH: dash's builtin comes before any PATH entry;
//   - every environment name is a shell name (dash drops the others from the program's
//     environment), none is one dash resets (IFS, OPTIND, PPID), none comes twice, and
//     PATH is set, non-empty and without dash's '%' entries, when the program is looked
//     up in it;
//   - in the child: PWD is kept when it is absolute and names the working directory, else
//     set from getcwd, as dash does at startup; then each PATH candidate is exec'd in
//     order while the kernel says ENOENT or ENOTDIR (an empty entry's candidate is the bare
//     name, as dash's). Any other failure (not executable, no #! line, no candidate at
//     all) execs `/bin/sh -c LINE` after all, which then does and reports exactly what it
//     always did (`not found`, 126, running a script);
//   - the program joins a process group that a clone of init made and left (exec.h): under
//     the shell it is a member of the shell's group, not its leader, so setsid() must work
//     in it and getpgrp() must not be its pid;
//   - a death by a signal that no SignalRequest sent (the server's timeout and
//     cancellation send one, and would have killed the shell too) is reported as dash
//     reports it: exit 128+n, and DashSignalReport's line after the program's stderr.
// What still differs, by design: no shell process exists, so the program's parent is
// cell init; a program that signals its own group (`kill 0`) is reported as exit 128+n
// with the signal's name, where the shell would have died with it; the signal's name
// comes after all of stderr rather than when the program died (it differs only when a
// background process keeps writing); and `env` lists the environment in another order.
// A false "no" only costs the shell's startup; so every rule errs towards the shell.
// tests/integration/exec_test.cc (DirectSimpleCommandDoesWhatTheShellDoes) runs each kind
// of line both ways in a real cell and compares the results.
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

// Whether `path` resolves (symlinks followed) to a file named "dash". The rules above are
// those of dash 0.5.x, which forks for the last command of -c (a dash that exec'd it in
// place would report no signal deaths, and would lead no group of its own).
bool IsDash(const char* path);

}  // namespace mcpcell::sandbox
