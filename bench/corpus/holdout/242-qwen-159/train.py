import torch

batch_question = ["今天我想吃点啥，甜甜的，推荐下","我马上迟到了，怎么做才能不迟到","我想听你说爱我。"]
batch_input_ids = tokenizer(
        batch_question
        ,padding=True
        ,max_length=2048
        ,truncation=True
        ,return_tensors="pt"
    )
# print(batch_input_ids)
batch_input_ids1 = torch.LongTensor(batch_input_ids['input_ids']).to(model.device)
# print(batch_input_ids1)

batch_out_ids = model.generate(
    input_ids=batch_input_ids1
    ,return_dict_in_generate=False
    ,max_length=2048
    # ,do_sample=True
    # ,temperature=0.95
    # ,top_p=0.7
    # ,num_beams=1
    # ,eos_token_id=2
)
batch_response = [tokenizer.decode(o, skip_special_tokens=True) for o in batch_out_ids]
print(batch_response)
