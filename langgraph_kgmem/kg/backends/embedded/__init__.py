"""The embedded backend: one private KG directory holding the structure in SQLite and the vectors
in Chroma or numpy (:mod:`.opener` opens it; :mod:`.sqlite`, :mod:`.vectors` and :mod:`.files`
are its structure store, vector indexes and on-disk files)."""
