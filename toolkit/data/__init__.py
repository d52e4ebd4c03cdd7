"""Data: the span record, validation and `toolkit check`, importers and exporters, unlabeled corpora, the embedded "
"sample."""
