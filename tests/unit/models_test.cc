#include "worker/train/models/model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/script.h>

#include <cstdio>

#include "common/spec.h"
#include "model_fixtures.h"
#include "saved_script_module.h"
#include "worker/train/autocast_scope.h"

namespace trainctl::train {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Model> Build(const v1::JobSpec& spec, const DataInfo& info) {
  torch::manual_seed(5);
  absl::StatusOr<std::unique_ptr<Model>> model = BuildModel(spec, info);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

constexpr char kIdx[] = "data: {train_images: a, train_labels: b}\n";
constexpr char kText[] = "data: {format: text, train_path: a, seq_len: 12}\n";

TEST(ModelsTest, OutputShapesFollowTheForwardContract) {
  auto mlp = Build(Spec(std::string("model: mlp\n") + kIdx), Images());
  EXPECT_EQ(mlp->Forward(torch::rand({4, 1, 28, 28})).sizes(),
            (std::vector<int64_t>{4, 10}));
  auto cnn = Build(Spec(std::string("model: cnn\n") + kIdx), Images());
  EXPECT_EQ(cnn->Forward(torch::rand({4, 1, 28, 28})).sizes(),
            (std::vector<int64_t>{4, 10}));
  auto cls = Build(Spec("model: {type: transformer_classifier, d_model: 32}\n"
                        "data: {format: csv, train_path: a}\n"),
                   Tokens(12, 50));
  EXPECT_EQ(cls->Forward(torch::randint(50, {4, 12})).sizes(),
            (std::vector<int64_t>{4, 3}));
  auto gpt = Build(Spec(std::string("model: {type: gpt, d_model: 32}\n") + kText),
                   Tokens(12, 256));
  EXPECT_EQ(gpt->Forward(torch::randint(256, {4, 12})).sizes(),
            (std::vector<int64_t>{4, 12, 256}));
}

TEST(ModelsTest, GptIsCausal) {
  auto gpt = Build(Spec(std::string("model: {type: gpt, d_model: 32}\n") + kText),
                   Tokens(12, 256));
  torch::Tensor a = torch::randint(256, {1, 12});
  torch::Tensor b = a.clone();
  b[0][8] = (a[0][8].item<int64_t>() + 1) % 256;  // change a later token
  torch::NoGradGuard no_grad;
  torch::Tensor la = gpt->Forward(a), lb = gpt->Forward(b);
  EXPECT_TRUE(torch::allclose(la.narrow(1, 0, 8), lb.narrow(1, 0, 8)));
  EXPECT_FALSE(torch::allclose(la.narrow(1, 8, 4), lb.narrow(1, 8, 4)));
}

// Gradients with and without checkpointing, same seed, same batch; the
// forward under autocast at `precision`, as the training loop runs it (the
// backward, with its recompute, outside the scope).
std::vector<torch::Tensor> Gradients(const std::string& yaml,
                                     const DataInfo& info,
                                     const torch::Tensor& x,
                                     const std::string& precision) {
  auto model = Build(Spec(yaml), info);
  model->SetTraining(true);
  torch::Tensor loss;
  {
    AutocastScope autocast(precision, torch::kCPU);
    loss = model->Forward(x).to(torch::kFloat32).pow(2).mean();
  }
  loss.backward();
  std::vector<torch::Tensor> grads;
  for (const auto& p : model->Parameters()) {
    EXPECT_TRUE(p.grad().defined());
    grads.push_back(p.grad().clone());
  }
  return grads;
}

void ExpectSameGradients(const std::string& base, const DataInfo& info,
                         const torch::Tensor& x,
                         const std::string& precision = "fp32") {
  auto plain = Gradients(base, info, x, precision);
  auto checkpointed = Gradients(
      base + "training: {gradient_checkpointing: true}\n", info, x, precision);
  ASSERT_EQ(plain.size(), checkpointed.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    const double scale = plain[i].abs().max().item<double>() + 1e-12;
    EXPECT_LE((plain[i] - checkpointed[i]).abs().max().item<double>() / scale,
              1e-6)
        << "parameter " << i;
  }
}

TEST(ModelsTest, GradientCheckpointingGivesIdenticalGradients) {
  ExpectSameGradients(std::string("model: {type: mlp, hidden: [64, 32, 16]}\n") +
                          kIdx,
                      Images(), torch::rand({8, 1, 28, 28}));
  ExpectSameGradients(
      "model: {type: transformer_classifier, d_model: 32, n_layers: 3}\n"
      "data: {format: csv, train_path: a}\n",
      Tokens(12, 50), torch::randint(50, {8, 12}));
  ExpectSameGradients(
      std::string("model: {type: gpt, d_model: 32, n_layers: 3}\n") + kText,
      Tokens(12, 256), torch::randint(256, {8, 12}));
}

TEST(ModelsTest, GradientCheckpointingReplaysDropoutRandomness) {
  ExpectSameGradients(
      std::string("model: {type: gpt, d_model: 32, n_layers: 2, dropout: 0.3}\n") +
          kText,
      Tokens(12, 256), torch::randint(256, {8, 12}));
}

// The recompute runs in backward, after the forward's autocast scope has
// closed: it must re-enter it, or it computes the block in fp32 and the
// gradients belong to another forward.
TEST(ModelsTest, GradientCheckpointingRecomputesUnderTheForwardsAutocast) {
  ExpectSameGradients(
      std::string("model: {type: gpt, d_model: 32, n_layers: 2, dropout: 0.2}\n") +
          kText,
      Tokens(12, 256), torch::randint(256, {8, 12}), "bf16");
  ExpectSameGradients(std::string("model: {type: mlp, hidden: [64, 32]}\n") + kIdx,
                      Images(), torch::rand({8, 1, 28, 28}), "bf16");
}

TEST(ModelsTest, RejectsModelsThatDoNotFitTheData) {
  absl::StatusOr<std::unique_ptr<Model>> m =
      BuildModel(Spec(std::string("model: cnn\n") + kIdx), Tokens(12, 50));
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("model.type: cnn"));
  m = BuildModel(
      Spec(std::string("model: {type: gpt, max_seq_len: 8}\n") + kText),
      Tokens(12, 256));
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("model.max_seq_len"));
}

TEST(ModelsTest, TorchScriptModuleTrainsInPlace) {
  // A module as Python's torch.jit.save would write it: parameters plus a
  // scripted forward.
  torch::jit::Module module("Affine");
  // Parameters saved from Python keep requires_grad, as nn.Parameter sets it.
  module.register_parameter(
      "weight", (torch::randn({10, 784}) * 0.01).requires_grad_(true), false);
  module.register_parameter("bias", torch::zeros({10}, torch::requires_grad()),
                            false);
  module.define(R"(
    def forward(self, x):
        return torch.matmul(x.flatten(1), self.weight.t()) + self.bias
  )");
  const std::string path = SaveToTempFile(module);

  auto model = Build(Spec(std::string("model: {type: torchscript, path: ") +
                          path + "}\n" + kIdx),
                     Images());
  ASSERT_NE(model, nullptr);
  std::vector<torch::Tensor> params = model->Parameters();
  ASSERT_EQ(params.size(), 2u);
  torch::Tensor before = params[0].detach().clone();
  torch::optim::SGD sgd(params, torch::optim::SGDOptions(0.1));
  torch::Tensor out = model->Forward(torch::rand({4, 1, 28, 28}));
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{4, 10}));
  torch::nn::functional::cross_entropy(out, torch::tensor({1, 2, 3, 4})).backward();
  sgd.step();
  EXPECT_FALSE(torch::equal(before, params[0]));
  std::remove(path.c_str());

  absl::StatusOr<std::unique_ptr<Model>> missing = BuildModel(
      Spec(std::string("model: {type: torchscript, path: /nonexistent.pt}\n") +
           kIdx),
      Images());
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("model.path: cannot load TorchScript module "
                        "/nonexistent.pt"));
}

// A module's own loss(inputs, targets) replaces the task's in training;
// one with another signature is refused when the model is built, naming
// model.path.
TEST(ModelsTest, TorchScriptModuleMayBringItsOwnLoss) {
  auto save = [](const std::string& code) {
    torch::jit::Module module("WithLoss");
    module.register_parameter(
        "weight", torch::zeros({10, 784}).requires_grad_(true), false);
    module.define(code);
    return SaveToTempFile(module);
  };
  const std::string forward = R"(
    def forward(self, x):
        return torch.matmul(x.flatten(1), self.weight.t())
  )";
  const std::string good = save(forward + R"(
    def loss(self, x, y):
        return torch.mean((self.forward(x) - 2.0) ** 2)
  )");
  auto model = Build(Spec("model: {type: torchscript, path: " + good + "}\n" + kIdx),
                     Images());
  ASSERT_NE(model, nullptr);
  EXPECT_TRUE(model->HasCustomLoss());
  torch::Tensor loss =
      model->CustomLoss(torch::rand({4, 1, 28, 28}), {}, torch::tensor({1, 2, 3, 4}));
  EXPECT_EQ(loss.numel(), 1);
  EXPECT_NEAR(loss.item<double>(), 4.0, 1e-6);  // outputs 0, target 2
  std::remove(good.c_str());

  const std::string plain = save(forward);
  auto without = Build(Spec("model: {type: torchscript, path: " + plain + "}\n" + kIdx),
                       Images());
  ASSERT_NE(without, nullptr);
  EXPECT_FALSE(without->HasCustomLoss());
  std::remove(plain.c_str());

  const std::string bad = save(forward + R"(
    def loss(self, x):
        return self.forward(x).sum()
  )");
  absl::StatusOr<std::unique_ptr<Model>> refused = BuildModel(
      Spec("model: {type: torchscript, path: " + bad + "}\n" + kIdx), Images());
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("model.path: " + bad + ": its loss method must be "
                        "loss(self, inputs: Tensor, targets: Tensor) -> Tensor "
                        "(it takes x and returns Tensor"));
  std::remove(bad.c_str());
}

}  // namespace
}  // namespace trainctl::train
