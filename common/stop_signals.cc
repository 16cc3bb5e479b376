#include "common/stop_signals.h"

#include <pthread.h>

namespace trainctl {

sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return signals;
}

int WaitForStopSignal(const sigset_t& signals) {
  int number = 0;
  sigwait(&signals, &number);
  return number;
}

}  // namespace trainctl
