// upload_archive's url without a cell: the URLs refused (each error names arguments.url and
// what is wrong), and how the in-cell fetcher's exit is read: the archive, or an error
// that says whether the egress policy refused (quoting the proxy's line), the server
// answered an error, the body passed the cap, or python3 is missing. The fetch itself, in
// a real cell through the real proxy, is tests/e2e/test/archive_url.test.mjs.
#include "tools/archive_url.h"

#include <gtest/gtest.h>

namespace mcpcell::tools {
namespace {

TEST(ArchiveUrl, AcceptsHttpAndHttpsUrlsOfAHost) {
  for (const char* url :
       {"http://example.com/a.tgz", "https://example.com:8443/x/y.zip?v=1",
        "http://127.0.0.1:8080/a.tar", "https://[::1]:443/a.tar.zst", "https://example.com"}) {
    Status st = CheckArchiveUrl(url);
    EXPECT_TRUE(st) << url << ": " << st.error().message;
  }
}

TEST(ArchiveUrl, RefusesOtherUrlsSayingWhy) {
  const std::pair<std::string, std::string> cases[] = {
      {"file:///etc/passwd", "\"file:///etc/passwd\" is not an http:// or https:// URL"},
      {"example.com/a.tgz", "is not an http:// or https:// URL"},
      {"https://user:pw@example.com/a.tgz", "credentials (user:password@) are not accepted"},
      {"https:///a.tgz", "no host"},
      {"https://example.com:0/a", "port \"0\" is not a number from 1 to 65535"},
      {"https://example.com:99999/a", "port \"99999\""},
      {"https://example.com:/a", "port \"\""},
      {"https://example.com/a b", "contains a space or control character"},
      {"https://example.com/" + std::string(5000, 'a'), "longer than 4096 bytes"},
  };
  for (const auto& [url, why] : cases) {
    Status st = CheckArchiveUrl(url);
    ASSERT_FALSE(st) << url;
    EXPECT_EQ(st.error().message.rfind("arguments.url: ", 0), 0u) << st.error().message;
    EXPECT_NE(st.error().message.find(why), std::string::npos) << st.error().message;
  }
}

TEST(ArchiveUrl, CapIsThePolicysAndBoundedPerCall) {
  EXPECT_EQ(ArchiveUrlCap(4096), 4096u);
  EXPECT_EQ(ArchiveUrlCap(1ull << 40), 256ull << 20);
}

TEST(ArchiveUrl, FetcherIsIsolatedPythonWithTheUrlAndCapAsArguments) {
  auto argv = ArchiveFetchArgv("https://example.com/a.tgz", 1234);
  ASSERT_EQ(argv.size(), 6u);
  EXPECT_EQ(argv[0], "python3");
  EXPECT_EQ(argv[1], "-I");
  EXPECT_EQ(argv[4], "https://example.com/a.tgz");
  EXPECT_EQ(argv[5], "1234");
}

sandbox::ExecResult Exited(int code, std::string out, std::string err) {
  sandbox::ExecResult r;
  r.exit_code = code;
  r.out.total = out.size();
  r.out.data = std::move(out);
  r.err.total = err.size();
  r.err.data = std::move(err);
  return r;
}

const char* kUrl = "https://files.example/a.tgz";

TEST(ArchiveUrl, ASuccessfulFetchIsTheArchive) {
  auto r = ArchiveFetchOutcome(Exited(0, "ARCHIVE", ""), kUrl, 100, {});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, "ARCHIVE");
  auto empty = ArchiveFetchOutcome(Exited(0, "", ""), kUrl, 100, {});
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().message.find("empty body"), std::string::npos);
  // More than the cap on stdout, however the fetcher exited: refused.
  auto over = ArchiveFetchOutcome(Exited(0, std::string(101, 'x'), ""), kUrl, 100, {});
  ASSERT_FALSE(over);
  EXPECT_NE(over.error().message.find("passed the 100 bytes cap"), std::string::npos);
}

TEST(ArchiveUrl, APolicyRefusalQuotesTheProxy) {
  const std::string line =
      "Tunnel connection failed: 403 mcpcell: egress to files.example:443 denied: not in "
      "network.allow";
  auto r =
      ArchiveFetchOutcome(Exited(5, "", "some noise\n" + line + "\n"), kUrl, 100,
                          {"mcpcell: egress to files.example:443 denied: not in network.allow"});
  ASSERT_FALSE(r);
  const std::string& m = r.error().message;
  EXPECT_NE(m.find("fetching https://files.example/a.tgz: refused by the egress policy: " + line),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("network.allow names"), std::string::npos) << m;
  EXPECT_EQ(m.find("\n  mcpcell: egress"), std::string::npos) << "the proxy's line twice: " << m;
  // A refusal of a redirect's host shows in the proxy's lines though not in the fetcher's.
  auto redirected = ArchiveFetchOutcome(
      Exited(3, "", "403 Forbidden\n"), kUrl, 100,
      {"mcpcell: egress to elsewhere.example:443 denied: not in network.allow"});
  ASSERT_FALSE(redirected);
  EXPECT_NE(redirected.error().message.find("refused by the egress policy: 403 Forbidden\n  "
                                            "mcpcell: egress to elsewhere.example:443"),
            std::string::npos)
      << redirected.error().message;
}

TEST(ArchiveUrl, OtherFailuresSayWhatHappened) {
  auto status = ArchiveFetchOutcome(Exited(3, "", "404 Not Found\n"), kUrl, 100, {});
  ASSERT_FALSE(status);
  EXPECT_NE(status.error().message.find("the server answered HTTP 404 Not Found"),
            std::string::npos)
      << status.error().message;
  auto big = ArchiveFetchOutcome(Exited(4, "", "Content-Length 5000\n"), kUrl, 100, {});
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("over the 100 bytes cap for archives"), std::string::npos)
      << big.error().message;
  EXPECT_NE(big.error().message.find("Content-Length 5000"), std::string::npos);
  auto down = ArchiveFetchOutcome(Exited(5, "", "timed out\n"), kUrl, 100, {});
  ASSERT_FALSE(down);
  EXPECT_NE(down.error().message.find("no answer: timed out"), std::string::npos);
  auto nopy = ArchiveFetchOutcome(Exited(127, "", "sh: python3: not found\n"), kUrl, 100, {});
  ASSERT_FALSE(nopy);
  EXPECT_NE(nopy.error().message.find("has none; send the archive base64 in arguments.data"),
            std::string::npos);
  auto crash = ArchiveFetchOutcome(Exited(1, "", "Traceback...\nKeyError: 'x'\n"), kUrl, 100, {});
  ASSERT_FALSE(crash);
  EXPECT_NE(crash.error().message.find("exited with status 1: KeyError: 'x'"), std::string::npos);
}

}  // namespace
}  // namespace mcpcell::tools
