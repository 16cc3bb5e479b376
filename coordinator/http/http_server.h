#pragma once

// A small HTTP/1.1 server for the coordinator's observability port
// (/metrics, /healthz, the dashboard). GET and HEAD only, one request per
// connection (Connection: close).
//
// Why this shape: one poll thread reads every connection's request head
// without blocking, so slow, half-open or garbage-sending clients cost a
// file descriptor each and never a thread; only complete, parsed requests
// reach the few handler threads. Every limit is fixed: head size, header
// count, open connections, queued requests, the time to send a head and
// the time to write a response.
//
// With a certificate and key the port speaks HTTPS only (TLS 1.2 or newer):
// the poll thread runs each TLS handshake without blocking, under the same
// head timeout, so a client that stalls mid-handshake costs only its file
// descriptor too; plain HTTP sent to it gets the connection closed.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <memory>

#include "absl/status/statusor.h"
#include "coordinator/http/http_connection.h"
#include "coordinator/http/http_request.h"

namespace trainctl::coordinator::http {

struct HttpServerOptions {
  int handler_threads = 4;
  int max_connections = 256;     // more are closed at once
  // Of those, from one client address: one client cannot take them all
  // (the k8s liveness probe is on this port).
  int max_connections_per_client = 16;
  size_t max_queued = 64;        // parsed requests waiting for a handler
  // To finish the TLS handshake and send the whole request head.
  int64_t head_timeout_ms = 10'000;
  int64_t write_timeout_ms = 10'000;  // per send() of the response
  // For a whole response: a client reading a byte every few seconds frees
  // the handler thread after this long.
  int64_t response_timeout_ms = 30'000;
  // Served by a thread of their own, never queued behind the handler
  // threads (the Kubernetes probes' /healthz).
  std::vector<std::string> priority_paths = {"/healthz"};
  // PEM certificate chain (the server's first) and private key; with both
  // the port serves HTTPS only. Both empty (the default): plain HTTP.
  std::string tls_cert_file;
  std::string tls_key_file;
};

// Runs on a handler thread; must not throw (an exception becomes a 500).
using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

class HttpServer {
 public:
  explicit HttpServer(HttpHandler handler, HttpServerOptions options = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds "HOST:PORT" ("[::1]:PORT" for IPv6; port 0 picks a free port),
  // starts the threads and returns the bound port. Once only. With TLS
  // options, INVALID_ARGUMENT naming the file when the certificate or key
  // cannot be used (only one of them given, unreadable, not PEM, not a
  // pair); nothing is bound then.
  absl::StatusOr<int> Start(const std::string& listen);
  // Stops accepting, closes every open connection and joins the threads;
  // a handler already running finishes first. Idempotent.
  void Shutdown();

 private:
  struct Work {
    Connection conn;
    int error_status = 0;  // answer with this instead of calling the handler
    HttpRequest request;
  };

  void PollLoop();
  void HandlerLoop();
  void PriorityLoop();  // serves priority_queue_ only
  void Serve(Work& work);
  // For a full queue: answers 503 from the poll thread, without blocking.
  void Enqueue(Work work);
  // Logs a refused TLS handshake, once per kind per server: a scanner or a
  // misconfigured client must not flood the log.
  void LogHandshakeFailure(const Connection& conn);

  const HttpHandler handler_;
  const HttpServerOptions options_;
  std::unique_ptr<TlsServerContext> tls_;  // null: plain HTTP
  bool logged_plain_http_ = false;         // poll thread only
  bool logged_handshake_failure_ = false;  // poll thread only
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  bool started_ = false;
  bool stopped_ = false;

  std::mutex mu_;
  std::condition_variable work_ready_;
  std::condition_variable priority_ready_;
  std::deque<Work> queue_;           // GUARDED_BY(mu_)
  std::deque<Work> priority_queue_;  // GUARDED_BY(mu_)
  bool stopping_ = false;   // GUARDED_BY(mu_)

  std::thread poll_thread_;
  std::vector<std::thread> handler_threads_;  // the last: priority paths
};

}  // namespace trainctl::coordinator::http
