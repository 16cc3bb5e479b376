#include "coordinator/http/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace trainctl::coordinator::http {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Best effort, never blocks: used from the poll thread for short error
// answers to clients that may not be reading.
void SendErrorBestEffort(Connection& conn, int status) {
  HttpResponse response;
  response.status = status;
  response.body = absl::StrCat(ReasonPhrase(status), "\n");
  conn.SendBestEffort(SerializeResponse(response, false));
}

// A client that closes early makes a write raise SIGPIPE; OpenSSL writes
// with write(2), which has no MSG_NOSIGNAL. Blocked in the server's own
// threads, the signal stays pending there and is dropped with the thread,
// whatever the process does with SIGPIPE.
void BlockSigpipeInThisThread() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

// Splits "host:port" / "[v6]:port"; an empty host means every interface.
absl::Status SplitHostPort(const std::string& listen, std::string* host,
                           std::string* port) {
  const size_t colon = listen.rfind(':');
  int port_number = 0;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(listen.substr(colon + 1), &port_number) ||
      port_number < 0 || port_number > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http-listen ", listen, ": expected HOST:PORT, e.g. 127.0.0.1:7071"));
  }
  *host = listen.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  *port = std::to_string(port_number);
  return absl::OkStatus();
}

}  // namespace

HttpServer::HttpServer(HttpHandler handler, HttpServerOptions options)
    : handler_(std::move(handler)), options_(options) {}

HttpServer::~HttpServer() { Shutdown(); }

absl::StatusOr<int> HttpServer::Start(const std::string& listen) {
  if (started_) return absl::FailedPreconditionError("HTTP server started twice");
  std::string host, port;
  if (absl::Status s = SplitHostPort(listen, &host, &port); !s.ok()) return s;
  if (options_.tls_cert_file.empty() != options_.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "HTTPS needs both a certificate chain and a private key file; got "
        "only the " +
        std::string(options_.tls_cert_file.empty() ? "key" : "certificate"));
  }
  if (!options_.tls_cert_file.empty()) {
    absl::StatusOr<std::unique_ptr<TlsServerContext>> tls =
        TlsServerContext::Load(options_.tls_cert_file, options_.tls_key_file);
    if (!tls.ok()) return tls.status();
    tls_ = *std::move(tls);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(),
                           &hints, &found);
      rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http-listen ", listen, ": ", gai_strerror(rc)));
  }
  std::string last_error = "no address";
  for (addrinfo* a = found; a != nullptr && listen_fd_ < 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK |
                                            SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
      listen_fd_ = fd;
    } else {
      last_error = strerror(errno);
      close(fd);
    }
  }
  freeaddrinfo(found);
  if (listen_fd_ < 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen for HTTP on ", listen, ": ", last_error));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  const int bound_port =
      bound.ss_family == AF_INET6
          ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
          : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  if (pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    close(listen_fd_);
    listen_fd_ = -1;
    return absl::InternalError("cannot create the HTTP server's wake pipe");
  }
  started_ = true;
  poll_thread_ = std::thread([this] {
    BlockSigpipeInThisThread();
    PollLoop();
  });
  handler_threads_.emplace_back([this] { PriorityLoop(); });
  for (int i = 0; i < options_.handler_threads; ++i) {
    handler_threads_.emplace_back([this] {
      BlockSigpipeInThisThread();
      HandlerLoop();
    });
  }
  return bound_port;
}

void HttpServer::Shutdown() {
  if (!started_ || stopped_) return;
  stopped_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  priority_ready_.notify_all();
  (void)!write(wake_pipe_[1], "x", 1);
  poll_thread_.join();
  for (auto& t : handler_threads_) t.join();
  queue_.clear();  // closes their connections
  priority_queue_.clear();
  close(wake_pipe_[0]);
  close(wake_pipe_[1]);
}

namespace {

// "10.0.0.7" or "::1": one client, whatever its port.
std::string PeerAddress(const sockaddr_storage& address) {
  char text[INET6_ADDRSTRLEN] = "";
  if (address.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(address).sin_addr,
              text, sizeof(text));
  } else if (address.ss_family == AF_INET6) {
    inet_ntop(AF_INET6,
              &reinterpret_cast<const sockaddr_in6&>(address).sin6_addr, text,
              sizeof(text));
  }
  return text;
}

}  // namespace

void HttpServer::PollLoop() {
  struct Conn {
    Connection conn;
    std::string peer;  // the client's address, without the port
    std::string head;
    int64_t deadline_ms = 0;
    short events = POLLIN;  // what the handshake or the read waits for
  };
  std::map<int, Conn> conns;
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    fds.push_back({wake_pipe_[0], POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    int64_t next_deadline = NowMs() + 1000;
    for (const auto& [fd, conn] : conns) {
      fds.push_back({fd, conn.events, 0});
      next_deadline = std::min(next_deadline, conn.deadline_ms);
    }
    const int wait_ms = static_cast<int>(
        std::max<int64_t>(0, next_deadline - NowMs()));
    if (poll(fds.data(), fds.size(), wait_ms) < 0 && errno != EINTR) {
      TLOG_ERROR << "HTTP poll failed: " << strerror(errno);
      break;
    }
    if (fds[0].revents != 0) break;  // Shutdown()
    if (fds[1].revents & POLLIN) {
      for (;;) {
        sockaddr_storage address{};
        socklen_t length = sizeof(address);
        const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&address),
                               &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;  // EAGAIN, or a client that already left
        Connection conn(fd, tls_.get());
        const std::string peer = PeerAddress(address);
        int from_peer = 0;
        for (const auto& [other_fd, other] : conns) from_peer += other.peer == peer;
        if (static_cast<int>(conns.size()) >= options_.max_connections ||
            from_peer >= options_.max_connections_per_client) {
          SendErrorBestEffort(conn, 503);  // nothing before a TLS handshake
          continue;
        }
        Conn& c = conns[fd];
        c.conn = std::move(conn);
        c.peer = peer;
        c.deadline_ms = NowMs() + options_.head_timeout_ms;
      }
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      auto it = conns.find(fds[i].fd);
      Conn& c = it->second;
      Connection::Io io = c.conn.Handshake();
      if (io == Connection::Io::kDone) {
        // Read what is there (TLS may hold decrypted bytes already), at most
        // one byte past the limit.
        io = c.conn.ReadSome(kMaxHeadBytes + 1 - c.head.size(), &c.head);
      } else if (io == Connection::Io::kFailed) {
        LogHandshakeFailure(c.conn);
      }
      c.events = io == Connection::Io::kWantWrite ? POLLOUT : POLLIN;
      // EOF or an error before a full head: nobody to answer.
      const bool drop =
          io == Connection::Io::kClosed || io == Connection::Io::kFailed;
      const size_t end = FindHeadEnd(c.head);
      if (end == std::string::npos && !drop && c.head.size() <= kMaxHeadBytes) {
        continue;  // wait for more
      }
      Work work;
      if (end != std::string::npos) {
        work.error_status = ParseRequestHead(
            absl::string_view(c.head).substr(0, end), &work.request);
      } else if (drop) {
        conns.erase(it);  // closes it
        continue;
      } else {
        work.error_status = 431;
      }
      work.conn = std::move(c.conn);
      conns.erase(it);
      Enqueue(std::move(work));
    }
    // Clients too slow to finish the handshake and send a head get a 408
    // (when TLS is up) and are closed.
    const int64_t now = NowMs();
    for (auto it = conns.begin(); it != conns.end();) {
      if (it->second.deadline_ms <= now) {
        SendErrorBestEffort(it->second.conn, 408);
        it = conns.erase(it);
      } else {
        ++it;
      }
    }
  }
  conns.clear();
  close(listen_fd_);
  listen_fd_ = -1;
}

void HttpServer::LogHandshakeFailure(const Connection& conn) {
  if (conn.plain_http_sent()) {
    if (logged_plain_http_) return;
    logged_plain_http_ = true;
    TLOG_WARNING << "a client sent plain HTTP to the HTTPS port; closed it "
                    "(use https:// URLs; further ones are not logged)";
    return;
  }
  if (logged_handshake_failure_) return;
  logged_handshake_failure_ = true;
  TLOG_WARNING << "refused a TLS connection on the HTTPS port: "
               << conn.error() << " (further ones are not logged)";
}

void HttpServer::Enqueue(Work work) {
  const bool priority =
      work.error_status == 0 &&
      std::find(options_.priority_paths.begin(), options_.priority_paths.end(),
                work.request.path) != options_.priority_paths.end();
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::deque<Work>& queue = priority ? priority_queue_ : queue_;
    if (queue.size() < options_.max_queued) {
      queue.push_back(std::move(work));
      if (priority) {
        priority_ready_.notify_one();
      } else {
        work_ready_.notify_one();
      }
      return;
    }
  }
  SendErrorBestEffort(work.conn, 503);
}

void HttpServer::PriorityLoop() {
  for (;;) {
    Work work;
    {
      std::unique_lock<std::mutex> lock(mu_);
      priority_ready_.wait(
          lock, [this] { return stopping_ || !priority_queue_.empty(); });
      if (stopping_) return;
      work = std::move(priority_queue_.front());
      priority_queue_.pop_front();
    }
    Serve(work);
  }
}

void HttpServer::HandlerLoop() {
  for (;;) {
    Work work;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    Serve(work);
  }
}

void HttpServer::Serve(Work& work) {
  HttpResponse response;
  if (work.error_status != 0) {
    response.status = work.error_status;
    response.body = absl::StrCat(ReasonPhrase(work.error_status), "\n");
  } else {
    try {
      response = handler_(work.request);
    } catch (const std::exception& e) {
      TLOG_ERROR << "HTTP handler for " << work.request.path
                 << " threw: " << e.what();
      response = HttpResponse{500, "text/plain; charset=utf-8",
                              "Internal Server Error\n", {}};
    }
  }
  const std::string bytes =
      SerializeResponse(response, work.request.method == "HEAD");
  // Blocking writes bounded by SO_SNDTIMEO: a client that stops reading
  // holds this thread for at most write_timeout_ms per send.
  work.conn.MakeBlocking(options_.write_timeout_ms);
  // false: the client left or was too slow; nothing to do
  work.conn.WriteAll(bytes, NowMs() + options_.response_timeout_ms);
  work.conn.Close();
}

}  // namespace trainctl::coordinator::http
