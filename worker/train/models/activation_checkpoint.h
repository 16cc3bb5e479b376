#pragma once

#include <torch/torch.h>

#include <functional>

namespace trainctl::train {

// A block of layers: (x, aux) -> y. `aux` is a tensor the block reads but
// is not differentiated through (a transformer's padding mask); undefined
// when there is none.
using BlockFn =
    std::function<torch::Tensor(const torch::Tensor& x, const torch::Tensor& aux)>;

// Gradient (activation) checkpointing for one block: runs `block` without
// keeping its activations, and in backward runs it again, with the same CPU
// random state, to rebuild them. Parameter gradients are accumulated into
// .grad by that inner backward; the input gradient flows on. `block` must
// outlive the backward pass (keep it as a member of the module).
torch::Tensor CheckpointBlock(const BlockFn& block, const torch::Tensor& input,
                              const torch::Tensor& aux = {});

}  // namespace trainctl::train
