accelerate launch test.py
