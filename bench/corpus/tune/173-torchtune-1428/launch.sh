tune run eleuther_eval --config eleuther_evaluation.yaml
