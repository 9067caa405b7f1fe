"""Ingestion: text → KG (chunking, extraction, entity merging) and records → temporal KG."""

from langgraph_kgmem.ingest.chunking import chunk_text
from langgraph_kgmem.ingest.extract import Extraction, LLMExtractor, OfflineExtractor
from langgraph_kgmem.ingest.pipeline import IngestReport, add_documents, add_triples, read_text_file
