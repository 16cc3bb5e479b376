// Config file parsing and the flag > env > file > default precedence.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "client/config.h"
#include "client/login_command.h"

namespace trainctl::client {
namespace {

using ::testing::HasSubstr;

TEST(ConfigFilePathTest, XdgConfigHomeThenHome) {
  EXPECT_EQ(ConfigFilePath("/x/cfg", "/home/u"), "/x/cfg/trainctl/config.yaml");
  EXPECT_EQ(ConfigFilePath(nullptr, "/home/u"),
            "/home/u/.config/trainctl/config.yaml");
  // The XDG spec says relative values are to be ignored.
  EXPECT_EQ(ConfigFilePath("rel", "/home/u"),
            "/home/u/.config/trainctl/config.yaml");
  EXPECT_EQ(ConfigFilePath("", nullptr), "");
}

TEST(ParseConfigFileTest, ReadsKnownKeys) {
  absl::StatusOr<ConfigFile> c =
      ParseConfigFile("coordinator: head:7070\noutput: json\n", "/c.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->coordinator, "head:7070");
  EXPECT_EQ(c->output, "json");
  c = ParseConfigFile("", "/c.yaml");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->coordinator.has_value());
  EXPECT_FALSE(c->output.has_value());
}

TEST(ParseConfigFileTest, ErrorsNameTheFileAndTheKey) {
  auto message = [](const std::string& text) {
    return std::string(ParseConfigFile(text, "/etc/c.yaml").status().message());
  };
  EXPECT_THAT(message("coordinater: x\n"),
              HasSubstr("config file /etc/c.yaml: unknown key 'coordinater'"));
  EXPECT_THAT(message("output: yaml\n"),
              HasSubstr("/etc/c.yaml: key 'output' must be table or json"));
  EXPECT_THAT(message("coordinator: [a, b]\n"),
              HasSubstr("/etc/c.yaml: key 'coordinator' must be a non-empty"));
  EXPECT_THAT(message("coordinator: [a, b\n"),
              HasSubstr("/etc/c.yaml: not valid YAML at line"));
  EXPECT_THAT(message("- a\n- b\n"), HasSubstr("/etc/c.yaml: expected a mapping"));
}

TEST(LoadConfigFileTest, MissingFileIsEmptyAndAFileIsParsed) {
  const std::string dir = ::testing::TempDir() + "/cfg" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  absl::StatusOr<ConfigFile> c = LoadConfigFile(dir + "/none.yaml");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->coordinator.has_value());
  std::ofstream(dir + "/c.yaml") << "output: bogus\n";
  c = LoadConfigFile(dir + "/c.yaml");
  EXPECT_THAT(std::string(c.status().message()), HasSubstr(dir + "/c.yaml"));
  std::filesystem::remove_all(dir);
}

TEST(CoordinatorAddressTest, AHostWithoutAPortGetsTheDefaultPort) {
  EXPECT_EQ(*CoordinatorAddress("127.0.0.1", "--coordinator"), "127.0.0.1:7070");
  EXPECT_EQ(*CoordinatorAddress("head", "--coordinator"), "head:7070");
  EXPECT_EQ(*CoordinatorAddress("head:7443", "--coordinator"), "head:7443");
  EXPECT_EQ(*CoordinatorAddress("[::1]", "--coordinator"), "[::1]:7070");
  EXPECT_EQ(*CoordinatorAddress("[::1]:9000", "--coordinator"), "[::1]:9000");
  EXPECT_EQ(*CoordinatorAddress("unix:/run/tc.sock", "--coordinator"), "unix:/run/tc.sock");
  EXPECT_EQ(*CoordinatorAddress("dns:///head:7070", "--coordinator"), "dns:///head:7070");
  for (const char* bad : {"head:", "head:http", "head:0", "head:70000", "::1", "[::1",
                          ":7070", "[::1]x"}) {
    absl::StatusOr<std::string> address = CoordinatorAddress(bad, "TRAINCTL_COORDINATOR");
    ASSERT_FALSE(address.ok()) << bad;
    EXPECT_THAT(address.status().message(), HasSubstr("TRAINCTL_COORDINATOR: '")) << bad;
  }
  EXPECT_THAT(CoordinatorAddress("::1", "x").status().message(), HasSubstr("[::1]:7070"));
  // Resolved settings carry the completed address.
  absl::StatusOr<Settings> s = ResolveSettings("10.0.0.5", "", {}, ConfigFile());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->coordinator, "10.0.0.5:7070");
}

TEST(ResolveSettingsTest, FlagThenEnvThenFileThenDefault) {
  ConfigFile file;
  file.coordinator = "file:1";
  file.output = "json";
  const std::map<std::string, std::string> env = {
      {"TRAINCTL_COORDINATOR", "env:1"}, {"TRAINCTL_OUTPUT", "table"}};

  Settings s = *ResolveSettings("flag:1", "json", env, file);
  EXPECT_EQ(s.coordinator, "flag:1");
  EXPECT_EQ(s.output, "json");
  s = *ResolveSettings("", "", env, file);
  EXPECT_EQ(s.coordinator, "env:1");
  EXPECT_EQ(s.output, "table");
  s = *ResolveSettings("", "", {{"TRAINCTL_COORDINATOR", ""}}, file);
  EXPECT_EQ(s.coordinator, "file:1");  // empty variable = unset
  EXPECT_EQ(s.output, "json");
  s = *ResolveSettings("", "", {}, ConfigFile{});
  EXPECT_EQ(s.coordinator, "127.0.0.1:7070");
  EXPECT_EQ(s.output, "table");
}

TEST(ResolveSettingsTest, BadOutputVariableIsAnErrorUnlessAFlagOverrides) {
  const std::map<std::string, std::string> env = {{"TRAINCTL_OUTPUT", "xml"}};
  absl::StatusOr<Settings> s = ResolveSettings("", "", env, ConfigFile{});
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("TRAINCTL_OUTPUT must be table or json, not 'xml'"));
  EXPECT_TRUE(ResolveSettings("", "json", env, ConfigFile{}).ok());
}


TEST(SecuritySettingsTest, TokenCaAndInsecureFollowThePrecedence) {
  absl::StatusOr<ConfigFile> file = ParseConfigFile(
      "token: tcu_file\nca_cert: /file/ca.crt\ninsecure: false\n", "/c.yaml");
  ASSERT_TRUE(file.ok()) << file.status();
  Settings s = *ResolveSettings("", "", {}, *file);
  EXPECT_EQ(s.token, "tcu_file");
  EXPECT_EQ(s.ca_cert, "/file/ca.crt");
  EXPECT_FALSE(s.insecure);
  s = *ResolveSettings("", "", {{"TRAINCTL_TOKEN", "tcu_env"},
                                {"TRAINCTL_INSECURE", "true"}}, *file);
  EXPECT_EQ(s.token, "tcu_env");
  EXPECT_TRUE(s.insecure);
  SecurityFlags flags;
  flags.token = "tcu_flag";
  flags.ca_cert = "/flag/ca.crt";
  s = *ResolveSettings("", "", {{"TRAINCTL_TOKEN", "tcu_env"}}, *file, flags);
  EXPECT_EQ(s.token, "tcu_flag");
  EXPECT_EQ(s.ca_cert, "/flag/ca.crt");
  absl::StatusOr<Settings> bad =
      ResolveSettings("", "", {{"TRAINCTL_INSECURE", "maybe"}}, *file);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("TRAINCTL_INSECURE"));
  EXPECT_THAT(std::string(ParseConfigFile("insecure: sometimes\n", "/c.yaml")
                              .status()
                              .message()),
              HasSubstr("key 'insecure' must be true or false"));
}

TEST(SecuritySettingsTest, SetConfigValuesKeepsOtherKeysAndIsPrivate) {
  const std::string dir =
      ::testing::TempDir() + "/login" + std::to_string(getpid());
  const std::string path = dir + "/trainctl/config.yaml";
  std::filesystem::create_directories(dir + "/trainctl");
  std::ofstream(path) << "output: json\n";
  chmod(path.c_str(), 0644);
  ASSERT_TRUE(SetConfigValues(path, {{"token", "tcu_x"}, {"coordinator", "h:1"}})
                  .ok());
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  absl::StatusOr<ConfigFile> c = LoadConfigFile(path);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->output.value_or(""), "json");
  EXPECT_EQ(c->token.value_or(""), "tcu_x");
  EXPECT_EQ(c->coordinator.value_or(""), "h:1");
  // A broken file is not overwritten.
  std::ofstream(path) << "outptu: json\n";
  EXPECT_FALSE(SetConfigValues(path, {{"token", "t"}}).ok());
  std::filesystem::remove_all(dir);
}

TEST(SecuritySettingsTest, ResolveSecurityReadsTheCaAndFallsBackToTheLocalCoordinator) {
  const std::string dir =
      ::testing::TempDir() + "/sec" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/ca.crt") << "PEM";
  std::ofstream(dir + "/admin.token") << "tcu_local\n";
  const LocalCoordinatorFiles local{dir + "/ca.crt", dir + "/admin.token"};
  Settings settings;
  absl::StatusOr<ClientSecurity> sec = ResolveSecurity(settings, local);
  ASSERT_TRUE(sec.ok());
  EXPECT_FALSE(sec->insecure);
  EXPECT_EQ(sec->ca_pem, "PEM");
  EXPECT_EQ(sec->token, "tcu_local");
  // An explicit CA means another cluster: the local admin token is not sent.
  settings.ca_cert = dir + "/ca.crt";
  sec = ResolveSecurity(settings, local);
  EXPECT_EQ(sec->token, "");
  settings.ca_cert = dir + "/missing.crt";
  sec = ResolveSecurity(settings, local);
  EXPECT_THAT(std::string(sec.status().message()), HasSubstr("missing.crt"));
  settings.insecure = true;
  sec = ResolveSecurity(settings, local);
  ASSERT_TRUE(sec.ok());
  EXPECT_TRUE(sec->insecure);
  EXPECT_EQ(sec->token, "");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace trainctl::client
