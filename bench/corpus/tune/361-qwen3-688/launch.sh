curl http://localhost:8081/v1/chat/completions \
    -H "Content-Type: application/json" \
    -d '{
    "model": "Qwen2-72B-Instruct",
    "stream": true,
    "stop_token_ids": [151645,151643],
    "stop": ["<|im_end|>"],
    "repetition_penalty": 1.9,
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "1+1等于几"}
    ]
    }'
