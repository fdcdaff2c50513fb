#include "server/auth.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace topogate::server {
namespace {

TEST(TokenFile, OneTokenPerLineWhiteSpaceIgnored) {
  EXPECT_EQ(parse_token_file("a\n  b \r\n\n\tc"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(parse_token_file("\n \n").empty());
}

TEST(BearerToken, SchemeIsCaseInsensitive) {
  EXPECT_EQ(bearer_token("Bearer abc"), "abc");
  EXPECT_EQ(bearer_token("bearer abc"), "abc");
  EXPECT_EQ(bearer_token("BEARER  abc "), "abc");
  EXPECT_EQ(bearer_token("Basic abc"), "");
  EXPECT_EQ(bearer_token("Bearer"), "");
  EXPECT_EQ(bearer_token("Bearerabc"), "");
}

class AuthFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("topogate-auth-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string file(const std::string& name, const std::string& data) {
    std::ofstream(dir_ / name) << data;
    return (dir_ / name).string();
  }
  std::filesystem::path dir_;
};

TEST_F(AuthFiles, EmptyTokenFileIsAnError) {
  const auto empty = load_credentials({{file("empty", "\n")}, {}, {}, {}});
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().code, core::errc::invalid_argument);
  EXPECT_NE(empty.error().message.find("no token"), std::string::npos);
  const auto missing = load_credentials({{(dir_ / "missing").string()}, {}, {}, {}});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, core::errc::io);
  const auto not_pem = load_credentials({{}, file("ca", "not a certificate"), {}, {}});
  ASSERT_FALSE(not_pem);
  EXPECT_EQ(not_pem.error().code, core::errc::invalid_argument);
}

TEST_F(AuthFiles, EveryTokenOfEveryFileIsAccepted) {
  const auto loaded = load_credentials({{file("a", "one\ntwo\n"), file("b", "three")}, {}, {}, {}});
  ASSERT_TRUE(loaded) << loaded.error().message;
  const credential_set& s = *loaded;
  EXPECT_TRUE(s.bearer);
  EXPECT_FALSE(s.mtls);
  for (const char* t : {"one", "two", "three"}) {
    EXPECT_EQ(authenticate(s, "inv", std::string("Bearer ") + t, {}).status, auth_status::ok) << t;
  }
  const auto r = authenticate(s, "inv", "Bearer four", {});
  EXPECT_EQ(r.status, auth_status::denied);
  EXPECT_EQ(r.reason, "wrong_token");
  EXPECT_EQ(authenticate(s, "inv", "", {}).status, auth_status::missing);
  // The identity names the inventory, never the token.
  EXPECT_EQ(authenticate(s, "inv", "Bearer one", {}).identity, "bearer:inv");
}

}  // namespace
}  // namespace topogate::server
