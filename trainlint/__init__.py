"""trainlint: training-correctness linter, static analyzer and runtime guard for PyTorch."""
__version__ = "0.1.0"


def __getattr__(name: str):
    # The runtime guard loads on first use, so `import trainlint` (the static linter) stays light;
    # neither import below imports torch (a guard imports it when it starts).
    if name == "guard":
        from .runtime.guard import guard

        return guard
    if name == "TrainingInvariantError":
        from .runtime.errors import TrainingInvariantError

        return TrainingInvariantError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
