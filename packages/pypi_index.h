// PEP 503 "simple" project pages: reading an upstream page strictly, naming the files in it
// (wheel and sdist file names, PEP 427 / PEP 625), and writing the page the service serves.
// Threading: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace mcpcell::packages {

// One file anchor of a project page.
struct IndexFile {
  std::string filename;               // the href's last path segment, URL-decoded
  std::string url;                    // absolute upstream URL without the fragment
  std::string sha256;                 // from "#sha256=<hex>" (lower case); "" if the page gave none
  std::string requires_python;        // data-requires-python, unescaped
  std::optional<std::string> yanked;  // data-yanked (the reason, possibly "")
};

// Parses the anchors of an upstream page at `page_url`. Anchors that are not files (no
// href) are skipped; malformed markup is an error naming the problem.
Result<std::vector<IndexFile>> ParseSimplePage(std::string_view html, const std::string& page_url);

// What a distribution file name says. Wheels: "{name}-{version}(-{build})?-{py}-{abi}-
// {platform}.whl"; sdists: "{name}-{version}.tar.gz" or ".zip". `project` (normalized)
// disambiguates sdist names that contain '-'. nullopt: not a file of `project`.
struct DistFile {
  std::string name;  // normalized
  std::string version;
  bool wheel = false;
};
std::optional<DistFile> ParseDistFilename(std::string_view filename, std::string_view project);
// A file name the service will put in a URL path: [A-Za-z0-9._+!-], no leading '.', <= 255.
bool IsSafeFilename(std::string_view filename);

// The page served to pip: one anchor per file, href "/pypi/files/<sha256>/<filename>
// #sha256=<hex>", data-requires-python and data-yanked kept (escaped).
std::string RenderSimplePage(const std::string& project, const std::vector<IndexFile>& files);

std::string HtmlEscape(std::string_view text);

}  // namespace mcpcell::packages
