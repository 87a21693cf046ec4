bash examples/multi_agent/run-qwen3-30B-A3B-multi-agent.sh
