// The cluster's X.509 pieces (common/pki) and its secret files
// (coordinator/auth/cluster_files, token_store).

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ctime>

#include "common/atomic_file.h"
#include "common/pki.h"
#include "coordinator/auth/cluster_files.h"
#include "coordinator/auth/token_store.h"
#include "tests/common/scoped_temp_dir.h"

namespace trainctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace auth = coordinator::auth;

struct Ca {
  std::string key, cert;
};

Ca MakeCa(const std::string& name) {
  Ca ca;
  ca.key = *pki::NewPrivateKey();
  ca.cert = *pki::SelfSignedCa(ca.key, name, 10);
  return ca;
}

TEST(PkiTest, DigestsMatchKnownVectors) {
  EXPECT_EQ(pki::Sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // RFC 4231, test case 1.
  EXPECT_EQ(pki::HmacSha256Hex(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_TRUE(pki::ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(pki::ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(pki::ConstantTimeEquals("abc", "ab"));
  const std::string a = pki::RandomToken("tcu_"), b = pki::RandomToken("tcu_");
  EXPECT_EQ(a.size(), 4u + 64u);
  EXPECT_NE(a, b);
}

TEST(PkiTest, RequestIsSignedByTheCaForTheNameItAsksFor) {
  Ca ca = MakeCa("test CA");
  const std::string key = *pki::NewPrivateKey();
  const std::string csr = *pki::NewCertificateRequest(key, "node-a");
  EXPECT_EQ(*pki::RequestCommonName(csr), "node-a");
  pki::CertificateOrder order;
  order.common_name = "node-a";
  order.valid_days = 30;
  absl::StatusOr<std::string> cert =
      pki::IssueCertificate(ca.cert, ca.key, csr, order);
  ASSERT_TRUE(cert.ok()) << cert.status();
  EXPECT_TRUE(pki::VerifyIssuedBy(*cert, ca.cert).ok());
  EXPECT_TRUE(pki::VerifyKeyMatches(*cert, key).ok());
  absl::StatusOr<pki::CertificateInfo> info = pki::ReadCertificate(*cert);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->common_name, "node-a");
  EXPECT_NEAR(double(info->not_after_unix - time(nullptr)), 30 * 86400.0, 60.0);

  // Another CA's certificate, another key: refused with the reason.
  Ca other = MakeCa("other CA");
  absl::Status foreign = pki::VerifyIssuedBy(*cert, other.cert);
  EXPECT_FALSE(foreign.ok());
  EXPECT_THAT(std::string(foreign.message()), HasSubstr("does not verify"));
  EXPECT_FALSE(pki::VerifyKeyMatches(*cert, *pki::NewPrivateKey()).ok());
}

TEST(PkiTest, TamperedOrGarbageInputIsRefused) {
  const std::string key = *pki::NewPrivateKey();
  std::string csr = *pki::NewCertificateRequest(key, "node-a");
  EXPECT_FALSE(pki::RequestCommonName("garbage").ok());
  EXPECT_FALSE(pki::ReadCertificate("-----BEGIN CERTIFICATE-----\nAAAA\n").ok());
  // Flip one character of the base64 body: parse or signature check fails.
  csr[csr.size() / 2] = csr[csr.size() / 2] == 'A' ? 'B' : 'A';
  EXPECT_FALSE(pki::RequestCommonName(csr).ok());
  EXPECT_FALSE(pki::NewCertificateRequest(key, std::string(65, 'x')).ok());
}

class ClusterFilesTest : public ::testing::Test {
 protected:
  static mode_t Mode(const std::string& path) {
    struct stat st;
    EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
    return st.st_mode & 0777;
  }
  const testing::ScopedTempDir temp_{"trainctl-pki"};
  const std::string dir_ = temp_.path();
};

TEST_F(ClusterFilesTest, InitMakesPrivateFilesOnceAndKeepsThem) {
  absl::StatusOr<auth::InitReport> first = auth::InitCluster(dir_, {"10.1.2.3"});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->created.size(), 5u);  // CA, server, three secrets
  auth::ClusterFiles files(dir_);
  for (const std::string& secret :
       {files.ca_key, files.server_key, files.tokens, files.admin_token,
        files.join_token, files.rendezvous_key}) {
    EXPECT_EQ(Mode(secret), 0600u) << secret;
  }
  EXPECT_EQ(Mode(dir_ + "/tls"), 0700u);
  const std::string ca = *ReadWholeFile(files.ca_cert);
  EXPECT_TRUE(pki::VerifyIssuedBy(*ReadWholeFile(files.server_cert), ca).ok());
  // The token file holds digests, never the tokens.
  const std::string tokens = *ReadWholeFile(files.tokens);
  EXPECT_EQ(tokens.find(first->admin_token), std::string::npos);
  EXPECT_THAT(tokens, HasSubstr(pki::Sha256Hex(first->admin_token)));

  absl::StatusOr<auth::InitReport> again = auth::InitCluster(dir_, {});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->created.empty());
  EXPECT_EQ(again->admin_token, first->admin_token);
  EXPECT_EQ(*ReadWholeFile(files.ca_cert), ca);
}

TEST_F(ClusterFilesTest, TokensResolveToTheirHolderAndRevokingTakesEffect) {
  ASSERT_TRUE(auth::InitCluster(dir_, {}).ok());
  auth::ClusterFiles files(dir_);
  auth::TokenStore store(files.tokens);
  const std::string admin = *ReadWholeFile(files.admin_token);
  absl::StatusOr<auth::TokenHolder> holder =
      store.Lookup(admin.substr(0, admin.find('\n')));
  ASSERT_TRUE(holder.ok()) << holder.status();
  EXPECT_EQ(holder->role, auth::TokenRole::kAdmin);

  const std::string alice = *auth::AddToken(dir_, auth::TokenRole::kUser, "alice");
  holder = store.Lookup(alice);  // picked up without a restart
  ASSERT_TRUE(holder.ok()) << holder.status();
  EXPECT_EQ(holder->name, "alice");
  EXPECT_EQ(holder->role, auth::TokenRole::kUser);
  EXPECT_EQ(store.Lookup("tcu_nonsense").status().code(),
            absl::StatusCode::kUnauthenticated);

  // Revoke: drop alice's line (and add a malformed one, which is skipped).
  std::string text = *ReadWholeFile(files.tokens);
  const size_t at = text.find("user alice ");
  ASSERT_NE(at, std::string::npos);
  text.erase(at, text.find('\n', at) + 1 - at);
  text += "user bob not-a-digest\n";
  ASSERT_TRUE(WriteFileAtomically(files.tokens, text).ok());
  EXPECT_EQ(store.Lookup(alice).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(store.Lookup(admin.substr(0, admin.find('\n'))).ok());
}

// A join token for one Slurm allocation: refused once it expires, so the
// copy jobs' code could read (they run as the same user) is worth nothing.
TEST_F(ClusterFilesTest, AnExpiredTokenIsRefusedSayingSo) {
  ASSERT_TRUE(auth::InitCluster(dir_, {}).ok());
  auth::ClusterFiles files(dir_);
  auth::TokenStore store(files.tokens);
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  const std::string later =
      *auth::AddToken(dir_, auth::TokenRole::kJoin, "slurm-a", now + 86400);
  const std::string past =
      *auth::AddToken(dir_, auth::TokenRole::kJoin, "slurm-b", 1'000'000'000);
  EXPECT_THAT(*ReadWholeFile(files.tokens),
              HasSubstr(" expires=" + std::to_string(now + 86400) + "\n"));
  absl::StatusOr<auth::TokenHolder> holder = store.Lookup(later);
  ASSERT_TRUE(holder.ok()) << holder.status();
  EXPECT_EQ(holder->role, auth::TokenRole::kJoin);
  EXPECT_EQ(holder->expires_unix_s, now + 86400);
  absl::Status expired = store.Lookup(past).status();
  EXPECT_EQ(expired.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(expired.message()),
              HasSubstr("the token of 'slurm-b' expired at 2001-09-09"));
  EXPECT_THAT(std::string(expired.message()), Not(HasSubstr(past)));
  EXPECT_TRUE(
      expired.GetPayload(auth::TokenStore::kExpiredPayload).has_value());
  // A malformed expiry skips the line, as any malformed line.
  std::string text = *ReadWholeFile(files.tokens);
  const size_t at = text.find(" expires=" + std::to_string(now + 86400));
  text.replace(at, text.find('\n', at) - at, " expires=soon");
  ASSERT_TRUE(WriteFileAtomically(files.tokens, text).ok());
  EXPECT_EQ(store.Lookup(later).status().code(),
            absl::StatusCode::kUnauthenticated);
}

TEST(TokenLifetimeTest, ParsesWholeUnitsAndNamesTheFlagOtherwise) {
  EXPECT_EQ(*auth::ParseTokenLifetime("--expires-in", "90s"), 90);
  EXPECT_EQ(*auth::ParseTokenLifetime("--expires-in", "30m"), 1800);
  EXPECT_EQ(*auth::ParseTokenLifetime("--expires-in", "2h"), 7200);
  EXPECT_EQ(*auth::ParseTokenLifetime("--expires-in", "7d"), 7 * 86400);
  for (const std::string bad : {"", "h", "2", "-1h", "0d", "1.5h", "2w",
                                "99999d"}) {
    absl::StatusOr<int64_t> parsed =
        auth::ParseTokenLifetime("--expires-in", bad);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
    EXPECT_THAT(std::string(parsed.status().message()),
                HasSubstr("--expires-in '" + bad + "'"));
  }
}

TEST_F(ClusterFilesTest, NamesAreChecked) {
  EXPECT_TRUE(auth::CheckName("name", "alice@lab-1.x_y").ok());
  for (const std::string& bad :
       std::vector<std::string>{"", "a b", "a/b", std::string(65, 'a'), "é"}) {
    absl::Status s = auth::CheckName("name", bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_THAT(std::string(s.message()), HasSubstr("name '"));
  }
  EXPECT_FALSE(auth::AddToken(dir_, auth::TokenRole::kUser, "a b").ok());
}

}  // namespace
}  // namespace trainctl
