"""TL306: Fine-tuning: the optimizer is built over the classifier head, then the head is replaced for the
new number of classes; the optimizer keeps stepping the old head, which is no longer in the model."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        return self.head(self.backbone(x))


model = Classifier()
model.backbone.requires_grad_(False)
optimizer = torch.optim.Adam(model.head.parameters(), lr=1e-3)  # expect: TL306
model.head = nn.Linear(16, 3)
for step in range(6):
    x, y = torch.randn(4, 8), torch.randint(0, 3, (4,))
    optimizer.zero_grad()
    F.cross_entropy(model(x), y).backward()
    optimizer.step()
