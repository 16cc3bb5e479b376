// Models fed several named inputs: a TorchScript module (as a traced
// Hugging Face model is) takes each by its forward argument's name, and the
// built-in transformer classifier reads a padding mask.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/script.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "model_fixtures.h"
#include "saved_script_module.h"
#include "worker/train/models/model.h"

namespace trainctl::train {
namespace {

using ::testing::HasSubstr;

constexpr char kTensors[] = "data: {format: tensors, train_path: a}\n";

// Token data of `seq_len` ids below 20, in 3 classes, with these names.
DataInfo Named(std::vector<std::string> names, int64_t seq_len = 6) {
  DataInfo info = Tokens(seq_len, 20);
  info.input_names = std::move(names);
  return info;
}

// A module with an embedding table `weight` [20, 3] and `code`, saved to a
// temp file whose path it returns.
std::string SaveModule(const std::string& code) {
  torch::jit::Module module("Classifier");
  module.register_parameter("weight",
                            (torch::arange(60, torch::kFloat32).reshape({20, 3}) / 60)
                                .requires_grad_(true),
                            false);
  module.define(code);
  return SaveToTempFile(module);
}

absl::StatusOr<std::unique_ptr<Model>> Load(const std::string& path, const DataInfo& data) {
  return BuildModel(Spec("model: {type: torchscript, path: " + path + "}\n" + kTensors),
                    data);
}

// What a traced Hugging Face classifier is: forward(input_ids,
// attention_mask, token_type_ids) returning a tuple (logits,).
constexpr char kHfLike[] = R"(
    def forward(self, input_ids, attention_mask, token_type_ids):
        tokens = torch.embedding(self.weight, input_ids)
        pooled = (tokens * attention_mask.unsqueeze(-1).float()).sum(1)
        return (pooled + token_type_ids.sum(1, keepdim=True).float(),)
)";

struct Batch3 {
  torch::Tensor ids = torch::tensor({{1, 2, 3, 0, 0, 0}, {4, 5, 6, 7, 8, 9}});
  torch::Tensor mask = ids.ne(0).to(torch::kInt64);
  torch::Tensor types = torch::tensor({{0, 0, 0, 0, 0, 0}, {0, 0, 0, 1, 1, 1}});
  torch::Tensor Expected(const torch::Tensor& weight) const {
    return (torch::embedding(weight, ids) * mask.unsqueeze(-1)).sum(1) +
           types.sum(1, true).to(torch::kFloat32);
  }
};

TEST(NamedInputsModelTest, TorchScriptForwardTakesEachInputByItsName) {
  const std::string path = SaveModule(kHfLike);
  // The data's order differs from the forward's: inputs go by name.
  auto model = Load(path, Named({"input_ids", "token_type_ids", "attention_mask"}));
  ASSERT_TRUE(model.ok()) << model.status();
  Batch3 b;
  torch::Tensor out = (*model)->Forward(
      b.ids, {{"token_type_ids", b.types}, {"attention_mask", b.mask}});
  const torch::Tensor weight = (*model)->Parameters().at(0);
  EXPECT_TRUE(torch::allclose(out, b.Expected(weight)));
  // The logits carry gradients back to the table, padding rows excluded.
  torch::nn::functional::cross_entropy(out, torch::tensor({0, 2})).backward();
  EXPECT_TRUE(weight.grad()[0].eq(0).all().item<bool>());  // id 0 is padding only
  EXPECT_FALSE(weight.grad()[1].eq(0).all().item<bool>());
  std::remove(path.c_str());
}

TEST(NamedInputsModelTest, DictOutputsGiveTheirLogits) {
  const std::string path = SaveModule(R"(
    def forward(self, input_ids, attention_mask):
        logits = torch.embedding(self.weight, input_ids).sum(1)
        return {"loss": logits.sum(), "logits": logits}
)");
  auto model = Load(path, Named({"input_ids", "attention_mask"}));
  ASSERT_TRUE(model.ok()) << model.status();
  Batch3 b;
  torch::Tensor out = (*model)->Forward(b.ids, {{"attention_mask", b.mask}});
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{2, 3}));
  std::remove(path.c_str());
}

TEST(NamedInputsModelTest, ForwardAndDataMustAgreeOnTheInputs) {
  const std::string path = SaveModule(kHfLike);
  auto missing = Load(path, Named({"input_ids", "attention_mask"}));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            "model.path: " + path + ": its forward takes token_type_ids, which the "
            "data does not hold (it holds 2 named inputs)");

  auto extra = Load(path, Named({"input_ids", "attention_mask", "token_type_ids", "labels"}));
  ASSERT_FALSE(extra.ok());
  EXPECT_EQ(extra.status().message(),
            "model.path: " + path + ": its forward has no argument for the data's "
            "input 4 of 4 (it takes input_ids, attention_mask, token_type_ids)");

  auto unnamed = Load(path, Tokens(6, 20));
  ASSERT_FALSE(unnamed.ok());
  EXPECT_THAT(std::string(unnamed.status().message()),
              HasSubstr("its forward takes attention_mask, which the data does not "
                        "hold (it holds one unnamed input; save x as a dict of named "
                        "inputs"));
  std::remove(path.c_str());

  // Arguments with defaults may be left to them, by either kind of data.
  const std::string optional = SaveModule(R"(
    def forward(self, input_ids, attention_mask: Optional[Tensor] = None):
        tokens = torch.embedding(self.weight, input_ids)
        if attention_mask is not None:
            tokens = tokens * attention_mask.unsqueeze(-1).float()
        return tokens.sum(1)
)");
  Batch3 b;
  auto plain = Load(optional, Tokens(6, 20));
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto masked = Load(optional, Named({"input_ids", "attention_mask"}));
  ASSERT_TRUE(masked.ok()) << masked.status();
  const torch::Tensor unmasked = (*plain)->Forward(b.ids);
  const torch::Tensor with_mask = (*masked)->Forward(b.ids, {{"attention_mask", b.mask}});
  EXPECT_TRUE(torch::allclose(unmasked[1], with_mask[1]));  // row 1 has no padding
  EXPECT_FALSE(torch::allclose(unmasked[0], with_mask[0]));
  std::remove(optional.c_str());
}

TEST(NamedInputsModelTest, CustomLossTakesTheInputsByNameAndTheTargetsLast) {
  const std::string path = SaveModule(std::string(kHfLike) + R"(
    def loss(self, attention_mask, input_ids, token_type_ids, targets):
        logits = self.forward(input_ids, attention_mask, token_type_ids)[0]
        return logits.gather(1, targets.unsqueeze(1)).sum() * 0.0 + attention_mask.sum()
)");
  auto model = Load(path, Named({"input_ids", "attention_mask", "token_type_ids"}));
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE((*model)->HasCustomLoss());
  Batch3 b;
  torch::Tensor loss = (*model)->CustomLoss(
      b.ids, {{"attention_mask", b.mask}, {"token_type_ids", b.types}}, torch::tensor({0, 1}));
  EXPECT_EQ(loss.item<double>(), 9.0);  // the mask's ones
  std::remove(path.c_str());

  const std::string wrong = SaveModule(std::string(kHfLike) + R"(
    def loss(self, input_ids, targets):
        return torch.embedding(self.weight, input_ids).sum()
)");
  auto refused = Load(wrong, Named({"input_ids", "attention_mask", "token_type_ids"}));
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("its loss method must be loss(self, <the forward's inputs by "
                        "name>, targets: Tensor) -> Tensor (it takes input_ids, "
                        "targets and returns Tensor; "));
  std::remove(wrong.c_str());
}

TEST(NamedInputsModelTest, AForwardReturningNoTensorIsNamedWhenCalled) {
  const std::string path = SaveModule(R"(
    def forward(self, input_ids):
        return input_ids.size(0)
)");
  auto model = Load(path, Tokens(6, 20));
  ASSERT_TRUE(model.ok()) << model.status();
  try {
    (*model)->Forward(torch::tensor({{1, 2}}));
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), HasSubstr("model.path: " + path + ": forward returned a Int; "
                                    "expected a Tensor, a tuple whose first item is one"));
  }
  std::remove(path.c_str());
}

// Padding is invisible to the built-in classifier given its mask: a padded
// sample scores as the sample alone, in evaluation and (gradients through
// checkpointed blocks included) in training.
TEST(NamedInputsModelTest, BuiltInClassifierIgnoresPaddingUnderItsMask) {
  for (const bool checkpointing : {false, true}) {
    const std::string spec =
        "model: {type: transformer_classifier, d_model: 32, n_heads: 4, n_layers: 2}\n"
        "training: {gradient_checkpointing: " + std::string(checkpointing ? "true" : "false") +
        "}\n" + kTensors;
    torch::manual_seed(7);
    auto padded = BuildModel(Spec(spec), Named({"input_ids", "attention_mask"}, 10));
    ASSERT_TRUE(padded.ok()) << padded.status();
    const torch::Tensor ids = torch::tensor({{3, 9, 4, 17}});
    torch::Tensor padded_ids = torch::randint(1, 20, {1, 10});  // padding of any id
    padded_ids.narrow(1, 0, 4).copy_(ids);
    torch::Tensor mask = torch::zeros({1, 10}, torch::kInt64);
    mask.narrow(1, 0, 4).fill_(1);

    (*padded)->SetTraining(false);
    {
      torch::NoGradGuard no_grad;
      EXPECT_TRUE(torch::allclose((*padded)->Forward(ids),
                                  (*padded)->Forward(padded_ids, {{"attention_mask", mask}}),
                                  1e-5, 1e-6))
          << "checkpointing " << checkpointing;
    }
    (*padded)->SetTraining(true);  // dropout 0: training is deterministic
    std::vector<torch::Tensor> params = (*padded)->Parameters();
    auto grads = [&](const torch::Tensor& x, const NamedInputs& more) {
      for (auto& p : params) p.mutable_grad() = torch::Tensor();
      (*padded)->Forward(x, more).pow(2).sum().backward();
      std::vector<torch::Tensor> out;
      for (auto& p : params) out.push_back(p.grad().clone());
      return out;
    };
    const auto alone = grads(ids, {});
    const auto masked = grads(padded_ids, {{"attention_mask", mask}});
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_TRUE(torch::allclose(alone[i], masked[i], 1e-4, 1e-6))
          << "parameter " << i << ", checkpointing " << checkpointing;
    }
  }
}

TEST(NamedInputsModelTest, BuiltInModelsRefuseInputsTheyDoNotRead) {
  auto mlp = BuildModel(Spec(std::string("model: mlp\n") + kTensors),
                        Named({"input_ids", "attention_mask"}));
  ASSERT_FALSE(mlp.ok());
  EXPECT_EQ(mlp.status().message(),
            "model.type: mlp reads one input; the data has 2 named inputs (a "
            "TorchScript model takes any it names in its forward)");
  auto cls = BuildModel(Spec(std::string("model: {type: transformer_classifier, d_model: 32}\n") +
                             kTensors),
                        Named({"input_ids", "attention_mask", "token_type_ids"}));
  ASSERT_FALSE(cls.ok());
  EXPECT_THAT(std::string(cls.status().message()),
              HasSubstr("transformer_classifier reads token ids and, optionally, "
                        "their attention_mask; the data has 3 named inputs"));
}

}  // namespace
}  // namespace trainctl::train
