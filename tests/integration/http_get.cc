#include "http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <thread>

namespace trainctl::testing {
namespace {

std::string OpenSslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    out += out.empty() ? buf : std::string("; ") + buf;
  }
  return out.empty() ? "no OpenSSL error queued" : out;
}

// A blocking loopback socket whose every send and receive waits at most
// `timeout_ms`; -1 when the connect fails.
int ConnectLoopback(int port, int timeout_ms) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{};
  tv.tv_sec = timeout_ms / 1000;
  tv.tv_usec = (timeout_ms % 1000) * 1000;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
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

// Sends `request` and reads until the server closes; "" and `error` set
// when the TLS handshake fails.
std::string ExchangeTls(int fd, const std::string& request,
                        const HttpClientOptions& options, std::string* error) {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(
      SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  if (!options.ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx.get(), options.ca_file.c_str(),
                                      nullptr) != 1) {
      *error = "cannot load " + options.ca_file + ": " + OpenSslErrors();
      return "";
    }
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  }
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), SSL_free);
  SSL_set_fd(ssl.get(), fd);
  if (!options.ca_file.empty()) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl.get()), "127.0.0.1");
  }
  if (SSL_connect(ssl.get()) != 1) {
    *error = "TLS handshake failed: " + OpenSslErrors();
    return "";
  }
  if (SSL_write(ssl.get(), request.data(), static_cast<int>(request.size())) <=
      0) {
    *error = "TLS write failed: " + OpenSslErrors();
    return "";
  }
  std::string raw;
  char buf[16384];
  for (;;) {
    const int n = SSL_read(ssl.get(), buf, sizeof(buf));
    if (n <= 0) break;  // close_notify, EOF, or the read timed out
    raw.append(buf, n);
  }
  ERR_clear_error();
  return raw;
}

std::string ExchangePlain(int fd, const std::string& request, int timeout_ms) {
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string raw;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    char buf[16384];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;  // the server closes after each response
    raw.append(buf, n);
  }
  return raw;
}

}  // namespace

HttpResult HttpGet(int port, const std::string& target,
                   const HttpClientOptions& options) {
  HttpResult result;
  const int fd = ConnectLoopback(port, options.timeout_ms);
  if (fd < 0) {
    result.error = "cannot connect to 127.0.0.1:" + std::to_string(port);
    return result;
  }
  std::string request = "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  if (!options.bearer_token.empty()) {
    request += "Authorization: Bearer " + options.bearer_token + "\r\n";
  }
  request += "\r\n";
  const std::string raw =
      options.tls ? ExchangeTls(fd, request, options, &result.error)
                  : ExchangePlain(fd, request, options.timeout_ms);
  close(fd);
  const size_t end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.1 ", 0) != 0 || end == std::string::npos) {
    if (result.error.empty()) result.error = "no HTTP response: " + raw.substr(0, 200);
    return result;
  }
  result.status = std::stoi(raw.substr(9, 3));
  result.headers = raw.substr(0, end);
  result.body = raw.substr(end + 4);
  return result;
}

int ReadPortFile(const std::string& path, int timeout_ms) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(path);
    int port = 0;
    if (in >> port && port > 0) return port;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return 0;
}

}  // namespace trainctl::testing
