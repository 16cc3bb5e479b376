// --torchscript allow|admins|refuse: who may submit a TorchScript job.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "coordinator/services.h"

namespace trainctl::coordinator {
namespace {

using ::testing::HasSubstr;

constexpr char kTorchScript[] =
    "model: {type: torchscript, path: /models/m.pt}\n"
    "data: {train_images: /a, train_labels: /b}\n";
constexpr char kBuiltIn[] =
    "model: mlp\ndata: {train_images: /a, train_labels: /b}\n";

const auth::Caller kUser{"bob", auth::Caller::Role::kUser};
const auth::Caller kAdmin{"ops", auth::Caller::Role::kAdmin};

TEST(TorchScriptPolicyTest, AllowAcceptsEveryone) {
  EXPECT_TRUE(CheckModelAllowed(TorchScriptPolicy::kAllow, kUser, kTorchScript).ok());
}

TEST(TorchScriptPolicyTest, AdminsAcceptsAdminsOnly) {
  EXPECT_TRUE(CheckModelAllowed(TorchScriptPolicy::kAdmins, kAdmin, kTorchScript).ok());
  absl::Status refused =
      CheckModelAllowed(TorchScriptPolicy::kAdmins, kUser, kTorchScript);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("model.type: torchscript models are programs"));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("from admins only"));
}

TEST(TorchScriptPolicyTest, RefuseRefusesAdminsToo) {
  for (const auth::Caller& caller : {kUser, kAdmin}) {
    absl::Status refused =
        CheckModelAllowed(TorchScriptPolicy::kRefuse, caller, kTorchScript);
    EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
    EXPECT_THAT(std::string(refused.message()), HasSubstr("from nobody"));
  }
}

TEST(TorchScriptPolicyTest, BuiltInModelsAndBadSpecsAreNotItsBusiness) {
  EXPECT_TRUE(CheckModelAllowed(TorchScriptPolicy::kRefuse, kUser, kBuiltIn).ok());
  EXPECT_TRUE(CheckModelAllowed(TorchScriptPolicy::kRefuse, kUser, "{").ok());
}

}  // namespace
}  // namespace trainctl::coordinator
