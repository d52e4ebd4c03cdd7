"""Deployment: ONNX export with parity gates, the BentoML extraction service, and starting/stopping it."""
