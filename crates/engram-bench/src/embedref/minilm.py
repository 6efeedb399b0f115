"""The reference runtime for `engram-bench embedref`: all-MiniLM-L6-v2 in
sentence-transformers on PyTorch, on the CPU, from the same model directory
Engram loads (config.json, tokenizer.json, model.safetensors).

The pipeline is the model's own: the transformer (inputs cut at 256
tokens, each batch padded to its longest text), mean pooling over the real
tokens, L2 normalisation.

It serves the bench over stdin and stdout, one JSON object a line, so the
model is loaded once and the bench can alternate its timings with
Engram's in the same run:

  {"op": "info"}                           -> versions and thread counts
  {"op": "embed", "texts": [...], "batch": B}  -> {"vectors": [[...], ...]}
  {"op": "time", "texts": [...], "batch": B}
      -> {"seconds": [...], "cpu_seconds": c}: the wall time of each
         `encode` call of B texts, and the CPU time of the process (all its
         threads) over them all
"""

import argparse
import json
import sys
import time

import torch
import sentence_transformers
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import (
    Normalize,
    Pooling,
    Transformer,
)

MAX_TOKENS = 256


def load(model_dir):
    transformer = Transformer(model_dir, max_seq_length=MAX_TOKENS)
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode="mean")
    return SentenceTransformer(
        modules=[transformer, pooling, Normalize()], device="cpu"
    )


def encode(model, texts, batch):
    return model.encode(
        texts,
        batch_size=batch,
        convert_to_numpy=True,
        show_progress_bar=False,
    )


def timed(model, texts, batch):
    seconds = []
    cpu_began = time.process_time()
    for start in range(0, len(texts), batch):
        chunk = texts[start : start + batch]
        began = time.perf_counter()
        encode(model, chunk, batch)
        seconds.append(time.perf_counter() - began)
    return {"seconds": seconds, "cpu_seconds": time.process_time() - cpu_began}


def info():
    return {
        "torch": torch.__version__,
        "sentence_transformers": sentence_transformers.__version__,
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="the model directory")
    parser.add_argument("--threads", type=int, required=True, help="intra-op threads")
    args = parser.parse_args()

    # Replies own stdout: anything a library prints goes to stderr.
    replies, sys.stdout = sys.stdout, sys.stderr
    torch.set_num_threads(args.threads)
    # One request at a time: no inter-op parallelism to use.
    torch.set_num_interop_threads(1)
    model = load(args.model)

    for line in sys.stdin:
        request = json.loads(line)
        op = request["op"]
        if op == "info":
            reply = info()
        elif op == "embed":
            vectors = encode(model, request["texts"], request["batch"])
            reply = {"vectors": vectors.tolist()}
        elif op == "time":
            reply = timed(model, request["texts"], request["batch"])
        else:
            reply = {"error": f"unknown op {op!r}"}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


if __name__ == "__main__":
    main()
