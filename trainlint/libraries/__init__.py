"""Library models: what third-party training APIs do, as data (see README.md)."""
