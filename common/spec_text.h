#pragma once

// data.tokenizer and data.text_column: text as SentencePiece subwords, and
// a CSV column of text (docs/job-spec.md, "Text and tokenizers").

#include <string>
#include <vector>

#include "common/spec_reader.h"
#include "trainctl/v1/spec.pb.h"

namespace trainctl {

// Reads both from the data section `s` (after data.format and
// label_column), refusing them where the format holds no text.
void ReadTextSpec(SpecReader& s, v1::DataSpec* d);

// The rules they make across sections: a CSV text column gives one
// target per row, as token ids, which only some models take.
void CheckTextData(const v1::JobSpec& spec, std::vector<std::string>* errors);

}  // namespace trainctl
