#include "common/proto_json.h"

#include <google/protobuf/util/json_util.h>

namespace trainctl {

bool ProtoToJson(const google::protobuf::Message& message, bool pretty,
                 std::string* out) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = pretty;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(message, &json, options).ok()) {
    return false;
  }
  *out = std::move(json);
  return true;
}

}  // namespace trainctl
