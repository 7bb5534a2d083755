"""DCGAN-style discriminator step: two mean losses backpropagated for one batch, then one step.
Not gradient accumulation, so not a TL201 finding."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
netG = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh())
netD = torch.nn.Sequential(torch.nn.Linear(8, 1))
optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
dataloader = DataLoader(TensorDataset(torch.randn(32, 8)), batch_size=8)

for epoch in range(2):
    for (real,) in dataloader:
        netD.zero_grad()
        label = torch.ones(real.size(0), 1)
        errD_real = F.binary_cross_entropy_with_logits(netD(real), label)
        errD_real.backward()
        fake = netG(torch.randn(real.size(0), 4))
        errD_fake = F.binary_cross_entropy_with_logits(netD(fake.detach()), torch.zeros_like(label))
        errD_fake.backward()
        optimizerD.step()

        netG.zero_grad()
        errG = F.binary_cross_entropy_with_logits(netD(fake), label)
        errG.backward()
        optimizerG.step()
