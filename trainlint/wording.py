"""Consequences that the static engine and the guard both state, worded once so that the two
reports of one finding say the same thing."""


def normalised_twice(what: str) -> str:
    """What feeding cross-entropy the output of ``what`` does. Probabilities are squashed again;
    log-probabilities come back unchanged (log_softmax is idempotent), so that loss is right only
    by that accident."""
    ops = what.split(" or ")
    logs = [op for op in ops if ("log_softmax" in op or "LogSoftmax" in op) and not op.startswith("exp(")]
    if len(logs) == len(ops):
        return ("log_softmax of log-probabilities gives them back unchanged, so the loss is right only by "
                "that accident: the output reads as log-probabilities that this loss treats as logits, and "
                "a softmax or a temperature put in its place trains on squashed scores with no error")
    squashed = "the logits are squashed twice, gradients shrink as predictions sharpen and training stalls at a worse loss"
    if logs:  # several candidate outputs: say what each kind does
        return (f"through {' or '.join(op for op in ops if op not in logs)} {squashed}; through "
                f"{' or '.join(logs)} the log-probabilities come back unchanged, right only by that accident")
    return squashed
