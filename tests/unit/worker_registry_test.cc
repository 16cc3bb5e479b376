// What a registration may claim: the registry refuses, naming the field,
// anything it would print raw (`trainctl workers`, the dashboard, logs).

#include "coordinator/worker_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tests/unit/job_manager_fixture.h"

namespace trainctl::coordinator {
namespace {

using ::testing::HasSubstr;

v1::RegisterRequest Registration(const std::string& name,
                                 const std::string& host) {
  v1::RegisterRequest reg;
  reg.set_name(name);
  reg.set_collective_host(host);
  reg.set_slots(2);
  return reg;
}

class WorkerRegistryTest : public ::testing::Test {
 protected:
  absl::Status Register(const v1::RegisterRequest& reg) {
    return registry_.Register(reg, std::make_shared<FakeAgentLink>(), 1'000);
  }
  WorkerRegistry registry_{10'000};
};

TEST_F(WorkerRegistryTest, ANameOrHostWithControlCharactersIsRefused) {
  for (const auto& [reg, field] :
       {std::pair{Registration("node\x1b[2J", "10.0.0.1"), "register.name"},
        std::pair{Registration("node-a", "10.0.0.1\nFAKE LOG LINE"),
                  "register.collective_host"},
        std::pair{Registration("node\xc2\x9b" "31m", "10.0.0.1"),
                  "register.name"}}) {
    absl::Status refused = Register(reg);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(refused.message()),
                HasSubstr(std::string(field) + ": must be UTF-8 without "
                                               "control characters"));
  }
  v1::RegisterRequest device = Registration("node-a", "10.0.0.1");
  device.add_devices("cuda:0\x07");
  EXPECT_THAT(std::string(Register(device).message()),
              HasSubstr("register.devices: must be UTF-8 without"));
  EXPECT_TRUE(registry_.Describe().empty());
  EXPECT_TRUE(Register(Registration("node-a.rack_7@dc", "10.0.0.1")).ok());
}

TEST_F(WorkerRegistryTest, ALongNameIsRefused) {
  absl::Status refused = Register(
      Registration(std::string(kMaxWorkerStringBytes + 1, 'n'), "10.0.0.1"));
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("register.name: is 256 bytes; at most 255"));
  EXPECT_TRUE(
      Register(Registration(std::string(kMaxWorkerStringBytes, 'n'), "h")).ok());
}

TEST_F(WorkerRegistryTest, ALeaseRunsOutOnTheTimesTheCallerGives) {
  ASSERT_TRUE(Register(Registration("node-a", "10.0.0.1")).ok());
  ASSERT_TRUE(Register(Registration("node-b", "10.0.0.2")).ok());
  registry_.Heartbeat("node-b", 6'000);  // registered at 1 s
  EXPECT_TRUE(registry_.Expired(11'000).empty());  // exactly the lease
  EXPECT_EQ(registry_.Expired(11'001), std::vector<std::string>{"node-a"});
  EXPECT_EQ(registry_.Expired(16'001),
            (std::vector<std::string>{"node-a", "node-b"}));
}

}  // namespace
}  // namespace trainctl::coordinator
