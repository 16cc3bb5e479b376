#pragma once

namespace trainctl::train {

// `trainctl-worker export ...`, which `trainctl export` runs where the
// checkpoint is readable: reads a checkpoint and writes its model as
// safetensors, or into the job's TorchScript module (model_export.h).
// Returns 0, 1 when the export failed (the reason is the last line on
// stderr), 2 on bad arguments. Free of torch headers, as rank_main.h.
int ExportMain(int argc, char** argv);

}  // namespace trainctl::train
