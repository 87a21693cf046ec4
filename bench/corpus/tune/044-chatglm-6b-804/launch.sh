bash train.sh
bash evaluate.sh
bash web_demo.sh
