"""The model zoo: named offline models and tokenizers (`pretrained`), building a task's model with its dropout
and LoRA (`building`), the Gemma conversion (`gemma`), bidirectional attention for decoders (`attention`), and
loading a saved model on its runtime (`runtimes`, `openvino`)."""
