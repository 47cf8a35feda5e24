// SiblingOf/SiblingExecutable: how mcpcell and mcpcell-init find each other.
#include "sandbox/linux/self_exe.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

namespace mcpcell::sandbox {
namespace {

TEST(SiblingOf, NameInTheDirectoryOfTheExecutable) {
  Result<std::string> p = SiblingOf("/opt/mcpcell/bin/mcpcell", "mcpcell-init");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(*p, "/opt/mcpcell/bin/mcpcell-init");
  Result<std::string> root = SiblingOf("/mcpcell", "mcpcell-init");
  ASSERT_TRUE(root) << root.error().message;
  EXPECT_EQ(*root, "/mcpcell-init");
}

TEST(SiblingOf, RefusesAnExecutableReplacedSinceItStarted) {
  Result<std::string> p = SiblingOf("/usr/local/bin/mcpcell (deleted)", "mcpcell-init");
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("removed or replaced"), std::string::npos) << p.error().message;
  EXPECT_NE(p.error().message.find("mcpcell-init"), std::string::npos) << p.error().message;
}

TEST(SiblingOf, RefusesRelativePathsAndNamesWithSlashes) {
  EXPECT_FALSE(SiblingOf("", "mcpcell-init"));
  EXPECT_FALSE(SiblingOf("bin/mcpcell", "mcpcell-init"));
  EXPECT_FALSE(SiblingOf("/bin/mcpcell", ""));
  Result<std::string> p = SiblingOf("/bin/mcpcell", "../sbin/x");
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("not an executable name"), std::string::npos);
}

TEST(SiblingExecutable, FindsThisTestNextToItself) {
  Result<std::string> p = SiblingExecutable("sandbox_self_exe_test");
  ASSERT_TRUE(p) << p.error().message;
  struct stat found {
  }, self{};
  ASSERT_EQ(::stat(p->c_str(), &found), 0) << *p;
  ASSERT_EQ(::stat("/proc/self/exe", &self), 0);
  EXPECT_EQ(found.st_dev, self.st_dev);
  EXPECT_EQ(found.st_ino, self.st_ino);
}

}  // namespace
}  // namespace mcpcell::sandbox
