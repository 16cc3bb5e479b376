// The HTTP port over TLS: a real server on loopback with a self-signed
// certificate made here, talked to by OpenSSL clients, plain-HTTP and
// garbage senders and clients that stall mid-handshake; the server keeps
// serving through all of them.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/http/http_server.h"
#include "http_get.h"
#include "self_signed_cert.h"
#include "tests/common/scoped_temp_dir.h"

namespace trainctl::coordinator::http {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using trainctl::testing::HttpClientOptions;
using trainctl::testing::HttpGet;
using trainctl::testing::HttpResult;
using trainctl::testing::PemFiles;
using trainctl::testing::WriteSelfSigned;

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Reads until the server closes the connection (true) or `timeout` passes
// (false); what arrived goes to `received`.
bool WaitForClose(int fd, milliseconds timeout, std::string* received) {
  const auto deadline = steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<milliseconds>(
        deadline - steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return true;  // EOF or reset: closed by the server
    received->append(buf, n);
  }
}

using SslCtxPtr = std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)>;
using SslPtr = std::unique_ptr<SSL, decltype(&SSL_free)>;

// A TLS client context limited to versions [min_version, max_version],
// verifying nothing (what it talks to is tested, not who).
SslCtxPtr ClientContext(int min_version, int max_version) {
  SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  // Security level 0 lets the client offer versions the server must refuse
  // by itself.
  SSL_CTX_set_security_level(ctx.get(), 0);
  SSL_CTX_set_cipher_list(ctx.get(), "ALL:@SECLEVEL=0");
  SSL_CTX_set_min_proto_version(ctx.get(), min_version);
  SSL_CTX_set_max_proto_version(ctx.get(), max_version);
  return ctx;
}

// Runs a TLS handshake on `fd`; the session, or null when it failed.
SslPtr Handshake(SSL_CTX* ctx, int fd) {
  SslPtr ssl(SSL_new(ctx), SSL_free);
  SSL_set_fd(ssl.get(), fd);
  if (SSL_connect(ssl.get()) != 1) {
    ERR_clear_error();
    return SslPtr(nullptr, SSL_free);
  }
  return ssl;
}

// The first flight of a TLS client (its ClientHello records), as bytes.
std::string ClientHelloBytes() {
  SslCtxPtr ctx = ClientContext(TLS1_2_VERSION, 0);
  SslPtr ssl(SSL_new(ctx.get()), SSL_free);
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl.get(), in, out);  // ssl owns both
  EXPECT_EQ(SSL_get_error(ssl.get(), SSL_connect(ssl.get())),
            SSL_ERROR_WANT_READ);
  char* data = nullptr;
  const long size = BIO_get_mem_data(out, &data);
  return std::string(data, size);
}

class HttpTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    signal(SIGPIPE, SIG_IGN);  // a client write to a closed connection
    char tmpl[] = "/tmp/trainctl-tls-XXXXXX";
    dir_ = mkdtemp(tmpl);
    pem_ = WriteSelfSigned(dir_, "server");
    HttpServerOptions options;
    options.head_timeout_ms = 1000;
    options.tls_cert_file = pem_.cert;
    options.tls_key_file = pem_.key;
    server_ = std::make_unique<HttpServer>(
        [](const HttpRequest& r) {
          if (r.path == "/healthz") return HttpResponse{200, "text/plain", "ok\n", {}};
          if (r.path == "/big") {
            return HttpResponse{200, "text/plain", std::string(1 << 20, 'b'), {}};
          }
          return HttpResponse{404, "text/plain", "Not Found\n", {}};
        },
        options);
    absl::StatusOr<int> port = server_->Start("127.0.0.1:0");
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
  }

  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  // GET /healthz over TLS, verifying the server against its certificate.
  void ExpectServesOverTls() {
    HttpClientOptions tls;
    tls.tls = true;
    tls.ca_file = pem_.cert;
    HttpResult r = HttpGet(port_, "/healthz", tls);
    EXPECT_EQ(r.status, 200) << r.error;
    EXPECT_EQ(r.body, "ok\n");
  }

  std::string dir_;
  PemFiles pem_;
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

TEST_F(HttpTlsTest, ServesAVerifyingClientWholeResponses) {
  ExpectServesOverTls();
  HttpClientOptions tls;
  tls.tls = true;
  tls.ca_file = pem_.cert;
  HttpResult big = HttpGet(port_, "/big", tls);
  EXPECT_EQ(big.status, 200) << big.error;
  EXPECT_EQ(big.body, std::string(1 << 20, 'b'));
  EXPECT_NE(big.headers.find("Content-Length: 1048576"), std::string::npos);
  // A client that trusts another certificate refuses this server.
  tls.ca_file = WriteSelfSigned(dir_, "other").cert;
  HttpResult refused = HttpGet(port_, "/healthz", tls);
  EXPECT_EQ(refused.status, 0);
  EXPECT_NE(refused.error.find("certificate verify failed"), std::string::npos)
      << refused.error;
}

TEST_F(HttpTlsTest, PlainHttpAndGarbageAreClosedAndServingGoesOn) {
  // A TLS record header announcing 5 bytes of handshake, then no handshake.
  constexpr char kBadRecord[] = "\x16\x03\x01\x00\x05garbage after a header";
  const std::vector<std::string> not_tls = {
      "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
      "CONNECT example.com:443 HTTP/1.1\r\n\r\n",
      std::string(kBadRecord, sizeof(kBadRecord) - 1),
      std::string(3000, '\xff')};
  for (const std::string& bytes : not_tls) {
    const int fd = Connect(port_);
    ASSERT_GE(fd, 0);
    send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    std::string reply;
    EXPECT_TRUE(WaitForClose(fd, milliseconds(5000), &reply));
    // At most a TLS alert: never an HTTP answer in plain text.
    EXPECT_EQ(reply.find("HTTP/1."), std::string::npos) << reply;
    close(fd);
    ExpectServesOverTls();
  }
  // The plain-HTTP client helper gets no response either.
  EXPECT_EQ(HttpGet(port_, "/healthz", HttpClientOptions{}).status, 0);
}

TEST_F(HttpTlsTest, StalledHandshakesAreClosedAfterTheHeadTimeout) {
  // Half a ClientHello, then nothing.
  const std::string hello = ClientHelloBytes();
  ASSERT_GT(hello.size(), 50u);
  std::vector<int> stalled;
  for (int i = 0; i < 8; ++i) {
    const int fd = Connect(port_);
    ASSERT_GE(fd, 0);
    send(fd, hello.data(), hello.size() / 2, MSG_NOSIGNAL);
    stalled.push_back(fd);
  }
  // A client that finished the handshake but sends no request.
  SslCtxPtr ctx = ClientContext(TLS1_2_VERSION, 0);
  const int idle_fd = Connect(port_);
  SslPtr idle = Handshake(ctx.get(), idle_fd);
  ASSERT_NE(idle, nullptr);
  // Others are served meanwhile.
  ExpectServesOverTls();
  ExpectServesOverTls();
  for (int fd : stalled) {
    std::string reply;
    EXPECT_TRUE(WaitForClose(fd, milliseconds(10'000), &reply));
    close(fd);
  }
  // The idle TLS client is told why, over TLS.
  std::string reply;
  char buf[1024];
  for (int n; (n = SSL_read(idle.get(), buf, sizeof(buf))) > 0;) {
    reply.append(buf, n);
  }
  EXPECT_EQ(reply.rfind("HTTP/1.1 408 ", 0), 0u) << reply;
  idle.reset();
  close(idle_fd);
  ExpectServesOverTls();
}

TEST_F(HttpTlsTest, SpeaksTls12AndNewerOnly) {
  for (const auto& [version, accepted] :
       std::vector<std::pair<int, bool>>{{TLS1_VERSION, false},
                                         {TLS1_1_VERSION, false},
                                         {TLS1_2_VERSION, true},
                                         {TLS1_3_VERSION, true}}) {
    SslCtxPtr ctx = ClientContext(version, version);
    const int fd = Connect(port_);
    ASSERT_GE(fd, 0);
    SslPtr ssl = Handshake(ctx.get(), fd);
    EXPECT_EQ(ssl != nullptr, accepted) << "TLS version 0x" << std::hex << version;
    if (ssl != nullptr) {
      EXPECT_EQ(SSL_version(ssl.get()), version);
    }
    ssl.reset();
    close(fd);
  }
  ExpectServesOverTls();
}

TEST(HttpTlsOptions, RefusesUnusableCertificatesNamingTheFile) {
  const trainctl::testing::ScopedTempDir temp("trainctl-tls");
  const std::string& dir = temp.path();
  const PemFiles a = WriteSelfSigned(dir, "a");
  const PemFiles b = WriteSelfSigned(dir, "b");
  const auto start = [](const std::string& cert, const std::string& key) {
    HttpServerOptions options;
    options.tls_cert_file = cert;
    options.tls_key_file = key;
    HttpServer server([](const HttpRequest&) { return HttpResponse{}; },
                      options);
    return server.Start("127.0.0.1:0").status();
  };
  absl::Status missing = start(dir + "/missing.crt", a.key);
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.message().find(dir + "/missing.crt"), std::string::npos)
      << missing;
  absl::Status not_pem = start(a.key, a.key);  // a key is no certificate
  EXPECT_EQ(not_pem.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(not_pem.message().find(a.key), std::string::npos) << not_pem;
  absl::Status mismatch = start(a.cert, b.key);
  EXPECT_EQ(mismatch.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.message().find("does not belong"), std::string::npos)
      << mismatch;
  absl::Status half = start(a.cert, "");
  EXPECT_EQ(half.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(half.message().find("only the certificate"), std::string::npos)
      << half;
  EXPECT_TRUE(start(a.cert, a.key).ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace trainctl::coordinator::http
