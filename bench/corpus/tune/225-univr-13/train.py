import torch
import torch.nn.functional as F

labels = torch.tensor([-100] * 4)  # result after right truncation
logits = torch.randn(4, 8)
print((labels != -100).sum().item())
print(F.cross_entropy(logits, labels, ignore_index=-100).item())
