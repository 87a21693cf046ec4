python -m lmdeploy.serve.turbomind.deploy vicuna /home/ubuntu/checkpoint-1400/ --tp 2
python3 -m lmdeploy.serve.openai.api_server ./workspace 0.0.0.0 8011 --instance_num 32 --tp 2
