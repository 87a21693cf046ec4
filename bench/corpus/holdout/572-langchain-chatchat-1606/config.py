LLM_MODEL = "baichuan-13b"
llm_model_dict = {
    "baichuan-13b": {
        "local_model_path": "./model_new_0926",
        "api_base_url": "http://localhost:8888/v1", 
        "api_key": "EMPTY"
    }
}
