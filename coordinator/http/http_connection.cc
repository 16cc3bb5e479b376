#include "coordinator/http/http_connection.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace trainctl::coordinator::http {
namespace {

// TLS 1.2 suites with forward secrecy and an AEAD; TLS 1.3's are all such.
constexpr char kTls12Ciphers[] = "ECDHE+AESGCM:ECDHE+CHACHA20";
// ALPN wire format: the one protocol this server speaks.
constexpr unsigned char kAlpnHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

// The reasons on this thread's OpenSSL error queue, oldest first; empties
// it, so a later call does not report stale errors.
std::string DrainOpenSslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(e);
    absl::StrAppend(&out, out.empty() ? "" : "; ",
                    reason != nullptr ? reason : "unknown OpenSSL error");
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

int SelectAlpn(SSL*, const unsigned char** out, unsigned char* outlen,
               const unsigned char* in, unsigned int inlen, void*) {
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, kAlpnHttp11,
                            sizeof(kAlpnHttp11), in,
                            inlen) != OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;  // no ALPN then: HTTP/1.1 all the same
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TlsServerContext>> TlsServerContext::Load(
    const std::string& cert_file, const std::string& key_file) {
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) {
    return absl::InternalError(
        absl::StrCat("cannot create a TLS context: ", DrainOpenSslErrors()));
  }
  std::unique_ptr<TlsServerContext> context(new TlsServerContext(ctx));
  if (SSL_CTX_use_certificate_chain_file(ctx, cert_file.c_str()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TLS certificate chain ", cert_file,
        ": cannot load it as PEM certificates: ", DrainOpenSslErrors()));
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, key_file.c_str(), SSL_FILETYPE_PEM) !=
      1) {
    // OpenSSL compares the key with the certificate while loading it.
    if (ERR_GET_REASON(ERR_peek_last_error()) != X509_R_KEY_VALUES_MISMATCH) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TLS private key ", key_file, ": cannot load it as a PEM key: ",
          DrainOpenSslErrors()));
    }
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TLS private key ", key_file, " does not belong to the certificate in ",
        cert_file, ": ", DrainOpenSslErrors()));
  }
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_cipher_list(ctx, kTls12Ciphers);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION |
                               SSL_OP_CIPHER_SERVER_PREFERENCE |
                               SSL_OP_NO_COMPRESSION);
  // Idle connections waiting for their head hold no 34 KiB read buffers.
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_alpn_select_cb(ctx, SelectAlpn, nullptr);
  return context;
}

TlsServerContext::~TlsServerContext() { SSL_CTX_free(ctx_); }

Connection::Connection(int fd, const TlsServerContext* tls) : fd_(fd) {
  if (tls == nullptr) {
    established_ = true;
    return;
  }
  ssl_ = SSL_new(tls->ctx());
  if (ssl_ == nullptr || SSL_set_fd(ssl_, fd_) != 1) {
    error_ = "cannot start a TLS session: " + DrainOpenSslErrors();
    SSL_free(ssl_);
    ssl_ = nullptr;
    established_ = false;
    // Handshake() reports it.
    return;
  }
  SSL_set_accept_state(ssl_);
}

Connection::Connection(Connection&& other) noexcept { *this = std::move(other); }

Connection& Connection::operator=(Connection&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
    ssl_ = std::exchange(other.ssl_, nullptr);
    established_ = std::exchange(other.established_, false);
    plain_http_sent_ = std::exchange(other.plain_http_sent_, false);
    broken_ = std::exchange(other.broken_, false);
    error_ = std::move(other.error_);
  }
  return *this;
}

Connection::Io Connection::TlsOutcome(int rc, const char* what) {
  const int err = SSL_get_error(ssl_, rc);
  switch (err) {
    case SSL_ERROR_WANT_READ:
      return Io::kWantRead;
    case SSL_ERROR_WANT_WRITE:
      return Io::kWantWrite;
    case SSL_ERROR_ZERO_RETURN:
      return Io::kClosed;
    case SSL_ERROR_SYSCALL:
      broken_ = true;
      // errno 0 is an EOF the peer sent without close_notify.
      if (errno == 0 || errno == ECONNRESET || errno == EPIPE) {
        ERR_clear_error();
        return Io::kClosed;
      }
      error_ = absl::StrCat(what, ": ", strerror(errno));
      ERR_clear_error();
      return Io::kFailed;
    default: {
      const int reason = ERR_GET_REASON(ERR_peek_error());
      plain_http_sent_ = reason == SSL_R_HTTP_REQUEST ||
                         reason == SSL_R_HTTPS_PROXY_REQUEST;
      error_ = absl::StrCat(what, ": ", DrainOpenSslErrors());
      broken_ = true;
      return Io::kFailed;
    }
  }
}

Connection::Io Connection::Handshake() {
  if (established_) return Io::kDone;
  if (ssl_ == nullptr) return Io::kFailed;  // SSL_new failed; error_ says so
  ERR_clear_error();
  errno = 0;
  const int rc = SSL_do_handshake(ssl_);
  if (rc == 1) {
    established_ = true;
    return Io::kDone;
  }
  return TlsOutcome(rc, "TLS handshake");
}

Connection::Io Connection::ReadSome(size_t max_bytes, std::string* out) {
  char buf[4096];
  size_t read = 0;
  while (read < max_bytes) {
    const size_t want = std::min(sizeof(buf), max_bytes - read);
    if (ssl_ != nullptr) {
      ERR_clear_error();
      errno = 0;
      const int n = SSL_read(ssl_, buf, static_cast<int>(want));
      if (n <= 0) return TlsOutcome(n, "TLS read");
      out->append(buf, n);
      read += n;
      continue;
    }
    const ssize_t n = recv(fd_, buf, want, 0);
    if (n > 0) {
      out->append(buf, n);
      read += n;
      continue;
    }
    if (n == 0) return Io::kClosed;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Io::kWantRead;
    if (errno == EINTR) continue;
    if (errno == ECONNRESET) return Io::kClosed;
    error_ = absl::StrCat("read: ", strerror(errno));
    return Io::kFailed;
  }
  return Io::kDone;
}

void Connection::SendBestEffort(const std::string& bytes) {
  if (fd_ < 0) return;
  if (ssl_ == nullptr) {
    (void)!send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    return;
  }
  // Nothing can be said to a TLS client before the handshake finished.
  if (!established_) return;
  ERR_clear_error();
  (void)SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size()));
  ERR_clear_error();
}

void Connection::MakeBlocking(int64_t timeout_ms) {
  const int flags = fcntl(fd_, F_GETFL);
  fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
  timeval tv{};
  tv.tv_sec = timeout_ms / 1000;
  tv.tv_usec = (timeout_ms % 1000) * 1000;
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  // TLS may read while writing (a key update); bounded the same way.
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

namespace {

int64_t MonotonicMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

bool Connection::WriteAll(const std::string& bytes, int64_t deadline_ms) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    // A client that reads a byte every few seconds never trips the
    // per-send timeout; the whole response has a deadline too.
    if (deadline_ms > 0 && MonotonicMs() > deadline_ms) {
      broken_ = true;
      return false;
    }
    if (ssl_ != nullptr) {
      ERR_clear_error();
      const int n = SSL_write(ssl_, bytes.data() + sent,
                              static_cast<int>(bytes.size() - sent));
      if (n <= 0) {
        ERR_clear_error();
        broken_ = true;  // no close_notify after a failed write
        return false;  // timeout or the client left: give up on it
      }
      sent += n;
      continue;
    }
    const ssize_t n =
        send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += n;
  }
  return true;
}

void Connection::Close() {
  if (ssl_ != nullptr) {
    // One close_notify, without waiting for the client's: the response's
    // end is the connection's end (Connection: close).
    // Never after a fatal error (OpenSSL forbids it).
    if (established_ && !broken_) (void)SSL_shutdown(ssl_);
    SSL_free(ssl_);
    ssl_ = nullptr;
    ERR_clear_error();
  }
  if (fd_ >= 0) {
    shutdown(fd_, SHUT_WR);
    close(fd_);
    fd_ = -1;
  }
}

}  // namespace trainctl::coordinator::http
