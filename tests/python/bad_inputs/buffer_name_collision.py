"""Bad input: a module with a buffer 'stats' and a buffer 'stats/mean'
(register_buffer allows '/'): in the report both would be at
steps/<k>/buffers/stats, once a dataset and once a group."""
import torch
import torch.nn.functional as F


class WithStats(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("stats", torch.zeros(4))
        self.register_buffer("stats/mean", torch.zeros(4))

    def forward(self, x):
        return self.lin(x)


def model_fn():
    return WithStats()


def batch_fn(step):
    return torch.randn(2, 4), torch.randn(2, 4)


def baseline(model, batch):
    x, y = batch
    return F.mse_loss(model(x), y)


runs = {"plain_again": baseline}
