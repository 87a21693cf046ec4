python3 microGPT.py
