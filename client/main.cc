// trainctl: command-line client of trainctl-coordinator.

#include <iostream>

#include "client/commands.h"

int main(int argc, char** argv) {
  return trainctl::client::RunCli(argc, argv, std::cout, std::cerr);
}
