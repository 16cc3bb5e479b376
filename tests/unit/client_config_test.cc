// Config file parsing and the flag > env > file > default precedence.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "client/config.h"

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

}  // namespace
}  // namespace trainctl::client
