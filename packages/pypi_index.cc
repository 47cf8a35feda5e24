// PEP 503 pages and distribution file names (see pypi_index.h).
#include "packages/pypi_index.h"

#include <cctype>
#include <cstring>

#include "packages/digest.h"
#include "packages/rules.h"
#include "packages/upstream.h"
#include "packages/versions.h"

namespace mcpcell::packages {

namespace {

// &amp; &lt; &gt; &quot; &#39; &#NN; &#xNN; -> characters; nullopt on an unknown entity.
std::optional<std::string> HtmlUnescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    size_t semi = s.find(';', i);
    if (semi == std::string_view::npos || semi - i > 10) return std::nullopt;
    std::string_view ent = s.substr(i + 1, semi - i - 1);
    if (ent == "amp") {
      out += '&';
    } else if (ent == "lt") {
      out += '<';
    } else if (ent == "gt") {
      out += '>';
    } else if (ent == "quot") {
      out += '"';
    } else if (ent == "apos") {
      out += '\'';
    } else if (ent.size() > 1 && ent[0] == '#') {
      bool hex = ent[1] == 'x' || ent[1] == 'X';
      std::string digits(ent.substr(hex ? 2 : 1));
      if (digits.empty()) return std::nullopt;
      for (char c : digits) {
        if (!(hex ? std::isxdigit(static_cast<unsigned char>(c))
                  : std::isdigit(static_cast<unsigned char>(c))))
          return std::nullopt;
      }
      unsigned long cp = std::stoul(digits, nullptr, hex ? 16 : 10);
      if (cp == 0 || cp > 0x7e) return std::nullopt;  // only ASCII matters in these pages
      out += static_cast<char>(cp);
    } else {
      return std::nullopt;
    }
    i = semi;
  }
  return out;
}

std::optional<std::string> UrlDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      if (i + 2 >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[i + 1])) ||
          !std::isxdigit(static_cast<unsigned char>(s[i + 2])))
        return std::nullopt;
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
}

// Reads the attributes of a tag body ("href=\"...\" data-yanked"), lower-case names.
Result<std::vector<std::pair<std::string, std::string>>> ParseAttributes(std::string_view body) {
  std::vector<std::pair<std::string, std::string>> attrs;
  size_t i = 0;
  while (i < body.size()) {
    while (i < body.size() && std::isspace(static_cast<unsigned char>(body[i]))) ++i;
    if (i >= body.size() || body[i] == '/') break;
    size_t start = i;
    while (i < body.size() && body[i] != '=' && !std::isspace(static_cast<unsigned char>(body[i])))
      ++i;
    std::string name(body.substr(start, i - start));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string value;
    while (i < body.size() && std::isspace(static_cast<unsigned char>(body[i]))) ++i;
    if (i < body.size() && body[i] == '=') {
      ++i;
      while (i < body.size() && std::isspace(static_cast<unsigned char>(body[i]))) ++i;
      if (i < body.size() && (body[i] == '"' || body[i] == '\'')) {
        char quote = body[i++];
        size_t end = body.find(quote, i);
        if (end == std::string_view::npos)
          return Error::Msg("unterminated attribute value of \"" + name + "\"");
        value = std::string(body.substr(i, end - i));
        i = end + 1;
      } else {
        size_t end = i;
        while (end < body.size() && !std::isspace(static_cast<unsigned char>(body[end]))) ++end;
        value = std::string(body.substr(i, end - i));
        i = end;
      }
      auto unescaped = HtmlUnescape(value);
      if (!unescaped) return Error::Msg("bad character reference in \"" + name + "\"");
      value = *unescaped;
    }
    if (attrs.size() > 32) return Error::Msg("more than 32 attributes on one anchor");
    attrs.emplace_back(std::move(name), std::move(value));
  }
  return attrs;
}

}  // namespace

std::string HtmlEscape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

bool IsSafeFilename(std::string_view f) {
  if (f.empty() || f.size() > 255 || f[0] == '.') return false;
  for (char c : f) {
    if (!IsNameChar(c) && c != '+' && c != '!') return false;
  }
  return true;
}

Result<std::vector<IndexFile>> ParseSimplePage(std::string_view html, const std::string& page_url) {
  std::vector<IndexFile> files;
  size_t pos = 0;
  for (;;) {
    size_t open = html.find('<', pos);
    if (open == std::string_view::npos) break;
    if (open + 1 < html.size() && (html[open + 1] == 'a' || html[open + 1] == 'A') &&
        open + 2 < html.size() && std::isspace(static_cast<unsigned char>(html[open + 2]))) {
      // The tag ends at the first '>' outside a quoted attribute value.
      size_t close = open + 2;
      char quote = 0;
      for (; close < html.size(); ++close) {
        char ch = html[close];
        if (quote) {
          if (ch == quote) quote = 0;
        } else if (ch == '"' || ch == '\'') {
          quote = ch;
        } else if (ch == '>') {
          break;
        }
      }
      if (close >= html.size()) return Error::Msg("an unterminated <a> tag");
      auto attrs = ParseAttributes(html.substr(open + 2, close - open - 2));
      if (!attrs) return Error::Msg("an <a> tag: " + attrs.error().message);
      IndexFile f;
      bool has_href = false;
      for (const auto& [name, value] : *attrs) {
        if (name == "href") {
          has_href = true;
          size_t hash = value.find('#');
          std::string fragment = hash == std::string::npos ? "" : value.substr(hash + 1);
          f.url = ResolveUrl(page_url, value.substr(0, hash));
          if (f.url.empty()) return Error::Msg("an href that is not an http(s) URL: " + value);
          if (fragment.rfind("sha256=", 0) == 0) {
            std::string hex = fragment.substr(7);
            for (char& c : hex) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            if (!IsLowerHex(hex, 64)) return Error::Msg("a malformed #sha256= in " + value);
            f.sha256 = hex;
          }
          std::string path = f.url.substr(0, f.url.find('?'));
          auto decoded = UrlDecode(path.substr(path.rfind('/') + 1));
          if (!decoded) return Error::Msg("a malformed %-escape in " + value);
          f.filename = *decoded;
        } else if (name == "data-requires-python") {
          f.requires_python = value;
        } else if (name == "data-yanked") {
          f.yanked = value;
        }
      }
      if (has_href) {
        files.push_back(std::move(f));
        if (files.size() > 100000) return Error::Msg("more than 100000 files on one page");
      }
      pos = close + 1;
    } else {
      pos = open + 1;
    }
  }
  return files;
}

std::optional<DistFile> ParseDistFilename(std::string_view filename, std::string_view project) {
  if (!IsSafeFilename(filename)) return std::nullopt;
  DistFile d;
  std::string_view stem;
  if (filename.ends_with(".whl")) {
    d.wheel = true;
    stem = filename.substr(0, filename.size() - 4);
    // name-version[-build]-py-abi-platform: 5 or 6 parts; names use '_' for '-'.
    std::vector<std::string_view> parts;
    size_t start = 0;
    for (;;) {
      size_t dash = stem.find('-', start);
      parts.push_back(stem.substr(start, dash == std::string_view::npos ? dash : dash - start));
      if (dash == std::string_view::npos) break;
      start = dash + 1;
    }
    if (parts.size() != 5 && parts.size() != 6) return std::nullopt;
    for (auto p : parts) {
      if (p.empty()) return std::nullopt;
    }
    d.name = NormalizePypiName(parts[0]);
    d.version = std::string(parts[1]);
  } else {
    for (const char* ext : {".tar.gz", ".zip"}) {
      if (filename.ends_with(ext)) stem = filename.substr(0, filename.size() - strlen(ext));
    }
    if (stem.empty()) return std::nullopt;
    // The name is the longest prefix before a '-' whose normalization is the project.
    size_t dash = stem.rfind('-');
    while (dash != std::string_view::npos && dash > 0) {
      if (NormalizePypiName(stem.substr(0, dash)) == project) break;
      dash = stem.rfind('-', dash - 1);
    }
    if (dash == std::string_view::npos || dash == 0) return std::nullopt;
    d.name = NormalizePypiName(stem.substr(0, dash));
    d.version = std::string(stem.substr(dash + 1));
  }
  if (d.name != project || !ParsePep440(d.version).ok()) return std::nullopt;
  return d;
}

std::string RenderSimplePage(const std::string& project, const std::vector<IndexFile>& files) {
  std::string out =
      "<!DOCTYPE html>\n<html>\n<head><meta name=\"pypi:repository-version\" content=\"1.0\">"
      "<title>Links for " +
      HtmlEscape(project) + "</title></head>\n<body>\n<h1>Links for " + HtmlEscape(project) +
      "</h1>\n";
  for (const IndexFile& f : files) {
    out += "<a href=\"/pypi/files/" + f.sha256 + "/" + HtmlEscape(f.filename) +
           "#sha256=" + f.sha256 + "\"";
    if (!f.requires_python.empty())
      out += " data-requires-python=\"" + HtmlEscape(f.requires_python) + "\"";
    if (f.yanked) out += " data-yanked=\"" + HtmlEscape(*f.yanked) + "\"";
    out += ">" + HtmlEscape(f.filename) + "</a><br/>\n";
  }
  out += "</body>\n</html>\n";
  return out;
}

}  // namespace mcpcell::packages
