"""Static engine: parse with libcst, resolve names ourselves, derive events, explore control flow."""
