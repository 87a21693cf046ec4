# the input
example = f'What is the correct answer to this question:{question}\nChoices:\n{choices_str}\nAnswer: {answer}'
response_template = 'Answer:' # fine
response_template = 'Answer: ' # failed
collator = DataCollatorForCompletionOnlyLM(response_template, tokenizer=tokenizer)
