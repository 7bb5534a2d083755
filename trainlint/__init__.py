"""trainlint: training-correctness linter, static analyzer and runtime guard for PyTorch."""
__version__ = "0.1.0"
