#include "common/spec_text.h"

#include "absl/strings/str_cat.h"
#include "common/vocabulary.h"

namespace trainctl {

void ReadTextSpec(SpecReader& s, v1::DataSpec* d) {
  d->set_tokenizer(s.String("tokenizer", ""));
  d->set_text_column(s.String("text_column", ""));
  if (!d->tokenizer().empty() && d->format() != "text" && d->format() != "csv") {
    s.Error("data.tokenizer", absl::StrCat("applies to data.format text and csv (with "
                                           "text_column); format ", d->format(),
                                           " holds no text"));
  }
  if (!d->text_column().empty() && d->format() != "csv") {
    s.Error("data.text_column", "applies to data.format csv");
  }
  if (d->format() == "csv" && !d->tokenizer().empty() && d->text_column().empty()) {
    s.Error("data.tokenizer", "with format csv needs data.text_column, the column to tokenize");
  }
  if (!d->text_column().empty() && d->text_column() == d->label_column()) {
    s.Error("data.text_column", "is also data.label_column");
  }
}

void CheckTextData(const v1::JobSpec& spec, std::vector<std::string>* errors) {
  if (spec.data().text_column().empty()) return;
  const ModelType model = ModelTypeOf(spec.model());
  if (TaskOf(spec) == Task::kLanguageModel) {
    errors->push_back(
        "data.text_column: gives one target per row; task language_model trains on "
        "data.format text");
  } else if (model != ModelType::kTransformerClassifier && model != ModelType::kTorchScript) {
    errors->push_back(absl::StrCat("model.type: ", spec.model().type(),
                                   " takes features; data.text_column gives token ids "
                                   "(use transformer_classifier or torchscript)"));
  }
}

}  // namespace trainctl
