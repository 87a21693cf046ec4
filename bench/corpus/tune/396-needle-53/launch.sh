needle finetune data.jsonl --epochs 3 --checkpoint needle2.pkl
