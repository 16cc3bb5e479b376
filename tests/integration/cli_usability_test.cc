// trainctl's own answers on a real cluster: an untrusted certificate said
// so, a login prompt that does not echo, the nearest command to a typo,
// bash completion of commands, flags and job ids, the versions of both
// sides, and an unreachable coordinator named with what to try.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "local_cluster.h"
#include "pty_run.h"

namespace trainctl::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using std::chrono::seconds;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

class CliUsabilityTest : public SharedClusterTest {};

// Another CA's certificate as --ca-cert: the coordinator is reached, and the
// CLI says its certificate is not trusted, with no gRPC log line.
TEST_F(CliUsabilityTest, AnUntrustedCertificateIsSaidSoWithoutGrpcLogLines) {
  const std::string other = cluster_->dir() + "/other-ca.crt";
  ASSERT_EQ(std::system(("openssl req -x509 -newkey ec -pkeyopt "
                         "ec_paramgen_curve:prime256v1 -nodes -subj /CN=other -days 1 "
                         "-keyout " + cluster_->dir() + "/other-ca.key -out " + other +
                         " >/dev/null 2>&1").c_str()),
            0);
  std::vector<std::string> argv = cluster_->CliArgv({"list"});
  auto ca = std::find(argv.begin(), argv.end(), "--ca-cert");
  ASSERT_NE(ca, argv.end());
  *(ca + 1) = other;
  Process cli(argv, cluster_->dir() + "/untrusted.out");
  EXPECT_EQ(cli.Wait(seconds(60)), 3);
  const std::string output = ReadAll(cluster_->dir() + "/untrusted.out");
  EXPECT_THAT(output, HasSubstr("answered, but its TLS certificate is not signed by "
                                "the CA this client trusts"));
  EXPECT_THAT(output, Not(HasSubstr("ssl_transport_security")));
  EXPECT_THAT(output, Not(HasSubstr("Handshake failed")));
}

// A token typed at the login prompt is not echoed to the terminal.
TEST_F(CliUsabilityTest, LoginDoesNotEchoTheTokenTyped) {
  const std::string config = cluster_->dir() + "/login-config";
  std::vector<std::string> argv = cluster_->CliArgv({"login"});
  auto token = std::find(argv.begin(), argv.end(), "--token");
  ASSERT_NE(token, argv.end());
  const std::string secret = *(token + 1);
  argv.erase(token, token + 2);  // the prompt asks for it
  argv.insert(argv.begin(), {"/usr/bin/env", "XDG_CONFIG_HOME=" + config});
  const PtyResult login = RunInPty(argv, seconds(60), "Token: ", secret + "\n");
  EXPECT_EQ(login.exit_code, 0) << login.output;
  EXPECT_THAT(login.output, HasSubstr("token accepted"));
  EXPECT_THAT(login.output, Not(HasSubstr(secret)));
}

// Typos and a missing port get an answer that says what was meant.
TEST_F(CliUsabilityTest, ATypoedCommandIsAnsweredWithTheNearestOne) {
  CliResult typo = cluster_->Cli({"stauts", "job-1"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_THAT(typo.output, HasSubstr("unknown command 'stauts'; did you mean 'status'?"));
  CliResult far = cluster_->Cli({"frobnicate"});
  EXPECT_EQ(far.exit_code, 2);
  EXPECT_THAT(far.output, HasSubstr("unknown command 'frobnicate'"));
  EXPECT_THAT(far.output, Not(HasSubstr("did you mean")));
}

// `trainctl completion bash` loaded into a real bash: commands, the flags of
// the command at hand, output formats, and job ids that `list -q` asks the
// coordinator for (from the environment, as a shell would have it).
TEST_F(CliUsabilityTest, BashAndZshCompleteCommandsFlagsAndJobIds) {
  const std::string spec = cluster_->WriteFile(
      "wide.yaml", "name: never-fits\nranks: 64\nmodel: mlp\n"
                   "data: {train_images: /a, train_labels: /b}\n");
  CliResult submit = cluster_->Cli({"submit", spec});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  const std::string id = JobIdFrom(submit.output);
  ASSERT_FALSE(id.empty());
  CliResult quiet = cluster_->Cli({"list", "-q"});
  ASSERT_EQ(quiet.exit_code, 0) << quiet.output;
  EXPECT_THAT(quiet.output, HasSubstr(id + "\n"));
  EXPECT_THAT(quiet.output, Not(HasSubstr("STATE")));  // ids only

  const std::string script = cluster_->dir() + "/trainctl.bash";
  CliResult made = cluster_->Cli({"completion", "bash"});
  ASSERT_EQ(made.exit_code, 0) << made.output;
  std::ofstream(script) << made.output;
  // Runs `shell_command` with the CLI on PATH and this cluster in its
  // environment; returns its non-empty output lines.
  auto run_shell = [&](const std::string& shell_command) {
    const std::string out = cluster_->dir() + "/complete.out";
    const std::string command =
        "env PATH=" + std::string(TRAINCTL_BIN_DIR) + ":/usr/bin:/bin" +
        " TRAINCTL_COORDINATOR=" + cluster_->address() +
        " TRAINCTL_CA_CERT=" + cluster_->ca_cert_path() +
        " TRAINCTL_TOKEN=" + cluster_->admin_token() + " " + shell_command + " > " + out +
        " 2>&1";
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    std::ifstream in(out);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) lines.push_back(line);
    }
    return lines;
  };
  // What bash would offer for `words`, the cursor in the last one.
  auto complete = [&](const std::string& words) {
    return run_shell("bash -c 'source " + script + "; COMP_WORDS=(" + words +
                     "); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _trainctl; "
                     "printf \"%s\\n\" \"${COMPREPLY[@]}\"'");
  };
  using ::testing::AllOf;
  using ::testing::Contains;
  using ::testing::ElementsAre;
  EXPECT_THAT(complete("trainctl sta"), ElementsAre("status"));
  EXPECT_THAT(complete("trainctl list --q"), ElementsAre("--quiet"));
  EXPECT_THAT(complete("trainctl watch --p"), ElementsAre("--plain"));
  EXPECT_THAT(complete("trainctl -o \"\""), ElementsAre("table", "json"));
  EXPECT_THAT(complete("trainctl status \"\""), Contains(id));
  EXPECT_THAT(complete("trainctl completion \"\""), ElementsAre("bash", "zsh"));

  // zsh: the script registers the same function through bashcompinit, whose
  // _bash_complete hands COMPREPLY to compadd; compadd matches the prefix,
  // so the function's words need only contain the right ones.
  const std::string zsh_script = cluster_->dir() + "/_trainctl";
  CliResult zsh_made = cluster_->Cli({"completion", "zsh"});
  ASSERT_EQ(zsh_made.exit_code, 0) << zsh_made.output;
  std::ofstream(zsh_script) << zsh_made.output;
  auto zsh_complete = [&](const std::string& words) {
    const std::string driver = cluster_->dir() + "/zsh-complete.zsh";
    std::ofstream(driver)
        << "autoload -U compinit && compinit -u -d " << cluster_->dir() << "/zcompdump\n"
        << "source " << zsh_script << "\n"
        << "print -r -- \"registered: ${_comps[trainctl]}\"\n"
        << "emulate sh -c 'COMP_WORDS=(" << words
        << "); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _trainctl; "
           "printf \"%s\\n\" \"${COMPREPLY[@]}\"'\n";
    return run_shell("zsh -f " + driver);
  };
  EXPECT_THAT(zsh_complete("trainctl sta"),
              AllOf(Contains("registered: _bash_complete -F _trainctl"), Contains("status")));
  EXPECT_THAT(zsh_complete("trainctl list --q"), Contains("--quiet"));
  EXPECT_THAT(zsh_complete("trainctl -o x"), AllOf(Contains("table"), Contains("json")));
  EXPECT_THAT(zsh_complete("trainctl status x"), Contains(id));
  EXPECT_EQ(cluster_->Cli({"cancel", id}).exit_code, 0);
}

// `trainctl version` asks the coordinator too: its build, uptime, workers,
// and whose token the CLI used.
TEST_F(CliUsabilityTest, VersionShowsTheCoordinatorsToo) {
  CliResult version = cluster_->Cli({"version"});
  ASSERT_EQ(version.exit_code, 0) << version.output;
  EXPECT_THAT(version.output, HasSubstr("coordinator " + cluster_->address() +
                                        ": trainctl "));
  EXPECT_THAT(version.output, HasSubstr(" workers; your token is "));
  EXPECT_THAT(version.output, HasSubstr("(admin)"));
  CliResult json = cluster_->Cli({"version", "--output", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.output;
  EXPECT_THAT(json.output, HasSubstr("\"workers\":2"));
  CliResult client = cluster_->Cli({"version", "--client"});
  EXPECT_THAT(client.output, Not(HasSubstr("coordinator ")));
}

TEST_F(CliUsabilityTest, UnreachableCoordinatorNamesTheAddressAndWhatToTry) {
  // No port is sure to be free; a unix socket path that does not exist
  // surely has no coordinator behind it.
  const std::string address = "unix:" + cluster_->dir() + "/nobody.sock";
  Process cli(cluster_->CliArgv({"status", "job-1"}, address),
              cluster_->dir() + "/unreachable.out");
  EXPECT_EQ(cli.Wait(seconds(60)), 3);
  const std::string output = ReadAll(cluster_->dir() + "/unreachable.out");
  EXPECT_THAT(output, HasSubstr("cannot reach the coordinator at " + address));
  EXPECT_THAT(output, HasSubstr("TRAINCTL_COORDINATOR"));
}

}  // namespace
}  // namespace trainctl::testing
