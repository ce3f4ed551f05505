"""The indexing run: sources -> papers -> chunks -> embeddings -> bulk actions -> index.

Everything streams: papers are read one at a time, chunks are embedded in batches, and the
bulk actions are a generator consumed by ``elasticsearch.helpers.streaming_bulk``, so memory
stays bounded whatever the corpus size. Reading, chunking and embedding run in one background
thread up to ``EMBED_AHEAD`` batches ahead of the writes (``IndexRun(embed_ahead=0)``: all in
the caller's thread). Bad records are reported with their location,
counted, and cost nothing else.
"""

from __future__ import annotations

import os
import queue
import signal
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from elasticsearch import helpers

from indexer import layout
from indexer.chunker import chunk_paper
from indexer.embedder import Embedder
from indexer.models import Chunk, Paper
from indexer.readers import read_papers
from scholar_es.engine.index.hnsw import GRAPH_THRESHOLD
from scholar_es.errors import ConfigError, DiskFullError, InputError, is_disk_full

EMBED_BATCH = 64  # chunks embedded per model call: large enough to keep the model busy
#: batches a background thread reads, chunks and embeds ahead of the one being written
#: (IndexRun(embed_ahead=0): the sequential path, everything in the caller's thread)
EMBED_AHEAD = 2
#: fault hook for the crash tests: the process kills itself (SIGKILL, no cleanup runs) once this
#: many papers were acknowledged by the index, i.e. in the middle of a run
FAULT_ENV = "SCHOLAR_ES_FAULT_KILL_AFTER_PAPERS"


def count_records(sources: Iterable[str | Path]) -> int | None:
    """Records (non-empty lines) in the JSON-lines ``sources``, for a progress total and ETA (every
    format is one record a line; a BEIR directory is its ``corpus.jsonl``). None when a source cannot
    be read; bad records are counted too, as the reader reports each."""
    total = 0
    for source in sources:
        path = Path(source)
        if path.is_dir():
            path = path / "corpus.jsonl"
        try:
            with path.open("rb") as f:
                total += sum(1 for line in f if line.strip())
        except OSError:
            return None
    return total


@dataclass
class IndexSummary:
    papers: int = 0
    chunks: int = 0
    rejected: int = 0
    errors: list[str] = field(default_factory=list)
    #: one line per input file with keys its format does not read (``indexer.readers``)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    encode_seconds: float = 0.0
    indices: dict[str, str] = field(default_factory=dict)
    #: half-built versions a killed run had left, deleted before this run started
    cleaned: list[str] = field(default_factory=list)
    #: versions older than the previous one, deleted after the aliases moved
    pruned: list[str] = field(default_factory=list)

    @property
    def chunks_per_second(self) -> float:
        return self.chunks / self.seconds if self.seconds else 0.0

    def line(self) -> str:
        return (
            f"indexed {self.papers} papers, {self.chunks} chunks; rejected {self.rejected} records; "
            f"{self.seconds:.1f} s ({self.chunks_per_second:.1f} chunks/s)"
        )


def embedding_text(chunk: Chunk, paper: Paper) -> str:
    """What the model embeds: the heading gives a paragraph its context (the abstract gets the title)."""
    return chunk_embedding_text(chunk.section_type, chunk.section_heading, paper.title, chunk.text)


def chunk_embedding_text(section_type: str, heading: str, title: str, text: str) -> str:
    """:func:`embedding_text` from a chunk document's fields (``indexer.update`` re-embeds with it)."""
    if section_type == "abstract":
        return f"{title}\n{text}" if title else text
    return f"{heading}\n{text}" if heading else text


def chunk_doc(chunk: Chunk, paper: Paper, vector) -> dict:
    return {
        "chunk_id": chunk.id,
        "paper_id": paper.id,
        "title": paper.title,
        "abstract": paper.abstract,
        "chunk_text": chunk.text,
        "section_heading": chunk.section_heading,
        "section_type": chunk.section_type,
        "paragraph_ids": chunk.paragraph_ids,
        "position": chunk.position,
        "year": paper.year,
        "venue": paper.venue,
        "authors": paper.authors,
        "vector": [float(x) for x in vector],
    }


def paper_doc(paper: Paper, chunks: list[Chunk], vector) -> dict:
    return {
        "paper_id": paper.id,
        "title": paper.title,
        "abstract": paper.abstract,
        "authors": paper.authors,
        "year": paper.year,
        "venue": paper.venue,
        "section_types": sorted({c.section_type for c in chunks}),
        "n_chunks": len(chunks),
        "chunk_ids": [c.id for c in chunks],
        "vector": [float(x) for x in vector],
    }


T = TypeVar("T")


class _Failed:
    """What the producer thread raised; re-raised in the consumer with its own traceback."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


_DONE = object()


def _ahead(items: Iterator[T], depth: int) -> Generator[T, None, None]:
    """``items``, produced by one background thread at most ``depth`` items ahead of the
    consumer. An exception in the producer is raised here (its traceback shows where it was
    raised in the producer); closing this generator (the bulk stopped, Ctrl-C in the consumer)
    stops the producer at its next item and waits for it."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put(item):
                    return
            put(_DONE)
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, which raises it
            put(_Failed(e))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=produce, name="scholar-es-embed-ahead", daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is _DONE:
                return
            if isinstance(item, _Failed):
                raise item.error
            yield item
    finally:
        stop.set()
        thread.join()


class IndexInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped an indexing run; the message says what was kept (raised by :meth:`IndexRun.run`)."""


class IndexRun:
    """One ``scholar-es index`` run over some sources into one engine or cluster."""

    def __init__(
        self,
        es,
        embedder: Embedder,
        *,
        prefix: str = "",
        chunking: str = "paragraph",
        rebuild: bool = False,
        bulk_size: int = 500,
        embed_ahead: int = EMBED_AHEAD,
        on_error: Callable[[str], None] | None = None,
        on_progress: Callable[[int, int], None] | None = None,
        on_stage: Callable[[str], None] | None = None,
        on_warning: Callable[[str], None] | None = None,
    ) -> None:
        self.es, self.embedder = es, embedder
        self.prefix, self.chunking, self.rebuild, self.bulk_size = prefix, chunking, rebuild, bulk_size
        self.embed_ahead = embed_ahead
        self.on_error = on_error or (lambda msg: None)
        self.on_progress = on_progress or (lambda papers, chunks: None)
        #: told what a long step without progress of its own is doing (the final refresh)
        self.on_stage = on_stage or (lambda message: None)
        #: told about input keys the format does not read (one line per file, also in the summary)
        self.on_warning = on_warning or (lambda message: None)
        self.summary = IndexSummary()
        self._in_flight: dict[tuple[str, str], str] = {}  # (index, doc id) -> where it came from
        self._seen: dict[str, str] = {}  # paper id -> the source that gave it first
        self._fresh = False  # indices created by this run hold no earlier chunks
        self._written = 0  # papers the index acknowledged
        self._kill_after = int(os.environ.get(FAULT_ENV) or 0) or None

    def reject(self, message: str) -> None:
        self.summary.rejected += 1
        self.summary.errors.append(message)
        self.on_error(message)

    def warn(self, message: str) -> None:
        self.summary.warnings.append(message)
        self.on_warning(message)

    def papers(self, readers: Iterable[tuple[str, Iterable]]) -> Iterator[tuple[Paper, str]]:
        for source, items in readers:
            for item in items:
                if isinstance(item, InputError):
                    self.reject(str(item))
                elif item.id in self._seen:  # the reader checks one file; this checks the whole run
                    self.reject(
                        f"{source}: duplicate id {item.id!r}, first seen in {self._seen[item.id]}; skipped"
                    )
                else:
                    self._seen[item.id] = source
                    yield item, source

    def actions(
        self, papers: Iterable[tuple[Paper, str]], targets: dict[str, str]
    ) -> Generator[dict, None, None]:
        """Bulk actions in batches: every chunk embedded once, then written with a stable id.

        With ``embed_ahead`` > 0 one background thread reads, chunks and embeds up to that many
        batches ahead (a bounded queue) while the caller writes the previous ones; 0 does it all
        in the caller's thread, batch after batch."""
        batches = self._batches(papers)
        if self.embed_ahead > 0:
            batches = _ahead(batches, self.embed_ahead)
        try:
            for batch, vectors in batches:
                yield from self._batch_actions(batch, vectors, targets)
        finally:  # closed early (Ctrl-C, a failed write): the embedding thread stops now, not at GC
            batches.close()

    def _batches(self, papers: Iterable[tuple[Paper, str]]) -> Generator[tuple[list, Any], None, None]:
        """(papers with their chunks and source, their vectors), EMBED_BATCH chunks at a time."""
        batch: list[tuple[Paper, list[Chunk], str]] = []
        size = 0
        for paper, source in papers:
            try:
                chunks = chunk_paper(paper, self.chunking)
            except InputError as e:  # a paper the chunker cannot split is one bad record
                self.reject(f"{source}: paper {paper.id!r}: {e}")
                continue
            batch.append((paper, chunks, source))
            size += len(chunks) + 1
            if size >= EMBED_BATCH:
                yield batch, self._embed(batch)
                batch, size = [], 0
        if batch:
            yield batch, self._embed(batch)

    def _embed(self, batch: list[tuple[Paper, list[Chunk], str]]) -> Any:
        """One row per paper (title + abstract) followed by one per chunk, in batch order."""
        texts = []
        for paper, chunks, _ in batch:
            head = f"{paper.title}\n{paper.abstract}".strip()
            texts.append(head or (embedding_text(chunks[0], paper) if chunks else paper.id))
            texts.extend(embedding_text(c, paper) for c in chunks)
        # a BEIR paper's text and its only chunk's text are the same string: embed it once,
        # whatever embedder is plugged in
        unique = list(dict.fromkeys(texts))
        row = {t: i for i, t in enumerate(unique)}
        return self.embedder.encode(unique)[[row[t] for t in texts]]

    def _previous_chunks(self, batch, targets) -> dict[str, set[str]]:
        """Chunk ids the papers of this batch had in the index before (none in a fresh index)."""
        if self._fresh:
            return {}
        ids = [paper.id for paper, _, _ in batch]
        resp = self.es.search(
            index=targets["papers"], query={"ids": {"values": ids}}, size=len(ids), _source=["chunk_ids"]
        )
        return {h["_id"]: set(h["_source"].get("chunk_ids") or []) for h in resp["hits"]["hits"]}

    def _batch_actions(self, batch, vectors, targets) -> Iterator[dict]:
        previous = self._previous_chunks(batch, targets)
        i = 0
        for paper, chunks, source in batch:
            paper_vec = vectors[i]
            i += 1
            for chunk in chunks:
                self._in_flight[(targets["chunks"], chunk.id)] = source
                yield {
                    "_index": targets["chunks"],
                    "_id": chunk.id,
                    "_source": chunk_doc(chunk, paper, vectors[i]),
                }
                i += 1
            # a paper that now has fewer chunks must not keep its old ones
            for stale in sorted(previous.get(paper.id, set()) - {c.id for c in chunks}):
                self._in_flight[(targets["chunks"], stale)] = source
                yield {"_op_type": "delete", "_index": targets["chunks"], "_id": stale}
            self._in_flight[(targets["papers"], paper.id)] = source
            yield {
                "_index": targets["papers"],
                "_id": paper.id,
                "_source": paper_doc(paper, chunks, paper_vec),
            }
            self.summary.papers += 1
            self.summary.chunks += len(chunks)
            self.on_progress(self.summary.papers, self.summary.chunks)

    def run(self, sources: list[str | Path], fmt: str = "auto") -> IndexSummary:
        """Index ``sources``; bad paths or options raise before anything is written."""
        start = time.perf_counter()
        readers = [
            (str(source), read_papers(source, fmt, on_warning=self.warn)) for source in sources
        ]  # ConfigError now, not midway
        meta = {"embedding_model": self.embedder.name, "dims": self.embedder.dims, "chunking": self.chunking}
        backend = getattr(self.embedder, "backend", None)  # any embedder may be plugged in
        if backend is not None:
            meta["embedding_backend"] = backend
        targets, self._fresh, self.summary.cleaned = layout.prepare(
            self.es, self.prefix, self.embedder.name, self.embedder.dims, meta, self.rebuild
        )
        self.summary.indices = targets
        try:
            self._write(readers, targets)
            if self._fresh and self.summary.papers == 0:
                raise ConfigError(
                    "no paper was indexed (every record was rejected or the input was empty); "
                    "the aliases were left as they were"
                )
        except KeyboardInterrupt:
            if self._fresh:
                layout.discard(self.es, targets)
            raise IndexInterrupted(self.interrupted_message()) from None
        except BaseException:
            if self._fresh:
                layout.discard(self.es, targets)
            raise
        self.summary.pruned = layout.publish(self.es, self.prefix, targets)
        self.summary.seconds = time.perf_counter() - start
        self.summary.encode_seconds = self.embedder.encode_seconds
        return self.summary

    def interrupted_message(self) -> str:
        """What an interrupted run leaves: the index (a first build: nothing; an update: the papers
        the index acknowledged) and the embedding cache, which a rerun reuses."""
        if self._fresh:
            where = (
                f"nothing was published: the half-built {', '.join(self.summary.indices.values())} "
                "were deleted and the aliases are as they were"
            )
        else:
            where = (
                f"{self._written} papers (at least) were written to the existing indices (updated in place, "
                "still searchable); the rest are as they were"
            )
        cache = getattr(self.embedder, "cache_path", None)
        encoded = getattr(self.embedder, "encoded", 0)
        kept = (
            f"the {encoded} embeddings computed so far are kept in the cache {cache}, so rerunning the "
            "same command reuses them and embeds only the rest"
            if cache
            else "no embedding cache is in use: a rerun embeds everything again"
        )
        return (
            f"interrupted after {self.summary.papers} papers ({self.summary.chunks} chunks) were read and "
            f"embedded; {where}; {kept}"
        )

    def _write(self, readers, targets: dict[str, str]) -> None:
        actions = self.actions(self.papers(readers), targets)
        try:
            self._bulk(actions, targets)
        finally:  # a Ctrl-C or an error stops the reading and embedding before run() reports
            actions.close()
        self.on_stage(
            f"refreshing {self.summary.chunks} chunks (the embedded engine builds the kNN graph of "
            f"a vector field of {GRAPH_THRESHOLD:,}+ vectors here: minutes at 100k+) ..."
        )
        self.es.indices.refresh(index=",".join(targets.values()))

    def _bulk(self, actions: Iterator[dict], targets: dict[str, str]) -> None:
        for ok, item in helpers.streaming_bulk(
            self.es,
            actions,
            chunk_size=self.bulk_size,
            raise_on_error=False,
            max_retries=5,
            initial_backoff=1,
        ):
            op_type, op = next(iter(item.items()))
            if op.get("_index") == targets["papers"] and op_type == "index" and ok:
                self._written += 1
                if self._written == self._kill_after:
                    os.kill(os.getpid(), signal.SIGKILL)
            source = self._in_flight.pop((op.get("_index", ""), op.get("_id", "")), "?")
            if not ok and not (op_type == "delete" and op.get("status") == 404):
                err = op.get("error", {})
                reason = err.get("reason", err) if isinstance(err, dict) else err
                if is_disk_full(err):  # every later write would fail alike: stop, say it once
                    raise DiskFullError(f"indexing stopped at {source}: {reason}")
                self.reject(f"{source}: document {op.get('_id')!r} refused by the index: {reason}")
