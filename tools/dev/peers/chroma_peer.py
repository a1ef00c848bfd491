#!/usr/bin/env python3
"""Peer benchmark: ChromaDB (local persistent client) over the same embedding model as hindsight.

The embedding function below reproduces hindsight's embedder (guest/engine/src/embed/onnx.rs)
with onnxruntime in place of tract, so that the figures differ by the store and the runtime, not
by the model. Chroma's own ONNX embedding function would download its model at run time; this one
reads `model.onnx` and `tokenizer.json` from --models.

Prints ONE JSON object on stdout; progress goes to stderr. See README.md beside this file.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence, Tuple

# Chroma reads this when its Settings are built; set before the import so that no code path
# (including ones that build default Settings) can start product telemetry, which would try the
# network.
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import chromadb  # noqa: E402
import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings  # noqa: E402
from chromadb.config import Settings  # noqa: E402
from chromadb.utils.embedding_functions import register_embedding_function  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

# BERT's learned position table: nothing longer fits (hindsight's MAX_TOKENS).
MAX_TOKENS = 512
TEXT_BATCH = 32  # hindsight's retain throughput also sends 32 texts per call
VECTOR_BATCH = 1000  # hindsight's bench retains given vectors a thousand per call
K = 10
WARMUP = 5
# hindsight's bench embeds this for its "short" figure.
SHORT = "Retry the flaky payments API."


def log(msg: str) -> None:
    print(f"chroma-peer: {msg}", file=sys.stderr, flush=True)


# Chroma rebuilds a collection's embedding function from its persisted config (build_from_config)
# twice on every add(), while deserialising the collection's schema: loading the model each time
# costs ~0.5 s per call, whatever the batch. Loaded models are shared instead, as Chroma's own
# ONNX function avoids the cost by loading lazily.
_LOADED: Dict[Tuple[str, int], Tuple[Tokenizer, ort.InferenceSession, List[str]]] = {}


def _load(models: str, threads: int) -> Tuple[Tokenizer, ort.InferenceSession, List[str]]:
    key = (os.path.realpath(models), threads)
    if key in _LOADED:
        return _LOADED[key]
    tokenizer = Tokenizer.from_file(str(Path(models) / "tokenizer.json"))
    # The shipped tokenizer.json pads and truncates at 128; hindsight overrides both.
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=MAX_TOKENS)

    opts = ort.SessionOptions()
    # 0 is onnxruntime's own default (one thread per physical core); an explicit count makes the
    # reported figure the one actually used.
    opts.intra_op_num_threads = threads
    opts.log_severity_level = 3  # warnings about unused initialisers are noise here
    session = ort.InferenceSession(
        str(Path(models) / "model.onnx"), sess_options=opts, providers=["CPUExecutionProvider"]
    )
    known = {"input_ids", "attention_mask", "token_type_ids"}
    inputs = [i.name for i in session.get_inputs()]
    unknown = [n for n in inputs if n not in known]
    if unknown:
        raise ValueError(f"model inputs {unknown} are not ones a BERT encoder takes")
    _LOADED[key] = (tokenizer, session, inputs)
    return _LOADED[key]


@register_embedding_function
class HindsightOnnxEmbedding(EmbeddingFunction[Documents]):
    """all-MiniLM-L6-v2 (or whatever --models holds) exactly as hindsight runs it: no padding
    for one text, zero padding to the longest for a batch (masked out of attention and of the
    pooling), truncation at 512 tokens, mean pooling over real tokens, L2 normalisation."""

    def __init__(self, models: str, threads: int = 0) -> None:
        self.models = str(models)
        self.threads = threads
        self.tokenizer, self.session, self.inputs = _load(self.models, threads)

    # Chroma persists an embedding function's name and config with a collection; without these
    # it files the function as "legacy" and warns on every collection.
    @staticmethod
    def name() -> str:
        return "hindsight-onnx"

    def get_config(self) -> Dict[str, Any]:
        return {"models": self.models, "threads": self.threads}

    @staticmethod
    def build_from_config(config: Dict[str, Any]) -> "HindsightOnnxEmbedding":
        return HindsightOnnxEmbedding(config["models"], config.get("threads", 0))

    def default_space(self) -> str:
        return "cosine"

    def __call__(self, input: Documents) -> Embeddings:
        if not input:
            return []
        encodings = self.tokenizer.encode_batch(list(input), add_special_tokens=True)
        rows = len(encodings)
        width = max(1, max(len(e.ids) for e in encodings))
        # Padding by hand rather than with the tokenizer's padding keeps one code path for one
        # text (width = its length, i.e. no padding) and for a batch, as hindsight does.
        arrays = {
            "input_ids": np.zeros((rows, width), dtype=np.int64),
            "attention_mask": np.zeros((rows, width), dtype=np.int64),
            "token_type_ids": np.zeros((rows, width), dtype=np.int64),
        }
        for r, enc in enumerate(encodings):
            n = len(enc.ids)
            arrays["input_ids"][r, :n] = enc.ids
            arrays["attention_mask"][r, :n] = 1
            arrays["token_type_ids"][r, :n] = enc.type_ids
        outputs = self.session.run(None, {name: arrays[name] for name in self.inputs})
        # Exports differ in what else they return and in what order (a pooled vector, ...): the
        # token embeddings are the first float output shaped [batch, tokens, dim].
        hidden = next(
            (o for o in outputs if isinstance(o, np.ndarray) and o.dtype == np.float32 and o.ndim == 3),
            None,
        )
        if hidden is None:
            raise ValueError("the model has no [batch, tokens, dimension] float output")
        if hidden.shape[:2] != (rows, width):
            raise ValueError(f"model output has shape {hidden.shape}, expected [{rows}, {width}, d]")
        mask = arrays["attention_mask"][:, :, None].astype(np.float32)
        pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1.0)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        pooled = pooled / np.where(norms > 0, norms, 1.0)
        return list(pooled.astype(np.float32))


def percentile_ms(samples: List[float], p: float) -> float:
    """Nearest rank at round((n-1)p), as hindsight's bench computes it, in milliseconds."""
    s = sorted(samples)
    return s[int(round((len(s) - 1) * p))] * 1000.0


def time_n(n: int, f: Callable[[], Any]) -> List[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        out.append(time.perf_counter() - t)
    return out


def read_jsonl(path: str, field: str) -> List[Dict[str, Any]]:
    rows = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            if field not in row:
                raise SystemExit(f"{path}:{lineno}: no {field!r} field")
            rows.append(row)
    return rows


def dir_bytes(path: str) -> int:
    """Apparent size of every file under path (hindsight counts its db and -wal files the same
    way)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except FileNotFoundError:
                pass
    return total


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def sanity_check(ef: HindsightOnnxEmbedding) -> int:
    """Fails the run when the vectors are not sentence embeddings: a wrong output picked, the
    padding pooled in, or a batch that differs from single texts. Returns the dimension."""
    texts = [
        "The cat is sleeping on the sofa.",
        "A kitten naps on the couch.",
        "Quarterly corporate tax filings are due in April.",
    ]
    batch = ef(texts)
    singles = [ef([t])[0] for t in texts]
    dim = len(batch[0])
    for v in batch:
        if abs(float(np.linalg.norm(v)) - 1.0) > 1e-3:
            raise SystemExit(f"embedding not unit length: {np.linalg.norm(v)}")
    para, unrelated = cosine(batch[0], batch[1]), cosine(batch[0], batch[2])
    if not para > unrelated + 0.2:
        raise SystemExit(f"embeddings not sane: paraphrase {para:.3f} vs unrelated {unrelated:.3f}")
    drift = min(cosine(a, b) for a, b in zip(batch, singles))
    if drift < 0.999:
        raise SystemExit(f"a padded batch embeds differently from single texts (cosine {drift:.5f})")
    log(f"embeddings sane: dim {dim}, paraphrase {para:.3f}, unrelated {unrelated:.3f}, batch/single {drift:.6f}")
    return dim


class Store:
    """A persistent Chroma collection in a temporary directory, removed on close."""

    COLLECTION = "bench"

    def __init__(self, ef: HindsightOnnxEmbedding, label: str) -> None:
        self.ef = ef
        self.dir = tempfile.mkdtemp(prefix=f"chroma-peer-{label}-")
        self.client: Any = None
        self.collection: Any = None

    def open(self, create: bool = False) -> None:
        self.client = chromadb.PersistentClient(
            path=self.dir, settings=Settings(anonymized_telemetry=False, allow_reset=False)
        )
        if create:
            self.collection = self.client.create_collection(
                self.COLLECTION, embedding_function=self.ef, metadata={"hnsw:space": "cosine"}
            )
            space = (self.collection.configuration or {}).get("hnsw", {}).get("space")
            if space != "cosine":
                raise SystemExit(f"collection space is {space!r}, not cosine")
        else:
            self.collection = self.client.get_collection(self.COLLECTION, embedding_function=self.ef)

    def max_batch(self) -> int:
        return int(self.client.get_max_batch_size())

    def shut(self) -> None:
        """Releases the client, so that everything is on disk and the next open really reads it."""
        if self.client is not None:
            self.client.close()
        self.client = self.collection = None

    def close(self) -> None:
        self.shut()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def batch_size(store: Store, wanted: int) -> int:
    limit = store.max_batch()
    if wanted > limit:
        log(f"batch of {wanted} exceeds chroma's max batch size {limit}: using {limit}")
        return limit
    return wanted


def iter_cycle(items: List[Any], f: Callable[[Any], Any]) -> Callable[[], Any]:
    """A thunk that applies f to the items in order, round and round."""
    state = {"i": 0}

    def step() -> Any:
        item = items[state["i"] % len(items)]
        state["i"] += 1
        return f(item)

    return step


def ingest_texts(store: Store, texts: List[str], what: str) -> float:
    """Items per second `texts` are added with embedding to the store's new collection,
    TEXT_BATCH per call."""
    store.open(create=True)
    step = batch_size(store, TEXT_BATCH)
    t = time.perf_counter()
    for i in range(0, len(texts), step):
        chunk = texts[i : i + step]
        store.collection.add(ids=[f"t{j}" for j in range(i, i + len(chunk))], documents=chunk)
    elapsed = time.perf_counter() - t
    log(f"ingested {len(texts)} {what} with embedding in {elapsed:.2f}s")
    return len(texts) / elapsed


def ingest_corpus(ef: HindsightOnnxEmbedding, texts: List[str]) -> float:
    """Items per second ingested with embedding into a fresh collection."""
    with Store(ef, "corpus") as store:
        return ingest_texts(store, texts, "corpus texts")


def bench_texts(ef: HindsightOnnxEmbedding, texts: List[str], queries: List[Dict[str, Any]], runs: int) -> Dict[str, Any]:
    """Ingest with embedding, then query with embedding, on one collection."""
    with Store(ef, "texts") as store:
        ingest_per_s = ingest_texts(store, texts, "texts")
        k = min(K, len(texts))
        ask = lambda q: store.collection.query(query_texts=[q["text"]], n_results=k)  # noqa: E731
        for q in queries[:WARMUP]:
            ask(q)
        samples = time_n(runs, iter_cycle(queries, ask))
        return {
            "ingest_embed_per_s": ingest_per_s,
            "ingest_embed_items": len(texts),
            "query_embed_p50_ms": percentile_ms(samples, 0.5),
            "query_embed_p99_ms": percentile_ms(samples, 0.99),
        }


def bench_size(
    ef: HindsightOnnxEmbedding,
    vectors: np.ndarray,
    texts: List[str],
    queries: List[Dict[str, Any]],
    size: int,
    runs: int,
) -> Dict[str, Any]:
    with Store(ef, f"n{size}") as store:
        store.open(create=True)
        step = batch_size(store, VECTOR_BATCH)
        t = time.perf_counter()
        for i in range(0, size, step):
            j = min(i + step, size)
            store.collection.add(
                ids=[f"v{x}" for x in range(i, j)], embeddings=vectors[i:j], documents=texts[i:j]
            )
        ingest = time.perf_counter() - t
        log(f"size {size}: ingested given vectors in {ingest:.2f}s")
        # Measured with the client closed, as hindsight measures its database after dropping it:
        # whatever Chroma keeps in memory until then is on disk.
        store.shut()
        disk = dir_bytes(store.dir)

        t = time.perf_counter()
        store.open()
        store.collection.count()
        open_ms = (time.perf_counter() - t) * 1000.0
        k = min(K, size)
        with_embed = lambda q: store.collection.query(query_texts=[q["text"]], n_results=k)  # noqa: E731
        no_embed = lambda q: store.collection.query(query_embeddings=[q["_vec"]], n_results=k)  # noqa: E731
        for q in queries[:WARMUP]:  # loads the HNSW index from disk
            with_embed(q)
            no_embed(q)
        # Interleaved, one query each way per run, as hindsight's bench times its recalls.
        embed_samples, noembed_samples = [], []
        for r in range(runs):
            q = queries[r % len(queries)]
            embed_samples += time_n(1, lambda: with_embed(q))
            noembed_samples += time_n(1, lambda: no_embed(q))
        return {
            "size": size,
            "ingest_given_vectors_per_s": size / ingest,
            "query_noembed_p50_ms": percentile_ms(noembed_samples, 0.5),
            "query_noembed_p99_ms": percentile_ms(noembed_samples, 0.99),
            "query_embed_p50_ms": percentile_ms(embed_samples, 0.5),
            "query_embed_p99_ms": percentile_ms(embed_samples, 0.99),
            "bytes_per_memory": disk / size,
            "open_ms": open_ms,
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", required=True, help="directory with model.onnx and tokenizer.json")
    ap.add_argument("--texts", required=True, help='JSON lines {"text": ...}: ingested with embedding')
    ap.add_argument("--queries", required=True, help='JSON lines {"text": ..., "vector": [...]}')
    ap.add_argument("--corpus-texts", help='JSON lines {"text": ...}: short texts, ingested with embedding')
    ap.add_argument("--vectors", help="raw little-endian float32, N x dim")
    ap.add_argument("--vector-texts", help='JSON lines {"text": ...}, N of them, in --vectors order')
    ap.add_argument("--sizes", default="10000,100000", help="comma-separated collection sizes")
    ap.add_argument("--runs", type=int, default=200, help="timed queries per figure")
    ap.add_argument(
        "--threads",
        type=int,
        # sched_getaffinity is Linux's (it honours CPU pinning); cpu_count elsewhere.
        default=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1),
        help="onnxruntime intra-op threads (default: every core this process may use)",
    )
    args = ap.parse_args()
    if (args.vectors is None) != (args.vector_texts is None):
        ap.error("--vectors and --vector-texts go together")
    if args.runs < 1:
        ap.error("--runs must be at least 1")

    # Libraries that print keep stdout clean for the one JSON object.
    stdout, sys.stdout = sys.stdout, sys.stderr

    t = time.perf_counter()
    ef = HindsightOnnxEmbedding(args.models, args.threads)
    log(f"model loaded in {time.perf_counter() - t:.2f}s ({args.threads} threads)")
    dim = sanity_check(ef)

    texts = [r["text"] for r in read_jsonl(args.texts, "text")]
    queries = read_jsonl(args.queries, "text")
    if not texts or not queries:
        raise SystemExit("--texts and --queries must each hold at least one line")
    for i, q in enumerate(queries):
        vec = np.asarray(q.get("vector", []), dtype=np.float32)
        if vec.shape != (dim,):
            raise SystemExit(f"{args.queries}: query {i} has a vector of shape {vec.shape}, expected ({dim},)")
        q["_vec"] = vec
    # The given query vectors come from hindsight's embedder: agreement with this one shows both
    # sides run the same model the same way (tract and onnxruntime differ in the last digits).
    agreement = min(cosine(ef([q["text"]])[0], q["_vec"]) for q in queries)
    if agreement < 0.99:
        log(f"WARNING: a given query vector has cosine {agreement:.4f} with this embedder's: not the same model?")

    ef([SHORT])  # warm-up: the first run allocates
    short = time_n(args.runs, lambda: ef([SHORT]))

    out: Dict[str, Any] = {
        "system": "chroma",
        "chroma_version": chromadb.__version__,
        "onnxruntime_version": ort.__version__,
        "threads": args.threads,
        "dimension": dim,
        "runs": args.runs,
        "query_vector_agreement_min_cosine": agreement,
        "embed_short_ms": percentile_ms(short, 0.5),
    }
    out.update(bench_texts(ef, texts, queries, args.runs))
    if args.corpus_texts:
        corpus = [r["text"] for r in read_jsonl(args.corpus_texts, "text")]
        out["ingest_corpus_items"] = len(corpus)
        out["ingest_corpus_per_s"] = ingest_corpus(ef, corpus)

    sizes: List[Dict[str, Any]] = []
    if args.vectors:
        raw = np.fromfile(args.vectors, dtype="<f4")
        if raw.size % dim:
            raise SystemExit(f"{args.vectors}: {raw.size} floats is not a whole number of {dim}-d vectors")
        vectors = raw.reshape(-1, dim)
        vtexts = [r["text"] for r in read_jsonl(args.vector_texts, "text")]
        if len(vtexts) != len(vectors):
            raise SystemExit(f"{len(vectors)} vectors but {len(vtexts)} texts in {args.vector_texts}")
        for s in [x.strip() for x in args.sizes.split(",") if x.strip()]:
            size = int(s)
            if size < 1 or size > len(vectors):
                reason = f"size {size} needs 1..{len(vectors)} vectors; {args.vectors} holds {len(vectors)}"
                log(f"skipping: {reason}")
                sizes.append({"size": size, "skipped": reason})
                continue
            sizes.append(bench_size(ef, vectors, vtexts, queries, size, args.runs))
            log(json.dumps(sizes[-1]))
    out["sizes"] = sizes

    stdout.write(json.dumps(out) + "\n")
    stdout.flush()


if __name__ == "__main__":
    main()
