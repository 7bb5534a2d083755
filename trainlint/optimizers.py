"""Facts about torch.optim both sides of trainlint state the same way (the static rules and the
guard): what an optimizer keeps between steps, as messages name it."""

# SGD keeps momentum buffers only with momentum > 0; the others always keep state.
OPTIMIZER_STATE = {
    "Adam": "moment estimates", "AdamW": "moment estimates", "Adamax": "moment estimates",
    "NAdam": "moment estimates", "RAdam": "moment estimates", "SparseAdam": "moment estimates",
    "Adagrad": "accumulated squared gradients", "Adadelta": "running averages", "RMSprop": "running averages",
    "SGD": "momentum buffers",
}
