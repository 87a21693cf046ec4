!python -m axolotl.cli.preprocess mine/llama-2-32k.yml --debug
!accelerate launch -m axolotl.cli.train mine/llama-2-32k.yml
