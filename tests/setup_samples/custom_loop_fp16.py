import torch
import torch.nn.functional as F

model = build_model().cuda().half()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
scaler = torch.cuda.amp.GradScaler()


def attention(q, k, v, mask):
    scores = q @ k.transpose(-2, -1) / q.size(-1) ** 0.5
    scores = scores.masked_fill(mask == 0, -1e9)
    return F.softmax(scores, dim=-1) @ v


for batch in loader:
    input_ids = batch["input_ids"].cuda()
    labels = input_ids.clone()
    loss = model(input_ids, labels=labels).loss
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
