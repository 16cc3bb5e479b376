#include "worker/train/model_export.h"

#include <torch/script.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"

namespace trainctl::train {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian; this writes host order");

// safetensors' names for torch's dtypes (its Rust crate's Dtype).
const char* SafetensorsDtype(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat: return "F32";
    case torch::kDouble: return "F64";
    case torch::kHalf: return "F16";
    case torch::kBFloat16: return "BF16";
    case torch::kLong: return "I64";
    case torch::kInt: return "I32";
    case torch::kShort: return "I16";
    case torch::kChar: return "I8";
    case torch::kByte: return "U8";
    case torch::kBool: return "BOOL";
    default: return nullptr;
  }
}

// A JSON string literal: quotes, backslashes and control characters
// escaped; other bytes (UTF-8) as they are.
std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (const unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
      out += buffer;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// Host, contiguous: the bytes safetensors stores.
torch::Tensor Storable(const torch::Tensor& tensor) {
  return tensor.detach().to(torch::kCPU).contiguous();
}

int64_t DataBytes(const torch::Tensor& tensor) {
  return tensor.numel() * static_cast<int64_t>(tensor.element_size());
}

}  // namespace

absl::StatusOr<std::string> SafetensorsHeader(
    const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  std::vector<std::string> entries;
  if (!metadata.empty()) {
    std::vector<std::string> pairs;
    for (const auto& [key, value] : metadata) {
      pairs.push_back(absl::StrCat(JsonString(key), ":", JsonString(value)));
    }
    entries.push_back(absl::StrCat("\"__metadata__\":{", absl::StrJoin(pairs, ","), "}"));
  }
  std::set<std::string> seen;
  int64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name == "__metadata__" || !seen.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor name ", name, " is used twice (or is reserved by safetensors)"));
    }
    const char* dtype = SafetensorsDtype(tensor.scalar_type());
    if (dtype == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", name, " has dtype ", c10::toString(tensor.scalar_type()),
          ", which safetensors has no name for"));
    }
    const int64_t bytes = DataBytes(tensor);
    entries.push_back(absl::StrCat(
        JsonString(name), ":{\"dtype\":\"", dtype, "\",\"shape\":[",
        absl::StrJoin(tensor.sizes(), ","), "],\"data_offsets\":[", offset, ",",
        offset + bytes, "]}"));
    offset += bytes;
  }
  std::string json = absl::StrCat("{", absl::StrJoin(entries, ","), "}");
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string header(8, '\0');
  const uint64_t length = json.size();
  std::memcpy(header.data(), &length, sizeof length);
  return header + json;
}

absl::StatusOr<std::string> EncodeSafetensors(
    const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  ASSIGN_OR_RETURN(std::string bytes, SafetensorsHeader(tensors, metadata));
  for (const auto& named : tensors) {
    const torch::Tensor host = Storable(named.second);
    bytes.append(static_cast<const char*>(host.data_ptr()), static_cast<size_t>(DataBytes(host)));
  }
  return bytes;
}

absl::Status WriteSafetensors(const NamedTensors& tensors,
                              const std::map<std::string, std::string>& metadata,
                              const std::string& path) {
  ASSIGN_OR_RETURN(const std::string header, SafetensorsHeader(tensors, metadata));
  return WriteFileAtomicallyStreamed(
      path,
      [&](const ByteSink& sink) -> absl::Status {
        RETURN_IF_ERROR(sink(header.data(), header.size()));
        for (const auto& named : tensors) {
          const torch::Tensor host = Storable(named.second);
          RETURN_IF_ERROR(sink(host.data_ptr(), static_cast<size_t>(DataBytes(host))));
        }
        return absl::OkStatus();
      },
      AtomicWriteOptions{});
}

absl::Status SaveTorchScriptWithState(const std::string& module_path,
                                      const NamedTensors& tensors,
                                      const std::string& out_path) {
  torch::jit::Module module;
  try {
    module = torch::jit::load(module_path, torch::kCPU);
  } catch (const std::exception&) {
    // torch's text quotes the archive's contents (as model.cc says).
    return absl::InvalidArgumentError(absl::StrCat(
        "model.path: cannot load TorchScript module ", module_path,
        " (missing, or not a torch.jit.save archive this LibTorch reads)"));
  }
  std::map<std::string, torch::Tensor> targets;
  for (const auto& p : module.named_parameters()) targets[p.name] = p.value;
  for (const auto& b : module.named_buffers()) targets[b.name] = b.value;
  if (targets.size() != tensors.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint holds ", tensors.size(), " model tensors; the module at ",
        module_path, " has ", targets.size(), " (it is not the module this job trained)"));
  }
  try {
    torch::NoGradGuard no_grad;
    for (const auto& [name, saved] : tensors) {
      auto it = targets.find(name);
      if (it == targets.end() || !it->second.sizes().equals(saved.sizes())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the checkpoint's tensor ", name, " ", c10::str(saved.sizes()),
            it == targets.end() ? " is not in the module at "
                                : " has another shape in the module at ",
            module_path, " (it is not the module this job trained)"));
      }
      it->second.copy_(saved);
    }
    module.eval();  // what a loader wants first: dropout off, norms frozen
    std::ostringstream bytes;
    module.save(bytes);
    return WriteFileAtomically(out_path, bytes.str());
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("saving the TorchScript module to ", out_path, ": ", e.what()));
  }
}

}  // namespace trainctl::train
