#pragma once

// One client connection of the HTTP port, plain or TLS, behind the same
// narrow interface, so the server's poll and handler loops do not care which
// it is. The TLS side is OpenSSL 3 (libssl), kept out of every other header.
//
// Lifecycle: the poll thread accepts, runs Handshake() and ReadSome() on the
// non-blocking socket until a request head is complete, then hands the
// Connection to a handler thread, which calls MakeBlocking() and WriteAll().
// A Connection is used by one thread at a time; the hand-over goes through
// the server's mutex. Closing (the destructor, or Close()) frees the TLS
// session and the socket.

#include <openssl/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace trainctl::coordinator::http {

// The server's TLS settings: its certificate chain and private key, TLS 1.2
// as the oldest version, forward-secret AEAD ciphers only, "http/1.1" when
// the client offers ALPN. Immutable once loaded; thread-safe.
class TlsServerContext {
 public:
  // Loads the PEM certificate chain (the server's certificate first) and
  // its PEM private key. INVALID_ARGUMENT naming the file and OpenSSL's
  // reason when one is missing, unreadable, not PEM, or the key does not
  // match the certificate.
  static absl::StatusOr<std::unique_ptr<TlsServerContext>> Load(
      const std::string& cert_file, const std::string& key_file);
  ~TlsServerContext();
  TlsServerContext(const TlsServerContext&) = delete;
  TlsServerContext& operator=(const TlsServerContext&) = delete;

  SSL_CTX* ctx() const { return ctx_; }

 private:
  explicit TlsServerContext(SSL_CTX* ctx) : ctx_(ctx) {}
  SSL_CTX* ctx_;
};

class Connection {
 public:
  // What a non-blocking step ended with.
  enum class Io {
    kDone,       // finished (handshake complete, or the read limit reached)
    kWantRead,   // call again once the socket is readable
    kWantWrite,  // call again once the socket is writable
    kClosed,     // the client closed its side
    kFailed,     // a socket error, or TLS the server refuses (see error())
  };

  Connection() = default;
  // Takes `fd` (non-blocking); with `tls` the connection speaks TLS as a
  // server, and Handshake() must finish before ReadSome().
  Connection(int fd, const TlsServerContext* tls);
  ~Connection() { Close(); }
  Connection(Connection&& other) noexcept;
  Connection& operator=(Connection&& other) noexcept;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Advances the TLS handshake without blocking; kDone at once for plain
  // connections. On kFailed, error() says why and plain_http_sent() whether
  // the client spoke plain HTTP to this TLS port.
  Io Handshake();
  // Appends what the client has sent, at most `max_bytes`, without blocking:
  // kWantRead/kWantWrite once nothing more is there now, kDone when
  // `max_bytes` were read.
  Io ReadSome(size_t max_bytes, std::string* out);
  // Sends `bytes` once, without blocking; whatever does not fit is dropped.
  // For short error answers to clients that may not be reading.
  void SendBestEffort(const std::string& bytes);
  // Switches the socket to blocking with every send/receive bounded by
  // `timeout_ms`, so a client that stops reading holds a thread for at most
  // that long per write.
  void MakeBlocking(int64_t timeout_ms);
  // Writes all of `bytes`; false when the client left, a write timed out,
  // or (deadline_ms > 0) the steady clock passed deadline_ms before the end.
  bool WriteAll(const std::string& bytes, int64_t deadline_ms = 0);
  // Ends TLS (close_notify, not waiting for the client's), ends the sending
  // side and closes the socket. Idempotent.
  void Close();

  const std::string& error() const { return error_; }
  bool plain_http_sent() const { return plain_http_sent_; }

 private:
  // kWantRead/kWantWrite/kClosed/kFailed for a TLS call that returned `rc`.
  Io TlsOutcome(int rc, const char* what);

  int fd_ = -1;
  SSL* ssl_ = nullptr;
  bool established_ = false;
  bool plain_http_sent_ = false;
  bool broken_ = false;  // a fatal TLS or socket error happened
  std::string error_;
};

}  // namespace trainctl::coordinator::http
