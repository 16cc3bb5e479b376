"""What an MLflow user sees of a trainctl job's run, read with the mlflow
client: prints one JSON object (run status, name, tags, params, the latest
metrics, the train/loss history's steps, the artifacts, and the metadata of
the logged model file).

usage: mlflow_check.py TRACKING_URI EXPERIMENT JOB_ID
"""
import json
import struct
import sys
import tempfile

from mlflow.tracking import MlflowClient


def main():
    uri, experiment, job_id = sys.argv[1:4]
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id],
                              filter_string=f"tags.`trainctl.job_id` = '{job_id}'")
    out = {"runs": len(runs)}
    if runs:
        run = runs[0]
        out.update(status=run.info.status, name=run.info.run_name,
                   tags={k: v for k, v in run.data.tags.items() if k.startswith("trainctl.")},
                   params=run.data.params, metrics=run.data.metrics,
                   loss_steps=[m.step for m in
                               client.get_metric_history(run.info.run_id, "train/loss")])
        out["artifacts"] = [a.path for a in client.list_artifacts(run.info.run_id, "model")]
        if "model/model.safetensors" in out["artifacts"]:
            with tempfile.TemporaryDirectory() as tmp:
                path = client.download_artifacts(run.info.run_id,
                                                 "model/model.safetensors", tmp)
                with open(path, "rb") as f:
                    (length,) = struct.unpack("<Q", f.read(8))
                    header = json.loads(f.read(length))
            out["model_metadata"] = header.get("__metadata__", {})
            out["model_tensors"] = sorted(k for k in header if k != "__metadata__")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
