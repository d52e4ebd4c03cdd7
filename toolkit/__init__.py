"""Fine-tune encoders and decoders to extract clauses and entities; check data, export, serve."""

__version__ = "0.1.0"
